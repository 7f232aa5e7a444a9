package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// checkVersion refuses a version the module set cannot be released at.
func checkVersion(version string) error {
	switch {
	case !semver.IsValid(version) || semver.Canonical(version) != version:
		return fmt.Errorf("version %q: want a canonical semantic version, such as v0.3.0 or v1.2.0-rc.1", version)
	case module.IsPseudoVersion(version):
		return fmt.Errorf("version %s has the form of a pseudo-version, which the go command gives to untagged commits", version)
	case semver.Major(version) != "v0" && semver.Major(version) != "v1":
		return fmt.Errorf("version %s: a major version above v1 needs a /%s suffix in every module path", version, semver.Major(version))
	}
	return nil
}

// An edit is what one go.mod becomes: at the release commit, and at the
// commit after it, which is the development state again.
type edit struct {
	m            *mod
	release, dev []byte
}

// rewrite returns the edit of m's go.mod for version. Both states require
// every module of the set at version; the release state of a released
// module also drops the replace directives, which only a main module's
// go.mod may rely on (the go command ignores a dependency's, and `go
// install pkg@version` refuses a module that has any).
func rewrite(s *set, m *mod, version string, released bool) (edit, error) {
	e := edit{m: m}
	for _, state := range []*[]byte{&e.release, &e.dev} {
		f, err := modfile.Parse(m.goMod(), m.data, nil)
		if err != nil {
			return e, err
		}
		for _, r := range f.Require {
			if !s.ours(r.Mod.Path) {
				continue
			}
			if s.byPath(r.Mod.Path) == nil {
				return e, fmt.Errorf("%s requires %s, which is not a module of go.work and so is never released", m.goMod(), r.Mod.Path)
			}
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return e, err
			}
		}
		if released && state == &e.release {
			for _, r := range f.Replace {
				if !s.ours(r.Old.Path) {
					return e, fmt.Errorf("%s replaces %s: a module's users ignore its replace directives, so a released module must build without them", m.goMod(), r.Old.Path)
				}
				if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return e, err
				}
			}
			if len(f.Exclude) > 0 {
				return e, fmt.Errorf("%s excludes %s: a module's users ignore its exclude directives", m.goMod(), f.Exclude[0].Mod)
			}
		}
		f.Cleanup()
		if *state, err = f.Format(); err != nil {
			return e, err
		}
	}
	return e, nil
}

// release makes, in the git repository at root, the release commit of
// version on the current branch, tags it for every released module, then
// makes the commit that restores the replace directives (the development
// state: the requirements stay at version). It pushes nothing and prints
// the command that does.
func release(root, version string, w io.Writer) (err error) {
	if err := checkVersion(version); err != nil {
		return err
	}
	s, err := readWorkTree(root)
	if err != nil {
		return err
	}
	if out, err := git(root, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return err
	} else if out != "" {
		return fmt.Errorf("the work tree has changes; commit or stash them first:\n%s", out)
	}
	for _, m := range s.released {
		if _, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+m.tag(version)); err == nil {
			return fmt.Errorf("tag %s exists", m.tag(version))
		}
	}
	var edits []edit
	for _, m := range s.released {
		e, err := rewrite(s, m, version, true)
		if err != nil {
			return err
		}
		edits = append(edits, e)
	}
	for _, m := range s.others {
		e, err := rewrite(s, m, version, false)
		if err != nil {
			return err
		}
		edits = append(edits, e)
	}

	start, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	start = strings.TrimSpace(start)
	var tags []string
	defer func() {
		if err == nil {
			return
		}
		// Leave the repository as it was: no tag, no commit, the go.mod
		// files as they were, in the index too (the tree was clean).
		for _, t := range tags {
			_, _ = git(root, "tag", "-d", t)
		}
		_, _ = git(root, "reset", "-q", "--soft", start)
		paths := []string{"reset", "-q", "--"}
		for _, e := range edits {
			_ = os.WriteFile(filepath.Join(root, filepath.FromSlash(e.m.goMod())), e.m.data, 0o644)
			paths = append(paths, e.m.goMod())
		}
		_, _ = git(root, paths...)
	}()

	if err := commit(root, edits, func(e edit) []byte { return e.release },
		"release "+version+": every module requires the others at "+version,
		"At this commit each module of go.work requires the others at\n"+
			version+" and no go.mod replaces them, so the module set resolves\n"+
			"through a module proxy once its tags are pushed. Made by make\n"+
			"release (scripts/release, docs/decisions.md D29)."); err != nil {
		return err
	}
	for _, m := range s.released {
		t := m.tag(version)
		if _, err := git(root, "tag", "-a", "-m", "golocker "+version+": "+m.path, t); err != nil {
			return err
		}
		tags = append(tags, t)
	}
	if err := commit(root, edits, func(e edit) []byte { return e.dev },
		"release "+version+": back to development, with replace directives",
		"Every module replaces the others by relative path again, so that\n"+
			"GOWORK=off builds use this checkout; the requirements stay at\n"+
			version+", the newest release."); err != nil {
		return err
	}

	// A detached HEAD has no branch to push: the tags alone.
	refs := tags
	if branch, berr := git(root, "symbolic-ref", "-q", "--short", "HEAD"); berr == nil {
		refs = append([]string{strings.TrimSpace(branch)}, tags...)
	}
	fmt.Fprintf(w, "release %s: tagged %d modules at %s, then the development commit on top.\n", version, len(tags), short(root, tags[0]))
	fmt.Fprintf(w, "Nothing is pushed. To publish:\n\n\tgit push origin %s\n", strings.Join(refs, " "))
	return nil
}

// commit writes each edit's state and commits the go.mod files that
// changed with the subject and body given; with no change it commits
// nothing.
func commit(root string, edits []edit, state func(edit) []byte, subject, body string) error {
	var paths []string
	for _, e := range edits {
		name := filepath.Join(root, filepath.FromSlash(e.m.goMod()))
		old, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if bytes.Equal(old, state(e)) {
			continue
		}
		if err := os.WriteFile(name, state(e), 0o644); err != nil {
			return err
		}
		paths = append(paths, e.m.goMod())
	}
	if len(paths) == 0 {
		return nil
	}
	if _, err := git(root, append([]string{"add", "--"}, paths...)...); err != nil {
		return err
	}
	_, err := git(root, "commit", "-q", "-m", subject, "-m", body)
	return err
}

// short is the abbreviated commit that rev names.
func short(root, rev string) string {
	out, err := git(root, "rev-parse", "--short", rev+"^{commit}")
	if err != nil {
		return rev
	}
	return strings.TrimSpace(out)
}
