package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// The tests release this repository's work tree in a temporary clone, serve
// the tags through a file-based module proxy, and use them as a user would:
// a fresh module per driver that runs the README's install commands, then
// go mod tidy and go build, and `go install …/cmd/lockctl@VERSION`, with no
// replace directive anywhere and GOWORK=off. The third-party modules come
// from the module cache, else from the go command's own GOPROXY.
//
// The module cache is the user's: with a fresh one every dependency
// compiles again under a new path (a redislock user module took 203 s to
// resolve and build, against 20 s with the shared cache), so each run
// releases a pre-release version of its own, which no earlier run can have
// left in the cache, and removes it from the cache when it ends.

// TestReleaseResolvesWithoutReplace releases the work tree and builds a
// user module of each driver, then lockctl, from the proxy alone.
func TestReleaseResolvesWithoutReplace(t *testing.T) {
	if testing.Short() {
		t.Skip("releases the module set and builds a user module per driver: about a minute")
	}
	clone := cloneWorkTree(t)
	version := testVersion()
	before := strings.TrimSpace(mustGit(t, clone, "rev-parse", "HEAD"))

	start := time.Now()
	t.Cleanup(func() { t.Logf("%.1fs in all", time.Since(start).Seconds()) })
	cmd := exec.Command("make", "release", "VERSION="+version)
	cmd.Dir = clone
	cmd.Env = gitIdentity(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release VERSION=%s: %v\n%s", version, err, out)
	} else {
		t.Logf("make release VERSION=%s (%.1fs):\n%s", version, time.Since(start).Seconds(), out)
	}
	s := checkReleaseCommits(t, clone, before, version)

	env := proxyEnv(t, clone, version)
	inst := readInstall(t, clone, s.rootPath())
	bounds := footprintBounds(t, clone)
	for _, d := range drivers(s) {
		t.Run(d.dir, func(t *testing.T) {
			dir, err := consume(t, env, inst, d.path, version)
			if err != nil {
				t.Fatal(err)
			}
			graph, err := checkGraph(dir, env, s.rootPath(), version)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("go list -m all:\n%s", graph)
			// scripts/footprint.sh measures the same graph with replace
			// directives; the released one must keep to its bound.
			bound, ok := bounds[d.dir]
			if n := strings.Count(graph, "\n"); !ok || n > bound {
				t.Errorf("%d modules in the graph, want at most the bound of scripts/footprint.sh (%d, listed: %v)", n, bound, ok)
			}
		})
	}
	t.Run("lockctl", func(t *testing.T) {
		bin := t.TempDir()
		args := strings.Fields(strings.ReplaceAll(inst.lockctl, "@latest", "@"+version))
		if _, err := goRun(t.TempDir(), append(env, "GOBIN="+bin), args[1:]...); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "lockctl"), "version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), version) {
			t.Fatalf("lockctl version: %v: %q, want %s in it", err, out, version)
		}
	})
}

// TestUnreleasedTreeDoesNotResolve is the control: the development state,
// tagged as it is, gives a user module that does not resolve from the
// proxy, or resolves to modules of other versions (its requirements are
// the previous release's, or no version at all). So the check of
// TestReleaseResolvesWithoutReplace can fail.
func TestUnreleasedTreeDoesNotResolve(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the module proxy")
	}
	clone := cloneWorkTree(t)
	version := testVersion()
	s, err := readWorkTree(clone)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range s.released {
		mustGit(t, clone, "tag", m.tag(version))
	}
	env := proxyEnv(t, clone, version)
	inst := readInstall(t, clone, s.rootPath())
	for _, d := range drivers(s) {
		t.Run(d.dir, func(t *testing.T) {
			dir, err := consume(t, env, inst, d.path, version)
			if err == nil {
				_, err = checkGraph(dir, env, s.rootPath(), version)
			}
			if err == nil {
				t.Fatalf("the development state of %s, tagged %s, resolved to the tagged modules alone", d.path, version)
			}
			t.Logf("as expected: %v", err)
		})
	}
}

// readme is the README's install commands.
type readme struct {
	getRoot   string // go get of the root module
	getDriver string // go get of a driver, whose path is driverPath
	lockctl   string // go install of lockctl

	driverPath string
}

// readInstall reads the commands of the README's Install section, which
// users copy: the tests run exactly those, @latest being the test version
// and the driver each driver in turn.
func readInstall(t *testing.T, repo, rootPath string) readme {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var inst readme
	var section, block bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## Install"
		case section && strings.HasPrefix(line, "```"):
			block = !block
		case section && block:
			cmd, _, _ := strings.Cut(line, "#")
			f := strings.Fields(cmd)
			switch {
			case len(f) == 3 && f[0] == "go" && f[1] == "get" && f[2] == rootPath+"@latest":
				inst.getRoot = strings.Join(f, " ")
			case len(f) == 3 && f[0] == "go" && f[1] == "get" && strings.HasPrefix(f[2], rootPath+"/") && strings.HasSuffix(f[2], "@latest"):
				inst.getDriver = strings.Join(f, " ")
				inst.driverPath = strings.TrimSuffix(f[2], "@latest")
			case len(f) == 3 && f[0] == "go" && f[1] == "install" && f[2] == rootPath+"/cmd/lockctl@latest":
				inst.lockctl = strings.Join(f, " ")
			case len(f) > 0:
				t.Fatalf("README.md, Install: %q is not a command this test knows how to run", line)
			}
		}
	}
	if inst.getRoot == "" || inst.getDriver == "" || inst.lockctl == "" {
		t.Fatalf("README.md's Install section lacks a command: want go get %[1]s@latest, go get %[1]s/DRIVER@latest and go install %[1]s/cmd/lockctl@latest; got %+v", rootPath, inst)
	}
	return inst
}

// consume makes a user module of driver in a new directory, with the
// README's commands at version, and builds it. It returns the directory.
func consume(t *testing.T, env []string, inst readme, driver, version string) (string, error) {
	dir := t.TempDir()
	at := func(cmd string) []string {
		cmd = strings.ReplaceAll(cmd, inst.driverPath+"@", driver+"@")
		return strings.Fields(strings.ReplaceAll(cmd, "@latest", "@"+version))[1:]
	}
	steps := [][]string{
		{"mod", "init", "example.com/user"},
		at(inst.getRoot),
		at(inst.getDriver),
	}
	for _, args := range steps {
		if _, err := goRun(dir, env, args...); err != nil {
			return dir, err
		}
	}
	main := fmt.Sprintf(`package main

import (
	"context"
	"fmt"
	"os"

	"github.com/golocker/locker"
	_ %q
)

func main() {
	c, err := locker.Open(context.Background(), os.Getenv("LOCKER_URL"))
	fmt.Println(c, err)
}
`, driver)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644); err != nil {
		return dir, err
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		if _, err := goRun(dir, env, args...); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// checkGraph checks the user module in dir: no replace directive, and
// each of golocker's modules in its graph at version. It returns the
// graph, as go list -m all prints it.
func checkGraph(dir string, env []string, rootPath, version string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		return "", err
	}
	if len(f.Replace) > 0 {
		return "", fmt.Errorf("the user's go.mod has a replace directive:\n%s", data)
	}
	out, err := goRun(dir, env, "list", "-m", "all")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] == rootPath || strings.HasPrefix(f[0], rootPath+"/")) && f[1] != version {
			return "", fmt.Errorf("go list -m all: %q, want each of golocker's modules at %s:\n%s", line, version, out)
		}
	}
	return out, nil
}

// drivers are the released modules a user imports to get a driver: those
// named STORElock at the root of the repository (CONTRIBUTING.md).
func drivers(s *set) []*mod {
	var ds []*mod
	for _, m := range s.released {
		if !strings.Contains(m.dir, "/") && strings.HasSuffix(m.dir, "lock") {
			ds = append(ds, m)
		}
	}
	return ds
}

// footprintBounds reads the bound of each driver in scripts/footprint.sh,
// whose drivers array has lines such as "redislock 15".
func footprintBounds(t *testing.T, repo string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "scripts", "footprint.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\ndrivers=(\n")
	array, _, ok2 := strings.Cut(rest, "\n)\n")
	if !ok || !ok2 {
		t.Fatal("scripts/footprint.sh: no drivers=( ... ) array")
	}
	bounds := map[string]int{}
	for _, line := range strings.Split(array, "\n") {
		var driver string
		var bound int
		if _, err := fmt.Sscanf(strings.Trim(strings.TrimSpace(line), `"`), "%s %d", &driver, &bound); err != nil {
			t.Fatalf("scripts/footprint.sh: drivers: %q: %v", line, err)
		}
		bounds[driver] = bound
	}
	return bounds
}

// checkReleaseCommits checks what make release left in clone, whose HEAD
// was before: the release commit, tagged for every module, where no go.mod
// replaces and every requirement of golocker's is at version, then the
// development commit, which differs from before only in those versions.
func checkReleaseCommits(t *testing.T, clone, before, version string) *set {
	t.Helper()
	if got := strings.TrimSpace(mustGit(t, clone, "rev-parse", "HEAD~2")); got != before {
		t.Fatalf("HEAD~2 is %s, want the commit before the release, %s", got, before)
	}
	s, err := readTag(clone, version)
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimSpace(mustGit(t, clone, "rev-parse", "HEAD~1"))
	for _, m := range s.released {
		if got := strings.TrimSpace(mustGit(t, clone, "rev-parse", m.tag(version)+"^{commit}")); got != rel {
			t.Errorf("tag %s is at %s, want the release commit %s", m.tag(version), got, rel)
		}
		if len(m.file.Replace) > 0 {
			t.Errorf("%s at %s replaces %s", m.goMod(), version, m.file.Replace[0].Old.Path)
		}
		for _, r := range m.file.Require {
			if s.ours(r.Mod.Path) && r.Mod.Version != version {
				t.Errorf("%s at %s requires %s", m.goMod(), version, r.Mod)
			}
		}
		// The development commit: the go.mod of before, requirements
		// moved to version.
		old, err := modfile.Parse(m.goMod(), []byte(mustGit(t, clone, "show", before+":"+m.goMod())), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range old.Require {
			if s.ours(r.Mod.Path) {
				if err := old.AddRequire(r.Mod.Path, version); err != nil {
					t.Fatal(err)
				}
			}
		}
		old.Cleanup()
		want, _ := old.Format()
		if got := mustGit(t, clone, "show", "HEAD:"+m.goMod()); got != string(want) {
			t.Errorf("%s after the release:\n%s\nwant:\n%s", m.goMod(), got, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return s
}

// proxyEnv writes the modules tagged version in clone into a file-based
// proxy and returns the environment of a go command that sees the
// module set through it. When the test ends, the modules at version leave
// the module cache.
func proxyEnv(t *testing.T, clone, version string) []string {
	t.Helper()
	proxy := t.TempDir()
	paths, err := writeProxy(clone, version, proxy)
	if err != nil {
		t.Fatal(err)
	}
	modcache := goEnv(t, "GOMODCACHE")
	t.Cleanup(func() {
		// The zero pseudo-version is the development state's requirement
		// before the first release: no proxy serves it, and the control's
		// tries leave lock files of it.
		for _, v := range []string{version, module.ZeroPseudoVersion("v0")} {
			if err := purgeModCache(modcache, paths, v); err != nil {
				t.Error(err)
			}
		}
	})
	// No go env file either (GOENV=off): a GOPRIVATE or GONOPROXY set
	// there would send the tagged modules past the proxy. What the user
	// set that this test needs is passed on.
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	return append(env,
		"GOENV=off",
		// The tagged modules, then the third-party ones from wherever the
		// go command gets them.
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+goEnv(t, "GOPROXY"),
		// The tagged modules are in no checksum database.
		"GOSUMDB=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE="+modcache,
		"GOCACHE="+goEnv(t, "GOCACHE"),
		"GOPATH="+goEnv(t, "GOPATH"),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
}

// purgeModCache removes the modules paths at version from the module
// cache: what was extracted and what was downloaded.
func purgeModCache(modcache string, paths []string, version string) error {
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		esc, err := module.EscapePath(p)
		if err != nil {
			return err
		}
		extracted := filepath.Join(modcache, filepath.FromSlash(esc)+"@"+escVersion)
		// The go command makes the files read-only unless -modcacherw.
		_ = filepath.WalkDir(extracted, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		errs = append(errs, os.RemoveAll(extracted))
		removeEmptyDirs(modcache, filepath.Dir(extracted))

		vdir := filepath.Join(modcache, "cache", "download", filepath.FromSlash(esc), "@v")
		files, _ := filepath.Glob(filepath.Join(vdir, escVersion+".*"))
		for _, f := range files {
			errs = append(errs, os.Remove(f))
		}
		list := filepath.Join(vdir, "list")
		if data, err := os.ReadFile(list); err == nil {
			kept := slices.DeleteFunc(strings.Fields(string(data)), func(v string) bool { return v == version })
			if len(kept) == 0 {
				errs = append(errs, os.Remove(list))
			} else {
				errs = append(errs, os.WriteFile(list, []byte(strings.Join(kept, "\n")+"\n"), 0o644))
			}
		}
		removeEmptyDirs(modcache, vdir)
	}
	return errors.Join(errs...)
}

// removeEmptyDirs removes dir and its parents below top while they are
// empty.
func removeEmptyDirs(top, dir string) {
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// cloneWorkTree clones the repository this test is in into a temporary
// directory, with the work tree's changes and new files committed there,
// so that the test releases the work tree without touching the
// repository.
func cloneWorkTree(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if top := strings.TrimSpace(mustGit(t, repo, "rev-parse", "--show-toplevel")); !sameDir(top, repo) {
		t.Fatalf("the repository's root is %s, want %s", top, repo)
	}
	clone := filepath.Join(t.TempDir(), "golocker")
	mustGit(t, repo, "clone", "-q", repo, clone)
	if diff := mustGit(t, repo, "diff", "--binary", "HEAD"); diff != "" {
		cmd := exec.Command("git", "apply", "--index", "--whitespace=nowarn")
		cmd.Dir = clone
		cmd.Stdin = strings.NewReader(diff)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v\n%s", err, out)
		}
	}
	for _, name := range strings.Split(mustGit(t, repo, "ls-files", "--others", "--exclude-standard", "-z"), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repo, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(clone, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustGit(t, clone, "add", "-A")
	if mustGit(t, clone, "status", "--porcelain") != "" {
		cmd := exec.Command("git", "commit", "-q", "-m", "the work tree")
		cmd.Dir = clone
		cmd.Env = gitIdentity(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git commit: %v\n%s", err, out)
		}
	}
	return clone
}

// testVersion is a pre-release version of its own for each run, so that
// no module an earlier run left in the module cache can stand in for one
// of this run's.
func testVersion() string {
	return fmt.Sprintf("v0.0.0-releasetest.%d", time.Now().UnixNano())
}

// gitIdentity adds a committer to env, for machines with none configured.
func gitIdentity(env []string) []string {
	return append(env,
		"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release-test@example.com",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release-test@example.com")
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// goRun runs the go command in dir with env and returns its standard
// output; its error holds the command and all it printed.
func goRun(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v0.3.0", true},
		{"v1.2.0-rc.1", true},
		{"0.3.0", false},
		{"v0.3", false},
		{"v1.0.0+build", false},
		{"v2.0.0", false},
		{"v0.0.0-20260101000000-abcdefabcdef", false},
	} {
		if err := checkVersion(tc.version); (err == nil) != tc.ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", tc.version, err, tc.ok)
		}
	}
}

// TestReleaseRefuses checks that a release the module set cannot have
// fails and leaves the clone as it was.
func TestReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, clone string)
		want    string
	}{{
		name: "a change to commit first",
		prepare: func(t *testing.T, clone string) {
			appendFile(t, filepath.Join(clone, "redislock", "go.mod"), "\n")
		},
		want: "the work tree has changes",
	}, {
		name: "a third-party module replaced",
		prepare: func(t *testing.T, clone string) {
			appendFile(t, filepath.Join(clone, "redislock", "go.mod"), "\nreplace github.com/redis/go-redis/v9 => ../go-redis\n")
			commitAll(t, clone)
		},
		want: "replaces github.com/redis/go-redis/v9",
	}, {
		name: "a tag of the version",
		prepare: func(t *testing.T, clone string) {
			mustGit(t, clone, "tag", "zklock/v0.9.0")
		},
		want: "tag zklock/v0.9.0 exists",
	}, {
		// A tag named redislock keeps git from making redislock/v0.9.0,
		// after the release commit and the tags before it: they are undone.
		name: "a tag that git cannot make",
		prepare: func(t *testing.T, clone string) {
			mustGit(t, clone, "tag", "redislock")
		},
		want: "redislock/v0.9.0",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clone := cloneWorkTree(t)
			tc.prepare(t, clone)
			head := mustGit(t, clone, "rev-parse", "HEAD")
			status := mustGit(t, clone, "status", "--porcelain")
			tags := mustGit(t, clone, "tag", "-l")
			err := release(clone, "v0.9.0", io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("release: %v, want an error with %q", err, tc.want)
			}
			if mustGit(t, clone, "rev-parse", "HEAD") != head || mustGit(t, clone, "status", "--porcelain") != status || mustGit(t, clone, "tag", "-l") != tags {
				t.Error("the refused release changed the clone's HEAD, work tree or tags")
			}
		})
	}
}

func appendFile(t *testing.T, name, text string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func commitAll(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("git", "commit", "-q", "-a", "-m", "test")
	cmd.Dir = dir
	cmd.Env = gitIdentity(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
}
