package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/testserver/etcdserver"
	"github.com/golocker/locker/internal/testserver/mongoserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/internal/testserver/zkserver"
	"github.com/golocker/locker/locallock"
	"github.com/golocker/locker/lockadmin"
)

// e2eDir holds the Node script that drives Chromium, and its pinned
// playwright-core.
const e2eDir = "testdata/e2e"

// chromiumPath is Debian's Chromium; Playwright never downloads a browser
// here.
const chromiumPath = "/usr/bin/chromium"

// e2eBackend is a backend the admin page's end-to-end test runs on.
type e2eBackend struct {
	name string
	url  func(t *testing.T) string
}

// e2eBackends returns every backend whose driver can inspect, each
// started by its package under internal/testserver. It is the one place
// this test uses them.
func e2eBackends() []e2eBackend {
	return []e2eBackend{
		{"redis", func(t *testing.T) string { return "redis://" + redisserver.Redis(t).Addr }},
		{"sqlite", func(t *testing.T) string { return sqlserver.SQLite(t).URL }},
		{"postgres", func(t *testing.T) string { return sqlserver.Postgres(t).URL }},
		{"mariadb", func(t *testing.T) string { return sqlserver.MySQL(t).URL }},
		{"etcd", func(t *testing.T) string { return "etcd://" + strings.Join(etcdserver.Etcd(t).Endpoints, ",") }},
		{"zookeeper", func(t *testing.T) string { return "zk://" + zkserver.ZooKeeper(t).ConnectString() }},
		{"mongodb", func(t *testing.T) string { return mongoserver.Mongo(t).URI }},
	}
}

// e2eUnavailable skips t for want of a tool, or fails it when
// LOCKER_REQUIRE_SERVERS asks for everything to run (as CI does).
func e2eUnavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "; the test needs Debian's Chromium (apt-get install chromium, or scripts/install-test-deps.sh), node >= 20 and npm, and playwright-core, which it installs itself (or: cd cmd/lockctl/" + e2eDir + " && npm ci)"
	switch strings.ToLower(os.Getenv("LOCKER_REQUIRE_SERVERS")) {
	case "1", "true", "yes":
		t.Fatalf("%s (failing instead of skipping because LOCKER_REQUIRE_SERVERS is set)", msg)
	}
	t.Skipf("%s (set LOCKER_REQUIRE_SERVERS=1 to make this a failure)", msg)
}

var npmCI sync.Once

// e2eTools checks for node and chromium, and installs playwright-core
// with `npm ci` when node_modules lacks it.
func e2eTools(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		e2eUnavailable(t, "no Chromium at %s", chromiumPath)
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		e2eUnavailable(t, "no node: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); err != nil || major < 20 {
		e2eUnavailable(t, "node %s is older than 20", v)
	}
	var ciErr error
	var ciOut []byte
	npmCI.Do(func() {
		if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", "playwright-core", "package.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = e2eDir
		ciOut, ciErr = cmd.CombinedOutput()
	})
	if ciErr != nil {
		e2eUnavailable(t, "npm ci in %s failed: %v\n%s", e2eDir, ciErr, ciOut)
	}
	if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", "playwright-core", "package.json")); err != nil {
		e2eUnavailable(t, "playwright-core is not installed in %s", e2eDir)
	}
}

// runBrowser runs admin.mjs with cfg and decodes what it reports.
func runBrowser(t *testing.T, cfg map[string]any) map[string]any {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "admin.mjs", string(arg))
	cmd.Dir = e2eDir
	// Node and its Chromium in a process group of their own, killed
	// together if the script overruns; and no wait for a stray child that
	// keeps the output pipes open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the browser script failed: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &out); err != nil || out["ok"] != true {
		t.Fatalf("the browser script reported %q (%v); stderr: %s", stdout.String(), err, stderr.String())
	}
	t.Logf("the browser saw: %s", strings.TrimSpace(stdout.String()))
	return out
}

// TestAdminPageInChromium opens `lockctl serve`'s admin page in headless
// Chromium on every backend that can inspect, releases a lock held by
// another lockctl process through the confirmation dialog, and checks
// that the holder lost it, that the audit log recorded it, and what the
// screenshot looks like.
func TestAdminPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a browser")
	}
	e2eTools(t)
	t.Run("charts", testCharts)
	for _, b := range e2eBackends() {
		t.Run(b.name, func(t *testing.T) { testRelease(t, b.name, b.url(t)) })
	}
}

func testRelease(t *testing.T, backend, u string) {
	const name, keep = "e2e/nightly-report", "e2e/rebalance-shards"
	job, jobErr := holder(t, u, []string{"--ttl", "3s", "--grace", "5s", name}, loop)
	other, _ := holder(t, u, []string{"--ttl", "3s", keep}, loop)
	// Before holder's own cleanup kills lockctl, which would leave its
	// command running and holding the output pipe: SIGTERM, which lockctl
	// passes to its command, and a wait for both to end.
	t.Cleanup(func() {
		for _, h := range []*exec.Cmd{job, other} {
			if h.ProcessState == nil && h.Process.Signal(syscall.SIGTERM) == nil {
				exitCode(t, h, 30*time.Second)
			}
		}
	})

	// The token, as another process sees it.
	r := lockctl(t, nil, "--url", u, "list", "--json", "--prefix", "e2e/")
	var holds []holdJSON
	if err := json.Unmarshal([]byte(r.stdout), &holds); err != nil || len(holds) != 2 {
		t.Fatalf("list --json: %q %v %s", r.stdout, err, r.stderr)
	}
	token := holds[0].Token

	const user, password = "admin", "e2e-password-for-basic-auth"
	base, serveErr, serve := startServe(t, []string{"LOCKER_ADMIN_BASIC_AUTH=" + user + ":" + password},
		"--url", u, "serve", "--addr", "127.0.0.1:0", "--prefix", "e2e/")

	dir := t.TempDir()
	shot, dialogShot := filepath.Join(dir, "admin.png"), filepath.Join(dir, "admin-dialog.png")
	reason := "stuck since the 02:00 run (e2e test on " + backend + ")"
	out := runBrowser(t, map[string]any{
		"mode": "release", "url": base, "user": user, "password": password,
		"name": name, "keep": keep, "reason": reason,
		"screenshot": shot, "dialogScreenshot": dialogShot,
	})

	if out["pid"] != strconv.Itoa(job.Process.Pid) {
		t.Errorf("the page shows pid %v, want the holder's %d", out["pid"], job.Process.Pid)
	}
	if out["token"] != strconv.FormatUint(token, 10) {
		t.Errorf("the page shows token %v, want %d as lockctl list says", out["token"], token)
	}
	if csp, _ := out["csp"].(string); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if pu, err := url.Parse(u); err == nil {
		if pw, ok := pu.User.Password(); ok && pw != "" && strings.Contains(serveErr.String(), pw) {
			t.Errorf("lockctl serve printed the backend's password")
		}
	}

	// The holder learns of the loss at its next renewal (TTL/3 = 1s), or
	// at once from the store's signal, and stops its command.
	if code := exitCode(t, job, 30*time.Second); code != exitLost {
		t.Errorf("the holder exited %d, want %d (hold lost); stderr: %s", code, exitLost, jobErr)
	}
	if !strings.Contains(jobErr.String(), "was lost") {
		t.Errorf("the holder's stderr %q does not say its hold was lost", jobErr)
	}

	rec := auditRecord(t, serveErr)
	for k, want := range map[string]any{"outcome": "released", "name": name, "user": user, "reason": reason, "owner": out["owner"], "token": float64(token)} {
		if rec[k] != want {
			t.Errorf("audit %s = %v, want %v; record %v", k, rec[k], want, rec)
		}
	}

	// The other hold is untouched.
	r = lockctl(t, nil, "--url", u, "list", "--json", "--prefix", "e2e/")
	if err := json.Unmarshal([]byte(r.stdout), &holds); err != nil || len(holds) != 1 || holds[0].Name != keep {
		t.Errorf("after the release, list --json = %q, want only %s", r.stdout, keep)
	}
	if other.ProcessState != nil {
		t.Errorf("the other holder ended")
	}

	checkScreenshot(t, shot)
	checkScreenshot(t, dialogShot)
	keepScreenshot(t, shot, "admin-"+backend+".png")
	keepScreenshot(t, dialogShot, "admin-dialog-"+backend+".png")

	_ = serve.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, serve, 30*time.Second); code != 0 {
		t.Errorf("lockctl serve exited %d after SIGTERM, want 0; stderr: %s", code, serveErr)
	}
}

// auditRecord returns the audit record of the release in serve's stderr,
// waiting for it a little: the page may show the result first.
func auditRecord(t *testing.T, stderr *syncBuffer) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "lockadmin: force release" && rec["outcome"] == "released" {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record of the release in lockctl serve's stderr:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testCharts serves the page in process with a Recorder and checks that
// the browser draws its charts. The Observer is not yet wired into the
// Client's locks, so the test reports a scripted activity to the Recorder
// itself; the holds in the table are real.
func testCharts(t *testing.T) {
	rec := lockadmin.NewRecorder()
	c, err := locker.New(locallock.New(locallock.NewStore()), locker.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i, n := range []string{"jobs/nightly-report", "orders/42", "shards/rebalance"} {
		m := c.NewMutex(n, locker.WithTTL(time.Duration(20+10*i)*time.Second))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(ctx)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		scriptActivity(rec, stop)
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	h, err := lockadmin.New(c, lockadmin.WithRecorder(rec), lockadmin.WithBackendURL("redis://ops:secret@10.0.0.5:6379/0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// A few seconds of data; a minute for a screenshot worth showing.
	minSeconds := 5
	if os.Getenv("LOCKER_E2E_SCREENSHOT_DIR") != "" {
		minSeconds = 60
	}
	shot := filepath.Join(t.TempDir(), "charts.png")
	out := runBrowser(t, map[string]any{"mode": "charts", "url": srv.URL + "/", "screenshot": shot, "minSeconds": minSeconds})
	if out["charts"] != float64(4) || !strings.Contains(fmt.Sprint(out["totals"]), "acquired") {
		t.Errorf("the browser saw %v", out)
	}
	checkScreenshot(t, shot)
	keepScreenshot(t, shot, "admin-charts.png")
}

// scriptActivity reports a scripted activity to rec until stop closes:
// 75 to 175 acquisitions a second, a few busy, rare losses.
func scriptActivity(rec *lockadmin.Recorder, stop <-chan struct{}) {
	ctx := context.Background()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		// Busier every other 10 seconds, with longer waits.
		busy := (i/500)%2 == 1
		for k := range 1 + i%2 + 2*b2i(busy) {
			actx := rec.AcquireStarted(ctx, locker.AcquireStart{Name: "orders/42", Op: "lock"})
			o := locker.OutcomeAcquired
			if (i+k)%9 == 0 {
				o = locker.OutcomeBusy
			}
			wait := time.Duration(200+(i*7919+k*104729)%(3000+6000*b2i(busy))) * time.Microsecond
			rec.AcquireEnded(actx, locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: o, Wait: wait})
			if o == locker.OutcomeAcquired {
				reason := locker.Released
				if (i+k)%1499 == 0 {
					reason = locker.LostRenewalFailed
				}
				rec.HoldEnded(actx, locker.HoldEnd{Name: "orders/42", Reason: reason})
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readPNG decodes the PNG file at path.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// checkScreenshot checks that path is a PNG of a page, not a blank image,
// and returns the image.
func checkScreenshot(t *testing.T, path string) image.Image {
	t.Helper()
	img := readPNG(t, path)
	b := img.Bounds()
	if b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("%s is %dx%d, want at least 800x400", path, b.Dx(), b.Dy())
	}
	colours := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 255}]++
		}
	}
	most, total := 0, 0
	for _, n := range colours {
		most = max(most, n)
		total += n
	}
	if len(colours) < 32 || most > total*97/100 {
		t.Errorf("%s looks blank: %d colours, the commonest covers %d%%", path, len(colours), most*100/total)
	}
	// The page's header is dark text on a light background.
	if dark := darkPixels(img, image.Rect(b.Min.X, b.Min.Y, b.Min.X+400, b.Min.Y+60)); dark < 50 {
		t.Errorf("%s: the header area has %d dark pixels, want the page's title", path, dark)
	}
	return img
}

func darkPixels(img image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if (cr+cg+cb)/3 < 0x4000 {
				n++
			}
		}
	}
	return n
}

// keepScreenshot copies a screenshot to $LOCKER_E2E_SCREENSHOT_DIR, when
// set (for the README's picture).
func keepScreenshot(t *testing.T, path, name string) {
	t.Helper()
	dir := os.Getenv("LOCKER_E2E_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err != nil {
		t.Errorf("keeping the screenshot: %v", err)
	}
}
