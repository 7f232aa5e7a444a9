package testserver

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shell is a ProcessSpec running a /bin/sh script.
func shell(t *testing.T, name, script string) ProcessSpec {
	return ProcessSpec{Name: name, Path: "/bin/sh", Args: []string{"-c", script}, Dir: t.TempDir()}
}

func TestStartProcess(t *testing.T) {
	t.Parallel()

	t.Run("kill_reaches_the_whole_process_group", func(t *testing.T) {
		t.Parallel()
		var p *Process
		tracked.WithServers(t, func(t *testing.T) []*Process {
			// The shell starts a grandchild and waits; only a group
			// signal kills the grandchild.
			spec := shell(t, "group", "sleep 300 & echo started; wait")
			spec.Ready = func(context.Context) error {
				b, _ := os.ReadFile(filepath.Join(spec.Dir, "group.log"))
				if !strings.Contains(string(b), "started") {
					return errors.New("not yet")
				}
				return nil
			}
			p = StartProcess(t, spec)
			return []*Process{p}
		}, func(t *testing.T) {
			if err := syscall.Kill(-p.Pid(), 0); err != nil {
				t.Fatalf("process group %d: %v", p.Pid(), err)
			}
		})
	})

	t.Run("stop_pause_resume_restart", func(t *testing.T) {
		t.Parallel()
		var p *Process
		var addr string
		tracked.WithServers(t, func(t *testing.T) []*Process {
			var spec ProcessSpec
			spec, addr = pingServerSpec(t)
			p = StartProcess(t, spec)
			return []*Process{p}
		}, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
			err := ping(short, addr)
			cancelShort()
			if err == nil {
				t.Fatal("a paused server answered PING")
			}
			if err := p.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := ping(ctx, addr); err != nil {
				t.Fatalf("after resume: %v", err)
			}
			old := p.Pid()
			if err := p.Stop(); err != nil {
				t.Fatal(err)
			}
			if p.Running() {
				t.Fatal("running after Stop")
			}
			if err := p.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if p.Pid() == old {
				t.Fatalf("restart kept pid %d", old)
			}
			if err := ping(ctx, addr); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := p.Kill(); err != nil {
				t.Fatalf("second Kill: %v", err)
			}
		})
	})

	t.Run("exit_before_ready_fails_with_the_log_tail", func(t *testing.T) {
		t.Parallel()
		var s Shared
		defer s.Close()
		out := s.Run(func(tb TB) {
			spec := shell(t, "crasher", "echo boom-marker; exit 3")
			spec.Ready = func(context.Context) error { return errors.New("never ready") }
			StartProcess(tb, spec)
		})
		if !out.Failed || !strings.Contains(out.Message, "boom-marker") || !strings.Contains(out.Message, "exited before it was ready") {
			t.Fatalf("outcome = %+v", out)
		}
	})

	t.Run("not_ready_in_time_fails", func(t *testing.T) {
		t.Parallel()
		var s Shared
		var p *Process
		out := s.Run(func(tb TB) {
			spec := shell(t, "slow", "echo waiting; sleep 300")
			spec.Ready = func(context.Context) error { return errors.New("still starting") }
			spec.ReadyTimeout = 300 * time.Millisecond
			p, _ = newProcess(spec)
			if err := p.spawn(); err != nil {
				tb.Fatalf("%v", err)
			}
			tb.Cleanup(func() { p.cleanup(tb) })
			if err := p.waitReady(context.Background()); err != nil {
				tb.Fatalf("%v", err)
			}
		})
		s.Close()
		if !out.Failed || !strings.Contains(out.Message, "not ready after") || !strings.Contains(out.Message, "still starting") {
			t.Fatalf("outcome = %+v", out)
		}
		if err := ProcessGone(p); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("FreePort returned %d (seen before: %v)", p, seen[p])
		}
		seen[p] = true
	}
}

func TestWaitTCP(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitTCP(ctx, l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	// Port 1 (tcpmux) is privileged and not served here; a port from
	// FreePort could be taken by a server of a parallel test.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := WaitTCP(short, "127.0.0.1:1"); err == nil {
		t.Fatal("WaitTCP succeeded on a closed port")
	}
}
