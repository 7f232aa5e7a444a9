package main

import (
	"runtime/debug"
	"strings"
)

// versionText is lockctl's version line, from its build information.
func versionText() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf is the version line of a build: "lockctl VERSION GO", where
// VERSION is the module's version when it has one (go install …@v1.2.0;
// go build in a git clone gives a pseudo-version from the commit), else
// the VCS revision with its time, and "modified" when the tree had
// uncommitted changes; a build without either (go run, -buildvcs=false,
// a tree outside git) says so.
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "lockctl (devel) (no build information)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return "lockctl " + v + " " + bi.GoVersion
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "lockctl (devel) " + bi.GoVersion + " (no version in this build: go run and -buildvcs=false leave it out)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var about []string
	if at != "" {
		about = append(about, at)
	}
	if modified {
		about = append(about, "modified")
	}
	if len(about) > 0 {
		rev += " (" + strings.Join(about, ", ") + ")"
	}
	return "lockctl " + rev + " " + bi.GoVersion
}
