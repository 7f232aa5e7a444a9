// Package matrix keeps docs/feature-matrix.md true. Each driver's
// conformance test hands its report to Record, which compares it with the
// committed results/<driver>.json (or rewrites it under
// LOCKER_UPDATE_MATRIX=1, as `make docs` does); this package's own test
// renders the matrix from those files and compares it with the committed
// docs/feature-matrix.md. A change to a driver's declaration or to what the
// suite proves therefore fails the tests until the docs are regenerated.
package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golocker/locker/conformance"
)

// UpdateEnv names the environment variable that makes Record and the
// matrix test write files instead of comparing them.
const UpdateEnv = "LOCKER_UPDATE_MATRIX"

// Updating reports whether the files are being regenerated.
func Updating() bool { return os.Getenv(UpdateEnv) == "1" }

// Record compares rep with the committed results of its driver, or writes
// them when updating. A partial run (checks filtered out by -run) is not
// compared.
func Record(t *testing.T, rep *conformance.Report) {
	t.Helper()
	if !rep.Complete() {
		t.Log("matrix: partial run of the suite, results not compared")
		return
	}
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatalf("matrix: %v", err)
	}
	got = append(got, '\n')
	path, err := resultPath(rep.Driver)
	if err != nil {
		t.Fatalf("matrix: %v", err)
	}
	if Updating() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("matrix: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("matrix: no committed results for %s (%v): run `make docs`", rep.Driver, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("matrix: the suite's results for %s differ from %s: run `make docs` and commit the result", rep.Driver, path)
	}
}

// resultPath is results/<driver>.json in this package's directory, found
// from the module root.
func resultPath(driver string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	file := strings.NewReplacer("/", "-", " ", "-").Replace(driver) + ".json"
	return filepath.Join(root, "internal", "matrix", "results", file), nil
}

// moduleRoot walks up from the working directory to the go.mod of this
// module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 20 {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/golocker/locker\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("module root of github.com/golocker/locker not found")
}

// Load reads every committed result, sorted by driver name.
func Load() ([]*conformance.Report, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "internal", "matrix", "results", "*.json"))
	if err != nil {
		return nil, err
	}
	var reps []*conformance.Report
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r conformance.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		reps = append(reps, &r)
	}
	return reps, nil
}

// DocPath returns the path of docs/feature-matrix.md.
func DocPath() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "docs", "feature-matrix.md"), nil
}
