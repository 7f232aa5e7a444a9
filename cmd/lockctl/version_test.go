package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	const rev = "64c9818d9fdee17bfc66aeff03182d92b65d3693"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-25T02:54:33Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	build := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/golocker/locker/cmd/lockctl", Version: version}, Settings: settings}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install …@v1.2.0", build("v1.2.0", nil), "lockctl v1.2.0 go1.26.8"},
		{"go build in a clone, clean", build("v0.0.0-20261125025433-64c9818d9fde", vcs("false")), "lockctl v0.0.0-20261125025433-64c9818d9fde go1.26.8"},
		{"go build in a clone, modified", build("v0.0.0-20261125025433-64c9818d9fde+dirty", vcs("true")), "lockctl v0.0.0-20261125025433-64c9818d9fde+dirty go1.26.8"},
		{"a revision without a module version", build("(devel)", vcs("false")), "lockctl 64c9818d9fde (2026-11-25T02:54:33Z) go1.26.8"},
		{"a modified tree without a module version", build("(devel)", vcs("true")), "lockctl 64c9818d9fde (2026-11-25T02:54:33Z, modified) go1.26.8"},
		{"go run", build("(devel)", nil), "lockctl (devel) go1.26.8 (no version in this build: go run and -buildvcs=false leave it out)"},
		{"no build information", nil, "lockctl (devel) (no build information)"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
