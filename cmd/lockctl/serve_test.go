package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// servingLine is how `lockctl serve` tells where it listens.
var servingLine = regexp.MustCompile(`serving the admin page of .* on (http://\S+/)`)

// startServe starts `lockctl serve` with args and returns the URL it
// serves on, its stderr, and the process, which is killed when the test
// ends if it is still running.
func startServe(t *testing.T, env []string, args ...string) (string, *syncBuffer, *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cmd := command(t, ctx, env, args...)
	errb := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = errb, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if m := servingLine.FindStringSubmatch(errb.String()); m != nil {
			return m[1], errb, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("lockctl serve did not say where it serves within a minute; stderr: %s", errb)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeRefusesAnOpenAddressWithoutAuth(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		r := lockctl(t, nil, "--url", "mem://", "serve", "--addr", addr)
		if r.code != exitUsage || !strings.Contains(r.stderr, "without authentication") || !strings.Contains(r.stderr, "LOCKER_ADMIN_TOKEN") {
			t.Errorf("serve --addr %s: exit %d, stderr %q; want %d naming the cause and the remedy", addr, r.code, r.stderr, exitUsage)
		}
	}
}

func TestServeBadInput(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"a_token_variable_that_is_unset", nil, []string{"--token-env", "NO_SUCH_VARIABLE_X"}, "NO_SUCH_VARIABLE_X"},
		{"a_short_token", []string{"LOCKER_ADMIN_TOKEN=short"}, nil, "shorter than"},
		{"basic_auth_without_a_colon", []string{"LOCKER_ADMIN_BASIC_AUTH=justauser"}, nil, "user:password"},
		{"basic_auth_without_a_password", []string{"MY_CREDS=ops:"}, []string{"--basic-auth-env", "MY_CREDS"}, "user:password"},
		{"an_address_without_a_port", nil, []string{"--addr", "localhost"}, "--addr"},
		{"an_argument", nil, []string{"extra"}, "no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lockctl(t, tt.env, append([]string{"--url", "mem://", "serve"}, tt.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tt.want)
			}
		})
	}
}

func TestServeServesUntilSIGTERM(t *testing.T) {
	u := sharedURL(t)
	base, stderr, cmd := startServe(t, []string{"LOCKER_ADMIN_BASIC_AUTH=ops:pw-for-the-test"}, "--url", u, "serve", "--addr", "127.0.0.1:0", "--read-only")
	status := func(user, pass string) int {
		req, _ := http.NewRequest("GET", base+"api/holds", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status("", ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	if code := status("ops", "pw-for-the-test"); code != http.StatusOK {
		t.Errorf("with credentials: %d, want 200", code)
	}
	if strings.Contains(stderr.String(), "pw-for-the-test") {
		t.Errorf("stderr shows the password: %s", stderr)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd, 30*time.Second); code != 0 || !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("after SIGTERM: exit %d, stderr %q; want 0 and a graceful stop", code, stderr)
	}
}
