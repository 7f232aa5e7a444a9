// Package doccheck holds tests that keep the repository's prose true to the
// tree: the paths that CONTRIBUTING.md's tour names exist.
package doccheck
