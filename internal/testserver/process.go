package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	defaultReadyTimeout = 60 * time.Second
	readyPollInterval   = 25 * time.Millisecond
	readyAttemptTimeout = 5 * time.Second
	stopGrace           = 10 * time.Second
	killWait            = 10 * time.Second
	logTailLines        = 50
	sharedLogTailLines  = 10
	maxLogLine          = 300 // bytes of one log line in a tail
)

// CallTimeout bounds one request of a readiness check or fault hook, so
// that a paused server makes it fail instead of hang.
const CallTimeout = 2 * time.Second

// ProcessSpec describes a server process for StartProcess.
type ProcessSpec struct {
	Name         string                          // short name used in logs, e.g. "redis-cluster-1"
	Path         string                          // the binary
	Args         []string                        // arguments, without the binary
	Env          []string                        // KEY=value pairs added to a minimal environment (PATH, HOME=Dir, TMPDIR=Dir, LANG)
	Dir          string                          // working directory, created if missing; default a new t.TempDir()
	User         string                          // optional: run as this OS user (e.g. "postgres" when running as root); "" = current user
	Ready        func(ctx context.Context) error // polled every 25ms until it returns nil; nil means ready once started
	ReadyTimeout time.Duration                   // bound on start-up; default 60s
}

// Process is a server started by StartProcess. It runs in its own process
// group, so signals reach everything it started; its standard output and
// error go to LogPath. Its methods are safe for concurrent use.
type Process struct {
	spec    ProcessSpec
	logPath string
	cred    *syscall.Credential

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current run has exited and been reaped
	waitErr  error         // the current run's exit status, valid after exited is closed
	expected bool          // the current run was stopped on purpose
	pids     []int         // every pid this Process started, for leak checks
}

// StartProcess starts the process described by spec and waits until
// spec.Ready returns nil. It fails the test with the end of the process's
// log if the process exits or is not ready within spec.ReadyTimeout. A
// cleanup kills the process group and waits for it; when the test has
// failed, the cleanup also logs the last lines of the process's log.
func StartProcess(t TB, spec ProcessSpec) *Process {
	t.Helper()
	return StartProcesses(t, spec)[0]
}

// StartProcesses starts the processes at once and waits for all of them to
// be ready, in parallel, so that slow starters (a JVM) overlap. It fails the
// test as StartProcess does if any of them fails.
func StartProcesses(t TB, specs ...ProcessSpec) []*Process {
	t.Helper()
	procs := make([]*Process, len(specs))
	for i, spec := range specs {
		if spec.Dir == "" {
			spec.Dir = t.TempDir()
		}
		p, err := newProcess(spec)
		if err != nil {
			t.Fatalf("testserver: %v", err)
			return nil
		}
		if err := p.spawn(); err != nil {
			t.Fatalf("testserver: %v", err)
			return nil
		}
		procs[i] = p
		t.Cleanup(func() { p.cleanup(t) })
	}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			errs[i] = p.waitReady(context.Background())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testserver: %v", err)
		return nil
	}
	return procs
}

func newProcess(spec ProcessSpec) (*Process, error) {
	if spec.Path == "" {
		return nil, fmt.Errorf("process %q: no binary path", spec.Name)
	}
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if spec.ReadyTimeout <= 0 {
		spec.ReadyTimeout = defaultReadyTimeout
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("process %s: %w", spec.Name, err)
	}
	p := &Process{spec: spec, logPath: filepath.Join(spec.Dir, spec.Name+".log")}
	if spec.User != "" {
		cred, err := CredentialFor(spec.User, spec.Dir)
		if err != nil {
			return nil, fmt.Errorf("process %s: %w", spec.Name, err)
		}
		p.cred = cred
	}
	return p, nil
}

// CredentialFor returns the credential to run as the named user, or nil when
// that is the current user. It gives the user the working directory and the
// right to traverse its parents below the system temp directory (t.TempDir
// creates them 0700).
func CredentialFor(name, dir string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	if uid == os.Geteuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("running as user %s needs root", name)
	}
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return nil, err
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(filepath.Clean(dir)); strings.HasPrefix(d, tmp+string(os.PathSeparator)); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
			return nil, err
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// spawn starts a new run of the process without waiting for readiness.
func (p *Process) spawn() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited != nil && !closed(p.exited) {
		return fmt.Errorf("process %s: already running (pid %d)", p.spec.Name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("process %s: %w", p.spec.Name, err)
	}
	fmt.Fprintf(logFile, "=== testserver: %s starting %s %s\n", time.Now().Format(time.RFC3339Nano), p.spec.Path, strings.Join(p.spec.Args, " "))

	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + p.spec.Dir,
		"TMPDIR=" + p.spec.Dir,
		"LANG=C.UTF-8",
	}, p.spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Setpgid puts the server and everything it starts in one group that
	// Stop and Kill signal as a whole. Pdeathsig kills the server if the
	// test binary dies without running its cleanups (e.g. a -timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if p.cred != nil {
		_ = logFile.Chown(int(p.cred.Uid), int(p.cred.Gid))
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("process %s: start %s: %w", p.spec.Name, p.spec.Path, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr, p.expected = cmd, exited, nil, false
	p.pids = append(p.pids, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== testserver: %s exited: %v\n", time.Now().Format(time.RFC3339Nano), err)
		logFile.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitReady polls spec.Ready until it succeeds, the process exits, the
// ReadyTimeout passes or ctx ends.
func (p *Process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.spec.ReadyTimeout)
	defer cancel()
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if p.spec.Ready == nil {
		return nil
	}
	start := time.Now()
	var lastErr error
	for {
		if closed(exited) {
			return fmt.Errorf("process %s exited before it was ready (%v); log %s ends:\n%s",
				p.spec.Name, p.exitErr(), p.logPath, p.LogTail(logTailLines))
		}
		actx, acancel := context.WithTimeout(ctx, readyAttemptTimeout)
		lastErr = p.spec.Ready(actx)
		acancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %s not ready after %v: %v; log %s ends:\n%s",
				p.spec.Name, time.Since(start).Round(time.Millisecond), lastErr, p.logPath, p.LogTail(logTailLines))
		case <-exited:
		case <-time.After(readyPollInterval):
		}
	}
}

func (p *Process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

func (p *Process) cleanup(t TB) {
	p.mu.Lock()
	unexpected := p.exited != nil && closed(p.exited) && !p.expected
	p.mu.Unlock()
	if err := p.Kill(); err != nil {
		t.Logf("testserver: %v", err)
	}
	if unexpected {
		t.Logf("testserver: process %s had exited by itself before the test ended (%v)", p.spec.Name, p.exitErr())
	}
	if t.Failed() {
		// A shared server's log comes after the output of every test of
		// the package; a short tail keeps the failing test's own messages
		// in sight at the end of a CI log.
		n := logTailLines
		if _, shared := t.(*Shared); shared {
			n = sharedLogTailLines
		}
		t.Logf("testserver: last lines of %s (%s):\n%s", p.spec.Name, p.logPath, p.LogTail(n))
	}
}

// Name returns the process's short name from its spec.
func (p *Process) Name() string { return p.spec.Name }

// Pid returns the pid of the current or last run, which is also its process
// group id.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// LogPath returns the file that receives the process's standard output and
// error, across restarts.
func (p *Process) LogPath() string { return p.logPath }

// Dir returns the process's working directory.
func (p *Process) Dir() string { return p.spec.Dir }

// Running reports whether the current run has not exited yet. A paused
// process is running.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited != nil && !closed(p.exited)
}

// signal sends sig to the process group of the current run. It returns
// false, and sends nothing, when that run has already exited.
func (p *Process) signal(sig syscall.Signal) (bool, <-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil || closed(p.exited) {
		return false, p.exited, nil
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		p.expected = true
	}
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("process %s: signal %v: %w", p.spec.Name, sig, err)
	}
	return true, p.exited, err
}

// Stop sends SIGTERM to the process group (and SIGCONT, in case it is
// paused), waits up to 10s for it to exit, then sends SIGKILL. Stopping a
// process that has exited does nothing.
func (p *Process) Stop() error {
	sent, exited, err := p.signal(syscall.SIGTERM)
	if !sent || err != nil {
		return err
	}
	_, _, _ = p.signal(syscall.SIGCONT)
	select {
	case <-exited:
		p.killStragglers()
		return nil
	case <-time.After(stopGrace):
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process group and waits for the process to
// exit. Killing a process that has exited does nothing.
func (p *Process) Kill() error {
	sent, exited, err := p.signal(syscall.SIGKILL)
	if !sent || err != nil {
		return err
	}
	select {
	case <-exited:
		p.killStragglers()
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("process %s (pid %d) did not exit within %v of SIGKILL", p.spec.Name, p.Pid(), killWait)
	}
}

// killStragglers kills what the process started and left in its group after
// it exited (e.g. a forked child) and waits, up to killWait, until none of
// them is alive.
func (p *Process) killStragglers() {
	pid := p.Pid()
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(killWait)
	for len(GroupMembers(pid)) > 0 && time.Now().Before(deadline) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

// GroupMembers returns the pids of the live (not zombie) processes in
// process group pgid, read from /proc.
func GroupMembers(pgid int) []int {
	return liveProcs(func(_ int, st procStat) bool { return st.pgrp == pgid })
}

// Pause stops the process group with SIGSTOP: the server keeps its sockets
// but answers nothing, as a hung or partitioned server would. It returns
// once every thread of the group is seen stopped (kill returns before the
// signal has stopped threads running on another CPU), or after 5 s.
func (p *Process) Pause() error {
	sent, _, err := p.signal(syscall.SIGSTOP)
	if err == nil && !sent {
		err = fmt.Errorf("process %s: pause: not running", p.spec.Name)
	}
	if err != nil {
		return err
	}
	if err := WaitStopped(GroupMembers(p.Pid()), 5*time.Second); err != nil {
		return fmt.Errorf("process %s: pause: %w", p.spec.Name, err)
	}
	return nil
}

// Resume continues a paused process group with SIGCONT.
func (p *Process) Resume() error {
	sent, _, err := p.signal(syscall.SIGCONT)
	if err == nil && !sent {
		err = fmt.Errorf("process %s: resume: not running", p.spec.Name)
	}
	return err
}

// Restart stops the process if it is running, starts it again with the same
// spec (same ports, same data directory, same log file) and waits until it
// is ready, within ctx and the spec's ReadyTimeout.
func (p *Process) Restart(ctx context.Context) error {
	if err := p.Stop(); err != nil {
		return err
	}
	if err := p.spawn(); err != nil {
		return err
	}
	return p.waitReady(ctx)
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const maxTail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		_, _ = f.Seek(st.Size()-maxTail, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTail))
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > maxLogLine {
			lines[i] = append(l[:maxLogLine:maxLogLine], " …"...)
		}
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// StartedPIDs returns every pid this Process has started, for tests that
// check nothing is left behind.
func (p *Process) StartedPIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.pids...)
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// FreePort returns a free TCP port on 127.0.0.1 chosen by the OS, never the
// same one twice in a test binary. The port is free when FreePort returns;
// another program could take it before the server binds it, which is rare.
func FreePort(t TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return port
}

func freePort() (int, error) {
	var lastErr error
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		portsMu.Lock()
		dup := portsUsed[port]
		portsUsed[port] = true
		portsMu.Unlock()
		if !dup {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 after 100 tries (last error: %v)", lastErr)
}

// WaitTCP dials addr until a connection succeeds or ctx ends; a ctx without
// a deadline is bounded to 60s.
func WaitTCP(ctx context.Context, addr string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultReadyTimeout)
		defer cancel()
	}
	d := net.Dialer{Timeout: time.Second}
	return WaitFor(ctx, readyPollInterval, addr+" not reachable", func(ctx context.Context) error {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		// Dialing a free port of the ephemeral range can connect the
		// socket to itself (TCP simultaneous open): that is no server.
		self := conn.LocalAddr().String() == conn.RemoteAddr().String()
		conn.Close()
		if self {
			return fmt.Errorf("connected to itself")
		}
		return nil
	})
}

// RunSetup runs a set-up command (mariadb-install-db, initdb) in dir to
// completion within timeout, as cred's user when cred is not nil, and
// returns the end of its combined output for error messages.
func RunSetup(timeout time.Duration, cred *syscall.Credential, dir, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	// Kill the whole group on timeout, and do not wait forever for output
	// pipes held open by a grandchild.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish within %v: %w", filepath.Base(path), timeout, err)
	}
	return Tail(string(out), 30), err
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
