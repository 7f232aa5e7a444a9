package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// TestLeaderKilledDuringAHold kills the ensemble's leader while a lock is
// held. The hold survives (the session moves to another server within its
// timeout) or its owner is told it is lost before anyone else gets the
// lock; never are there two holders.
func TestLeaderKilledDuringAHold(t *testing.T) {
	z := ensemble.Get(t)
	if len(z.Nodes) == 0 {
		t.Skip("needs an ensemble started by testserver, to kill its leader")
	}
	ctx := testCtx(t, 3*time.Minute)
	const timeout = 4 * time.Second
	url := urlOf(z, "/leader", "session_timeout="+timeout.String())
	const name = "leader-kill"
	a := openClient(t, url).NewMutex(name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tokenA := a.Token()

	leader, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := leader.Restart(rctx); err != nil {
			t.Errorf("restart %s: %v", leader, err)
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = z.WaitServing(wctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %s; the others serve again", leader)

	// For two session timeouts, another client tries to take the lock.
	b := openClient(t, url).NewMutex(name)
	gotB := false
	for end := time.Now().Add(2 * timeout); time.Now().Before(end) && !gotB; {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := b.TryLock(tctx)
		cancel()
		if err != nil {
			t.Logf("TryLock during the election: %v", err)
		}
		if ok {
			gotB = true
			if !closed(a.Lost()) {
				t.Fatal("another owner got the lock while the first was not told its hold was lost")
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	survived := !closed(a.Lost())
	t.Logf("the hold survived the leader's death: %v", survived)
	if survived {
		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the surviving hold: %v", err)
		}
	} else if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Fatalf("Unlock of the lost hold = %v, want ErrLost", err)
	}
	if !gotB {
		if err := b.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b.Token() <= tokenA {
		t.Errorf("the next owner's token %d is not above %d", b.Token(), tokenA)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPausedHolder freezes a holder's process (SIGSTOP) past its session
// timeout. The next owner gets the lock once the session expires; when the
// paused holder resumes, it learns at once that its hold is lost, its
// Unlock frees nothing, and its fencing token is below the new owner's —
// so a resource that checks tokens refuses its late writes.
func TestPausedHolder(t *testing.T) {
	const timeout = 2 * time.Second
	url := urlOf(standalone.Get(t), "/paused", "session_timeout="+timeout.String())
	runPausedHolder(t, url, timeout)
}

func runPausedHolder(t *testing.T, url string, ttl time.Duration) {
	ctx := testCtx(t, 2*time.Minute)
	name := "paused-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	child := startHolder(t, url, name)
	tokenA, err := strconv.ParseUint(strings.TrimPrefix(child.expect(t, "held ", 30*time.Second), "held "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	child.signal(t, syscall.SIGSTOP)
	paused := time.Now()

	c := openClient(t, url)
	b := c.NewMutex(name)
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the next owner got the lock %v after the holder was paused (session timeout %v)", time.Since(paused).Round(time.Millisecond), ttl)
	if b.Token() <= tokenA {
		t.Errorf("the next owner's token %d is not above the paused holder's %d", b.Token(), tokenA)
	}

	child.signal(t, syscall.SIGCONT)
	resumed := time.Now()
	child.expect(t, "lost", 10*time.Second)
	t.Logf("the resumed holder saw its hold lost %v after it resumed", time.Since(resumed).Round(time.Millisecond))
	if got := child.expect(t, "unlock ", 10*time.Second); got != "unlock lost=true" {
		t.Errorf("the resumed holder's Unlock: %q, want ErrLost", got)
	}
	// Its Unlock freed nothing: the new owner still holds.
	if closed(b.Lost()) {
		t.Error("the new owner's hold was lost")
	}
	if ok, err := openClient(t, url).NewMutex(name).TryLock(ctx); ok || err != nil {
		t.Errorf("TryLock of a third client = %v, %v; want false: the stale Unlock freed the new owner's lock", ok, err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	child.wait(t)
}

// holderProcess is a child process running helperMain.
type holderProcess struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHolder(t *testing.T, url, name string) *holderProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperURLEnv+"="+url, helperNameEnv+"="+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &holderProcess{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// expect returns the child's next line, which must begin with prefix.
func (p *holderProcess) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("the holder process ended before saying %q", prefix)
		}
		if !strings.HasPrefix(l, prefix) {
			t.Fatalf("the holder process said %q, want %q", l, prefix)
		}
		return l
	case <-time.After(within):
		t.Fatalf("the holder process did not say %q within %v", prefix, within)
		return ""
	}
}

func (p *holderProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func (p *holderProcess) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the holder process: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the holder process did not exit within %v", 30*time.Second)
	}
}
