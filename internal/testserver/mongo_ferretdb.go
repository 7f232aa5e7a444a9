package testserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// ferretdbBuildTimeout bounds one build of the FerretDB helper; a cold
	// module and build cache takes about a minute on two cores.
	ferretdbBuildTimeout = 8 * time.Minute
	// ferretdbLockTimeout bounds the wait for another test binary that is
	// building the same helper.
	ferretdbLockTimeout = ferretdbBuildTimeout + time.Minute
)

// ferretdbMu keeps the tests of one binary from building at once; the lock
// file does the same across binaries (go test runs packages in parallel).
var ferretdbMu sync.Mutex

// startFerretDB starts FerretDB with its SQLite backend on a free loopback
// port, its databases in a temp dir.
func startFerretDB(t TB) *MongoServer {
	t.Helper()
	bin := ferretdbBinary(t)
	if bin == "" {
		return nil
	}
	dir := t.TempDir()
	port := FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	uri := "mongodb://" + addr + "/"
	proc := StartProcess(t, ProcessSpec{
		Name:  "ferretdb",
		Path:  bin,
		Args:  []string{"-listen", addr, "-dir", filepath.Join(dir, "data")},
		Dir:   dir,
		Ready: func(ctx context.Context) error { return mongoPing(ctx, uri) },
	})
	if proc == nil {
		return nil
	}
	return &MongoServer{URI: uri, Addr: addr, Proc: proc, FerretDB: true}
}

// goToolPath returns the go command, needed to build the FerretDB helper.
func goToolPath() string {
	return lookPath([]string{"go"}, "/usr/local/go/bin", "/usr/lib/go/bin")
}

// ferretdbSource returns the directory of the helper module, found next to
// this source file.
func ferretdbSource() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate package source")
	}
	dir := filepath.Join(filepath.Dir(file), "ferretdb")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("FerretDB helper module not found (built with -trimpath?): %w", err)
	}
	return dir, nil
}

// ferretdbBinary returns the path of the FerretDB helper, building it on
// first use. The binary is cached under the user cache dir, keyed by a hash
// of the helper's go.mod, go.sum and main.go and of the Go version, so each
// machine builds it once per change. When it cannot be had (no module
// proxy, a broken build) the test is skipped, or failed under
// LOCKER_REQUIRE_SERVERS=1, with the reason.
func ferretdbBinary(t TB) string {
	t.Helper()
	bin, built, err := ferretdbBuild()
	if err != nil {
		Unavailable(t, "no MongoDB: mongod not found and the FerretDB stand-in could not be built: %v", err)
		return ""
	}
	if built > 0 {
		t.Logf("testserver: built FerretDB helper %s in %v", bin, built.Round(time.Millisecond))
	}
	return bin
}

// ferretdbBuild returns the cached helper binary, building it if needed,
// and how long a build took (0 if none ran).
func ferretdbBuild() (string, time.Duration, error) {
	src, err := ferretdbSource()
	if err != nil {
		return "", 0, err
	}
	key, err := ferretdbKey(src)
	if err != nil {
		return "", 0, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "golocker-testserver")
	bin := filepath.Join(cache, ferretdbPrefix+key)
	if isExecutable(bin) {
		now := time.Now()
		_ = os.Chtimes(bin, now, now) // marks it used, see pruneFerretDB
		return bin, 0, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", 0, err
	}

	ferretdbMu.Lock()
	defer ferretdbMu.Unlock()
	unlock, err := lockFile(bin+".lock", ferretdbLockTimeout)
	if err != nil {
		return "", 0, err
	}
	defer unlock()
	if isExecutable(bin) { // another test binary built it while we waited
		return bin, 0, nil
	}
	start := time.Now()
	if err := buildFerretDB(src, bin); err != nil {
		return "", 0, err
	}
	pruneFerretDB(cache, bin)
	return bin, time.Since(start), nil
}

// ferretdbPrefix starts the name of every cached helper binary.
const ferretdbPrefix = "ferretdb-"

// ferretdbMaxIdle is how long a cached helper built from other sources
// (another checkout, an older go.sum) is kept after its last use.
const ferretdbMaxIdle = 14 * 24 * time.Hour

// pruneFerretDB removes cached helpers other than keep that have not been
// used for ferretdbMaxIdle, with their lock files.
func pruneFerretDB(cache, keep string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(cache, e.Name())
		if !strings.HasPrefix(e.Name(), ferretdbPrefix) || strings.Contains(e.Name(), ".") || path == keep {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > ferretdbMaxIdle {
			_ = os.Remove(path)
			_ = os.Remove(path + ".lock")
		}
	}
}

// ferretdbKey hashes what the helper binary depends on.
func ferretdbKey(src string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildFerretDB builds the helper into a temp file next to bin and renames
// it into place, so a reader never sees a half-written binary.
func buildFerretDB(src, bin string) error {
	gobin := goToolPath()
	if gobin == "" {
		return errors.New("go command not found")
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), ferretdbBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-o", tmp, ".")
	cmd.Dir = src
	// The helper is its own module: never let a go.work pull it into
	// another build.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("go build did not finish within %v: %w", ferretdbBuildTimeout, err)
		}
		return fmt.Errorf("%w\n%s", err, tail(string(out), 30))
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
