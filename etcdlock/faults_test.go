package etcdlock_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/golocker/locker"
	"github.com/golocker/locker/etcdlock"
)

// TestLeaderKilledDuringAHold kills the cluster's leader while a lock is
// held. The hold survives (the new leader extends every lease) or its owner
// is told it is lost before anyone else gets the lock; never are there two
// holders.
func TestLeaderKilledDuringAHold(t *testing.T) {
	cl := cluster.Get(t)
	if len(cl.Members) == 0 {
		t.Skip("needs a cluster started by testserver, to kill its leader")
	}
	ctx := testCtx(t, 3*time.Minute)
	const ttl = 3 * time.Second
	url := urlOf(cl, "/leader", "session_ttl="+ttl.String())
	const name = "leader-kill"
	a := openClient(t, url).NewMutex(name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tokenA := a.Token()

	leader, err := cl.Leader(ctx)
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
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	next, err := cl.WaitLeader(wctx, leader)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %s; %s leads now", leader, next)

	// For two session TTLs, another client tries to take the lock.
	b := openClient(t, url).NewMutex(name)
	gotB := false
	for end := time.Now().Add(2 * ttl); time.Now().Before(end) && !gotB; {
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
// TTL. The next owner gets the lock once the session expires; when the
// paused holder resumes, it learns at once that its hold is lost, its
// Unlock frees nothing, and its fencing token is below the new owner's —
// so a resource that checks tokens refuses its late writes.
func TestPausedHolder(t *testing.T) {
	const ttl = 2 * time.Second
	url := urlOf(single.Get(t), "/paused", "session_ttl="+ttl.String())
	runPausedHolder(t, url, ttl)
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
	t.Logf("the next owner got the lock %v after the holder was paused (session TTL %v)", time.Since(paused).Round(time.Millisecond), ttl)
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

// TestCutOffHolderIsToldFirst cuts a holder's client off from the cluster
// (its connections are closed and new ones refused). Its keepalives go
// unanswered, so it declares its session lost before the lease can expire
// on the server: it is told before another owner gets the lock. Once it can
// reach the cluster again, the Driver serves new acquisitions in a new
// session, and the old hold stays lost. The Driver is built with New on a
// client of the test's, which Close leaves open.
func TestCutOffHolderIsToldFirst(t *testing.T) {
	srv := single.Get(t)
	ctx := testCtx(t, 2*time.Minute)
	const ttl = 2 * time.Second
	const name = "cut-off"
	dl := &severable{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dl.dial)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	d, err := etcdlock.New(cli, etcdlock.WithPrefix("/cut-off"), etcdlock.WithSessionTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := locker.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	a := ca.NewMutex(name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	b := openClient(t, urlOf(srv, "/cut-off", "session_ttl="+ttl.String())).NewMutex(name)

	dl.sever()
	cut := time.Now()
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the next owner got the lock %v after the holder was cut off (session TTL %v)", time.Since(cut).Round(time.Millisecond), ttl)
	if !closed(a.Lost()) {
		t.Fatal("the next owner got the lock before the cut-off holder was told its hold was lost")
	}
	if b.Token() <= a.Token() {
		t.Errorf("the next owner's token %d is not above the lost holder's %d", b.Token(), a.Token())
	}

	dl.restore()
	other := ca.NewMutex(name + "-other")
	eventually(t, time.Minute, "an acquisition after the connection is back", func() bool {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ok, err := other.TryLock(tctx)
		return err == nil && ok
	})
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
	}
	if closed(b.Lost()) {
		t.Error("the new owner's hold was lost")
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "/cut-off"); err != nil {
		t.Errorf("the test's client after the Driver's Close: %v", err)
	}
}

// severable dials etcd and can cut every connection it made, and refuse
// new ones.
type severable struct {
	mu      sync.Mutex
	severed bool
	conns   []net.Conn
}

func (s *severable) dial(ctx context.Context, addr string) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.severed {
		return nil, errors.New("connection cut by the test")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		s.conns = append(s.conns, c)
	}
	return c, err
}

func (s *severable) sever() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.severed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

func (s *severable) restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.severed = false
}
