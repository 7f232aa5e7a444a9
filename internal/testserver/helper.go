package testserver

// Helper commands: small programs in modules of their own (the etcd member,
// the FerretDB stand-in for mongod, the Docker starter), built with the go
// command the first time a test needs one. Each lives in its own module so
// that what it imports (etcd's server, FerretDB, testcontainers-go) never
// enters the go.mod of a driver, nor the module graph of a driver's users.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// helperBuildTimeout bounds one build of a helper; a cold module and
	// build cache takes about a minute for FerretDB on two cores.
	helperBuildTimeout = 8 * time.Minute
	// helperLockTimeout bounds the wait for another test binary that is
	// building the same helper.
	helperLockTimeout = helperBuildTimeout + time.Minute
	// helperMaxIdle is how long a cached helper built from other sources
	// (another checkout, an older go.sum) is kept after its last use.
	helperMaxIdle = 14 * 24 * time.Hour
)

// helperMu keeps the tests of one binary from building at once; the lock
// file does the same across binaries (go test runs packages in parallel).
var helperMu sync.Mutex

// GoTool returns the go command, which builds the helpers, or "" when
// there is none. go test puts its own on PATH.
func GoTool() string {
	return LookPath([]string{"go"}, "/usr/local/go/bin", "/usr/lib/go/bin")
}

// HelperSource returns the directory sub in the directory of the source
// file that calls it, where a server package keeps its helper's module. It fails when the test binary was built with
// -trimpath, which leaves no source path to go by.
func HelperSource(sub string) (string, error) {
	_, file, _, ok := runtime.Caller(1)
	if !ok {
		return "", errors.New("cannot locate package source")
	}
	dir := filepath.Join(filepath.Dir(file), sub)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("helper module %s not found (built with -trimpath?): %w", sub, err)
	}
	return dir, nil
}

// BuildHelper returns the path of the command whose module is in src,
// building it on first use. The binary is cached under the user cache
// directory as NAME-KEY, where KEY hashes the module's go.mod, go.sum and
// Go files and the Go version, so each machine builds it once per change
// and a running binary is never overwritten. It also returns how long a
// build took (0 if none ran). The module is built on its own (GOWORK=off,
// -mod=readonly), never as part of the repository's workspace.
func BuildHelper(name, src string) (string, time.Duration, error) {
	key, err := helperKey(src)
	if err != nil {
		return "", 0, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "golocker-testserver")
	prefix := name + "-"
	bin := filepath.Join(cache, prefix+key)
	if isExecutable(bin) {
		now := time.Now()
		_ = os.Chtimes(bin, now, now) // marks it used, see pruneHelpers
		return bin, 0, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", 0, err
	}

	helperMu.Lock()
	defer helperMu.Unlock()
	unlock, err := lockFile(bin+".lock", helperLockTimeout)
	if err != nil {
		return "", 0, err
	}
	defer unlock()
	if isExecutable(bin) { // another test binary built it while we waited
		return bin, 0, nil
	}
	start := time.Now()
	if err := buildHelper(src, bin); err != nil {
		return "", 0, err
	}
	pruneHelpers(cache, prefix, bin)
	return bin, time.Since(start), nil
}

// pruneHelpers removes cached helpers named prefix* other than keep that
// have not been used for helperMaxIdle, with their lock files.
func pruneHelpers(cache, prefix, keep string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(cache, e.Name())
		if !strings.HasPrefix(e.Name(), prefix) || strings.Contains(e.Name(), ".") || path == keep {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > helperMaxIdle {
			_ = os.Remove(path)
			_ = os.Remove(path + ".lock")
		}
	}
}

// helperKey hashes what a helper binary depends on: the Go version and
// platform, and the module's go.mod, go.sum and Go files.
func helperKey(src string) (string, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	files = append([]string{filepath.Join(src, "go.mod"), filepath.Join(src, "go.sum")}, files...)
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", filepath.Base(name))
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildHelper builds the module in src into a temp file next to bin and
// renames it into place, so a reader never sees a half-written binary.
func buildHelper(src, bin string) error {
	gobin := GoTool()
	if gobin == "" {
		return errors.New("go command not found")
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), helperBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-o", tmp, ".")
	cmd.Dir = src
	// The helper is its own module: never let the repository's go.work
	// pull it into the workspace's build.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("go build did not finish within %v: %w", helperBuildTimeout, err)
		}
		return fmt.Errorf("go build in %s: %w\n%s", src, err, Tail(string(out), 30))
	}
	return os.Rename(tmp, bin)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, polling for at most timeout,
// and returns the function that releases it.
func lockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: still held by another process after %v", path, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
