// Command release releases golocker's module set at one version, in a
// local clone, pushing nothing (make release VERSION=vX.Y.Z):
//
//	go run ./scripts/release [-C repo] VERSION
//	go run ./scripts/release [-C repo] -proxy DIR VERSION
//
// The released modules are the workspace's (go.work): the root module,
// tagged VERSION, and each other one, tagged with its directory, as in
// redislock/VERSION, which is how the go command finds a module in a
// subdirectory. The first form makes two commits on the current branch:
// the release commit, where every go.mod requires the other modules at
// VERSION and replaces none of them, which it tags; then the development
// commit, where the replace directives are back and the requirements stay
// at VERSION (docs/decisions.md, D29). It prints the git push command that
// publishes both.
//
// The second form writes the modules at VERSION, from their tags, into a
// file-based module proxy in DIR: GOPROXY=file://DIR then serves them to
// the go command as the module proxy would once the tags are pushed.
// release_test.go uses it to build fresh user modules from a release.
//
// The modules outside the workspace (the helper commands that tests build,
// the examples with dependencies of their own) are never tagged: a
// release only moves their requirements on released modules to VERSION.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("C", ".", "the repository's root")
	proxy := flag.String("proxy", "", "write the tagged modules at VERSION into a file-based module proxy in `DIR` instead of releasing")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: release [-C repo] [-proxy DIR] VERSION\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	version := flag.Arg(0)
	root, err := filepath.Abs(*dir)
	if err == nil {
		if *proxy != "" {
			var paths []string
			if paths, err = writeProxy(root, version, *proxy); err == nil {
				fmt.Printf("proxy: %d modules at %s in %s\n", len(paths), version, *proxy)
			}
		} else {
			err = release(root, version, os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
