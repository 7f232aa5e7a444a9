package main

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// A mod is one module of the repository: its directory relative to the
// repository's root, in slash form ("." for the root module), its path, and
// its go.mod as read.
type mod struct {
	dir  string
	path string
	file *modfile.File
	data []byte
}

// goMod is the slash path of the mod's go.mod in the repository.
func (m *mod) goMod() string { return path.Join(m.dir, "go.mod") }

// tag is the mod's tag for version: the version itself for the root
// module, the directory then the version for a module in a subdirectory,
// as the go command looks them up.
func (m *mod) tag(version string) string {
	if m.dir == "." {
		return version
	}
	return m.dir + "/" + version
}

// set is the repository's modules: the released ones, which are the
// workspace's (go.work), and the others (every other go.mod in the tree:
// the helper commands the tests build and the examples with dependencies of
// their own), which are never tagged.
type set struct {
	root     string // the repository's root, absolute
	released []*mod // the root module first, then by directory
	others   []*mod
}

// byPath returns the released module whose path is p, or nil.
func (s *set) byPath(p string) *mod {
	for _, m := range s.released {
		if m.path == p {
			return m
		}
	}
	return nil
}

// rootPath is the root module's path; every released module's path is it
// or below it.
func (s *set) rootPath() string { return s.released[0].path }

// ours reports whether p is the path of a module of this repository,
// released or not.
func (s *set) ours(p string) bool {
	r := s.rootPath()
	return p == r || strings.HasPrefix(p, r+"/")
}

// readSet reads the module set of the repository at root from the files
// that read(name) returns, name being a slash path relative to root: the
// work tree's files for a release, a tag's for a proxy. trackedGoMods are
// the go.mod files of the tree, for the modules outside the workspace.
func readSet(root string, read func(name string) ([]byte, error), trackedGoMods []string) (*set, error) {
	data, err := read("go.work")
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	s := &set{root: root}
	inWork := map[string]bool{}
	for _, u := range work.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if dir == ".." || strings.HasPrefix(dir, "../") || path.IsAbs(dir) {
			return nil, fmt.Errorf("go.work uses %s, outside the repository", u.Path)
		}
		inWork[dir] = true
	}
	if !inWork["."] {
		return nil, fmt.Errorf("go.work does not use the root module")
	}
	readMod := func(dir string) (*mod, error) {
		name := path.Join(dir, "go.mod")
		data, err := read(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s has no module line", name)
		}
		return &mod{dir: dir, path: f.Module.Mod.Path, file: f, data: data}, nil
	}
	dirs := make([]string, 0, len(inWork))
	for dir := range inWork {
		dirs = append(dirs, dir)
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i] == "." || (dirs[j] != "." && dirs[i] < dirs[j]) })
	for _, dir := range dirs {
		m, err := readMod(dir)
		if err != nil {
			return nil, err
		}
		s.released = append(s.released, m)
	}
	// The go command finds a module of a subdirectory by its path below
	// the repository's: github.com/golocker/locker/redislock is the
	// directory redislock, tagged redislock/vX.Y.Z.
	for _, m := range s.released[1:] {
		if want := s.rootPath() + "/" + m.dir; m.path != want {
			return nil, fmt.Errorf("%s: module %s, want %s: a module's path must be the repository's path and its directory", m.goMod(), m.path, want)
		}
		if _, _, ok := module.SplitPathVersion(m.path); !ok {
			return nil, fmt.Errorf("%s: module %s: not a valid module path", m.goMod(), m.path)
		}
	}
	for _, name := range trackedGoMods {
		dir := path.Dir(name)
		if inWork[dir] {
			continue
		}
		m, err := readMod(dir)
		if err != nil {
			return nil, err
		}
		s.others = append(s.others, m)
	}
	return s, nil
}

// readWorkTree reads the module set of the work tree of the git
// repository at root; the modules outside the workspace are the tracked
// go.mod files', as a commit has them.
func readWorkTree(root string) (*set, error) {
	top, err := git(root, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	if top = strings.TrimSpace(top); !sameDir(top, root) {
		return nil, fmt.Errorf("%s is not the root of its repository, %s", root, top)
	}
	out, err := git(root, "ls-files", "--", "go.mod", "**/go.mod")
	if err != nil {
		return nil, err
	}
	return readSet(root, func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	}, strings.Fields(out))
}

// readTag reads the released modules of the repository at root as the
// root module's tag (the version) has them.
func readTag(root, version string) (*set, error) {
	return readSet(root, func(name string) ([]byte, error) {
		out, err := git(root, "show", version+":"+name)
		return []byte(out), err
	}, nil)
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}

// git runs git in dir and returns its standard output; its error includes
// what git printed on standard error.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
