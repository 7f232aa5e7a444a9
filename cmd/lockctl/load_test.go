package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadArgs are the flags each built-in scenario runs with in the tests: a
// few seconds, a few workers, so that every scenario runs on every
// backend in `make test` and cannot rot.
var loadArgs = map[string][]string{
	"hot-name":        {"--duration", "2s", "--workers", "3"},
	"zipf":            {"--duration", "2s", "--workers", "2", "--handles", "4"},
	"long-holds":      {"--duration", "3s", "--workers", "2", "--handles", "10"},
	"crash-stall":     {"--duration", "8s", "--workers", "3"},
	"http-middleware": {"--duration", "2s", "--workers", "2", "--rate", "100"},
}

// loadRun runs `lockctl load` on u and returns its report.
func loadRun(t *testing.T, u, sc string, extra ...string) (*loadReport, string) {
	t.Helper()
	out := t.TempDir()
	args := append([]string{"--url", u, "load", "--out", out}, extra...)
	r := lockctl(t, nil, append(args, sc)...)
	if r.code != 0 {
		t.Fatalf("lockctl load %s: exit %d\nstdout: %s\nstderr: %s", sc, r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "DATA RACE") {
		t.Errorf("a data race:\n%s", r.stderr)
	}
	for _, want := range []string{"acquisitions", "wait", "hand-off gap", "report: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, r.stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "series.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep loadReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("series.json: %v", err)
	}
	f, err := os.Open(filepath.Join(out, "series.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != len(rep.Series)+1 || len(rows[0]) != 16 {
		t.Errorf("series.csv: %d rows (want %d), err %v", len(rows), len(rep.Series)+1, err)
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, string(html))
	t.Logf("%s: %s", sc, r.stdout)
	return &rep, filepath.Join(out, "report.html")
}

// checkSelfContained checks that the report has its charts and loads
// nothing: no script, no link to anywhere.
func checkSelfContained(t *testing.T, html string) {
	t.Helper()
	if n := strings.Count(html, "<svg"); n != 5 {
		t.Errorf("report.html has %d charts, want 5", n)
	}
	if strings.Contains(html, "<script") {
		t.Error("report.html has a script")
	}
	urls := regexp.MustCompile(`(src|href)\s*=|https?://|url\(`).FindAllString(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), -1)
	if len(urls) > 0 {
		t.Errorf("report.html refers to other resources: %q", urls)
	}
}

// TestLoadScenariosOnEveryBackend runs every built-in scenario on a real
// server of every backend, a few seconds each.
func TestLoadScenariosOnEveryBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every server")
	}
	for _, b := range e2eBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			for _, sc := range scenarioNames() {
				t.Run(sc, func(t *testing.T) {
					rep, _ := loadRun(t, u, sc, loadArgs[sc]...)
					checkLoad(t, sc, rep)
				})
			}
		})
	}
}

// checkLoad checks what every run of scenario sc must show.
func checkLoad(t *testing.T, sc string, rep *loadReport) {
	t.Helper()
	s := rep.Summary
	if s.Acquisitions == 0 {
		t.Errorf("no acquisitions")
	}
	if s.Overlaps != 0 {
		t.Errorf("%d holds began while another of the same name, not lost, was held", s.Overlaps)
	}
	if sc != "crash-stall" && (s.Errors != 0 || s.Lost != 0 || s.HTTPFailed != 0) {
		t.Errorf("%d errors, %d lost holds, %d failed requests; want none: %q", s.Errors, s.Lost, s.HTTPFailed, s.FirstError)
	}
	switch sc {
	case "hot-name":
		if s.Handoffs == 0 {
			t.Error("no hand-off on a hot name")
		}
	case "long-holds":
		// 2 workers × 10 handles hold a name each for the whole run.
		if s.Acquisitions < 20 {
			t.Errorf("%d acquisitions, want 20 at least", s.Acquisitions)
		}
	case "crash-stall":
		kills, stops := countFaults(s.Faults)
		if kills == 0 || stops == 0 {
			t.Fatalf("%d kills and %d stops, want both", kills, stops)
		}
		if s.FenceOutOfOrder != 0 {
			t.Errorf("the fence accepted %d writes out of order", s.FenceOutOfOrder)
		}
		if s.FencedAccepted == 0 {
			t.Error("no fenced write was accepted")
		}
		// Each killed holder counts as lost, and so does the stopped one,
		// which finds out when it wakes up.
		if s.Lost < int64(kills+stops) {
			t.Errorf("%d lost holds, want %d at least (every killed and stopped holder)", s.Lost, kills+stops)
		}
		if s.FencedRefused == 0 {
			t.Error("the stopped holder's stale write was not refused")
		}
	case "http-middleware":
		if s.Dropped != 0 {
			t.Errorf("%d requests dropped", s.Dropped)
		}
	}
}

func TestLoadBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no scenario", []string{"load"}, "want one SCENARIO"},
		{"an unknown scenario", []string{"load", "nope"}, `no built-in scenario "nope"`},
		{"a bad duration", []string{"load", "--duration", "x", "hot-name"}, "bad duration"},
		{"no workers", []string{"load", "--workers", "-1", "hot-name"}, "workers -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lockctl(t, nil, append([]string{"--url", sharedURL(t)}, tt.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tt.want)
			}
		})
	}
}

func TestLoadRunsAScenarioFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mine.json")
	sc := `{"name": "mine", "mode": "mutex", "workers": 2, "handles": 2, "names": 3, "hold": "1ms", "ttl": "5s", "duration": "1s"}`
	if err := os.WriteFile(f, []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _ := loadRun(t, sharedURL(t), f)
	if rep.Summary.Scenario != "mine" || rep.Summary.Acquisitions == 0 || len(rep.Series) != 1 {
		t.Errorf("scenario %q, %d acquisitions, %d seconds", rep.Summary.Scenario, rep.Summary.Acquisitions, len(rep.Series))
	}
}

// chromiumUnavailable skips t for want of Chromium, or fails it when
// LOCKER_REQUIRE_SERVERS asks for everything to run (as CI does).
func chromiumUnavailable(t *testing.T, err error) {
	t.Helper()
	msg := fmt.Sprintf("no Chromium at %s (%v); apt-get install chromium, or scripts/install-test-deps.sh", chromiumPath, err)
	switch strings.ToLower(os.Getenv("LOCKER_REQUIRE_SERVERS")) {
	case "1", "true", "yes":
		t.Fatalf("%s (failing instead of skipping because LOCKER_REQUIRE_SERVERS is set)", msg)
	}
	t.Skipf("%s (set LOCKER_REQUIRE_SERVERS=1 to make this a failure)", msg)
}

// screenshot renders the page at path with headless Chromium into a PNG.
func screenshot(t *testing.T, page, shot string, height int) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		chromiumUnavailable(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir="+t.TempDir(), "--screenshot="+shot,
		fmt.Sprintf("--window-size=1280,%d", height), "file://"+page)
	// Chromium starts helper processes: they are in its process group, and
	// a timeout ends the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
}

// TestLoadReportInChromium renders a real run's report in headless
// Chromium and checks the screenshot: a page, with the charts drawn in
// their colours below the summary.
func TestLoadReportInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium")
	}
	_, page := loadRun(t, sharedURL(t), "hot-name", "--duration", "2s", "--workers", "3")
	shot := filepath.Join(t.TempDir(), "report.png")
	screenshot(t, page, shot, 2000)
	img := checkScreenshot(t, shot)
	// The charts start below the summary table (about 350px down); each of
	// the colours of the throughput, wait and hand-off charts is there.
	b := img.Bounds()
	charts := image.Rect(b.Min.X, b.Min.Y+350, b.Max.X, b.Max.Y)
	for name, hex := range map[string]string{"blue": colBlue, "orange": colOrange, "red": colRed, "green": colGreen} {
		want := parseHex(hex)
		if n := countColour(img, charts, want); n < 40 {
			t.Errorf("%d %s (%s) pixels in the chart area, want the charts' lines and legends", n, name, hex)
		}
	}
}

func parseHex(s string) color.RGBA {
	var c color.RGBA
	_, _ = fmt.Sscanf(s, "#%02x%02x%02x", &c.R, &c.G, &c.B)
	c.A = 255
	return c
}

// countColour counts the pixels of r within a small distance of c
// (rendering may shift a colour by a few units).
func countColour(img image.Image, r image.Rectangle, c color.RGBA) int {
	n := 0
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -6 && d < 6 }
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if near(cr, c.R) && near(cg, c.G) && near(cb, c.B) {
				n++
			}
		}
	}
	return n
}

func TestLoadHelp(t *testing.T) {
	r := lockctl(t, nil, "load", "--help")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: lockctl [--url URL] load") {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	for _, f := range []string{"-duration", "-workers", "-handles", "-rate", "-out", "-url"} {
		if !strings.Contains(r.stdout, "  "+f) {
			t.Errorf("load --help does not list %s:\n%s", f, r.stdout)
		}
	}
}
