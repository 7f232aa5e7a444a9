package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// writeProxy adds the released modules at version, made from their tags in
// the git repository at root, to the module proxy in dir, a directory that
// GOPROXY=file://DIR serves: for each module, @v/list and the version's
// .info, .mod and .zip, under the module's case-encoded path. It returns
// the module paths it added.
func writeProxy(root, version, dir string) ([]string, error) {
	s, err := readTag(root, version)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, m := range s.released {
		if err := writeProxyModule(root, m, version, dir); err != nil {
			return nil, fmt.Errorf("proxy: %s@%s: %w", m.path, version, err)
		}
		paths = append(paths, m.path)
	}
	return paths, nil
}

func writeProxyModule(root string, m *mod, version, dir string) error {
	tag := m.tag(version)
	goMod, err := git(root, "show", tag+":"+m.goMod())
	if err != nil {
		return err
	}
	when, err := git(root, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return err
	}
	escPath, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, escVersion)

	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", []byte(goMod), 0o644); err != nil {
		return err
	}
	f, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	subdir := m.dir
	if subdir == "." {
		subdir = ""
	}
	err = zip.CreateFromVCS(f, module.Version{Path: m.path, Version: version}, root, tag, subdir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}

	list := filepath.Join(vdir, "list")
	var versions []string
	if data, err := os.ReadFile(list); err == nil {
		versions = strings.Fields(string(data))
	} else if !os.IsNotExist(err) {
		return err
	}
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(list, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
