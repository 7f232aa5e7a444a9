package matrix_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/golocker/locker/internal/matrix"
)

func TestFeatureMatrixIsFresh(t *testing.T) {
	reps, err := matrix.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) == 0 {
		t.Fatal("no results in internal/matrix/results: run `make docs`")
	}
	got := matrix.Render(reps)
	path, err := matrix.DocPath()
	if err != nil {
		t.Fatal(err)
	}
	if matrix.Updating() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make docs`", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/feature-matrix.md is stale: run `make docs` and commit the result")
	}
}
