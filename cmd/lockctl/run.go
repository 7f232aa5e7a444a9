package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/golocker/locker"
)

// forwarded are the signals lockctl passes to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func cmdRun(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("run", &g)
	var wait durationValue
	ttl := durationValue{d: locker.DefaultTTL}
	grace := durationValue{d: 10 * time.Second}
	fs.Var(&wait, "wait", "how long to wait for the lock: 0 fails at once if held (default: until free)")
	fs.Var(&ttl, "ttl", "lease of the hold, renewed while the command runs")
	fs.Var(&grace, "grace", "time between SIGTERM and SIGKILL when the hold is lost")
	quiet := fs.Bool("quiet", false, "no waiting indicator")
	pos, command, dash, err := parseArgs(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) == 0:
		return usage("run: missing lock name: lockctl run NAME -- CMD [ARGS...]")
	case len(pos) > 1 || !dash:
		return usage("run: put the command after --: lockctl run NAME -- CMD [ARGS...]")
	case len(command) == 0:
		return usage("run: missing command after --")
	case pos[0] == "":
		return usage("run: empty lock name")
	}
	name := pos[0]

	// Signals: while waiting they end the wait; while the command runs
	// they are passed on to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// Every renewal is owner-checked: at least once a second, so that a
	// release by force is noticed within a second on a backend that does
	// not push the loss (Capabilities.LostSignal); one that does tells the
	// hold at once, and the command gets SIGTERM then.
	opts := []locker.Option{locker.WithTTL(ttl.d)}
	if ttl.d/3 > checkEvery {
		opts = append(opts, locker.WithRenewInterval(checkEvery))
	}
	c, _, err := open(ctx, g, e, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	m := c.NewMutex(name)

	var got os.Signal
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case got = <-sigs:
			cancel()
		case <-wctx.Done():
		}
	}()
	stopIndicator := waitingIndicator(e, name, *quiet)
	held, err := acquire(wctx, m, wait)
	stopIndicator()
	cancel()
	switch {
	case got != nil && !held:
		return fail(128+int(got.(syscall.Signal)), "interrupted by %v while waiting for %s", got, quote(name))
	case errors.Is(err, locker.ErrInvalidName), errors.Is(err, locker.ErrInvalidTTL):
		return usage("run: %v", err)
	case err != nil:
		return fail(exitBackend, "%v", err)
	case !held && wait.d == 0:
		return fail(exitHeld, "%s is held by another owner%s", quote(name), holderOf(ctx, c, name))
	case !held:
		return fail(exitTimeout, "%s was still held after waiting %v%s", quote(name), wait.d, holderOf(ctx, c, name))
	}
	start := time.Now()
	code, runErr := runHeld(m, name, command, grace.d, sigs, e)
	uerr := m.Unlock(context.Background())
	switch {
	case runErr != nil:
		return runErr
	case errors.Is(uerr, locker.ErrLost):
		// The command ended before anything noticed: the release did.
		return fail(exitLost, "the hold on %s was found lost when it was released, %v after it was taken: %v; the command ran to its end (status %d) but may have overlapped another owner",
			quote(name), time.Since(start).Round(time.Millisecond), uerr, code)
	case uerr != nil:
		fmt.Fprintf(e.stderr, "lockctl: releasing %s: %v\n", quote(name), uerr)
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// checkEvery is how often run checks its hold on the store, at least.
const checkEvery = time.Second

// holderOf names who holds name, where the backend can say: "
// (owner host/pid/..., token 42, 12s left)", or "".
func holderOf(ctx context.Context, c *locker.Client, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	hs, err := c.Holds(ctx, name)
	if err != nil {
		return ""
	}
	for _, h := range hs {
		if h.Name != name {
			continue
		}
		left := "for as long as its session lives"
		if !h.Expires.IsZero() {
			left = time.Until(h.Expires).Round(time.Millisecond).String() + " left"
		}
		return fmt.Sprintf(" (owner %s, token %d, %s)", h.Owner, h.Token, left)
	}
	return ""
}

// acquire takes m as --wait says: unset waits until free, 0 tries once.
func acquire(ctx context.Context, m *locker.Mutex, wait durationValue) (bool, error) {
	switch {
	case !wait.set:
		err := m.Lock(ctx)
		return err == nil, ignoreCancel(ctx, err)
	case wait.d == 0:
		return m.TryLock(ctx)
	default:
		ok, err := m.LockTimeout(ctx, wait.d)
		return ok, ignoreCancel(ctx, err)
	}
}

// ignoreCancel drops the error of a wait that a signal ended: the caller
// reports the signal.
func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// runHeld runs the command while m is held. It returns the command's exit
// status, or an error with status 125 if the hold was lost.
func runHeld(m *locker.Mutex, name string, command []string, grace time.Duration, sigs <-chan os.Signal, e env) (int, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(),
		"LOCKER_TOKEN="+strconv.FormatUint(m.Token(), 10),
		"LOCKER_LOCK_NAME="+name,
	)
	// Its own process group, so that a lost hold stops the command's
	// children too — unless it shares our terminal, where it must stay in
	// the foreground group to read from it.
	interactive := isTerminal(e.stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !interactive}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 0, fail(exitNoCmd, "run: %v", err)
		}
		return 0, fail(exitNoExec, "run: %v", err)
	}
	signalCmd := func(s os.Signal) {
		if interactive {
			_ = cmd.Process.Signal(s)
		} else {
			_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	lost := m.Lost()
	start := time.Now()
	var lostOnce sync.Once
	var lostMsg string
	var killTimer <-chan time.Time
	for {
		select {
		case s := <-sigs:
			// The terminal already sent INT and QUIT to the command's
			// group when they share it.
			if interactive && (s == syscall.SIGINT || s == syscall.SIGQUIT) {
				continue
			}
			signalCmd(s)
		case <-lost:
			lost = nil
			lostOnce.Do(func() {
				// The signal first: another owner may hold the lock
				// already, and the message goes to a stderr that may be
				// slow to take it.
				at := time.Now()
				signalCmd(syscall.SIGTERM)
				killTimer = time.After(grace)
				lostMsg = fmt.Sprintf("the hold on %s was lost at %s, %v after it was taken, while the command ran: %v",
					quote(name), at.Format("15:04:05.000"), at.Sub(start).Round(time.Millisecond), holdErr(m))
				fmt.Fprintf(e.stderr, "lockctl: %s; sent SIGTERM (SIGKILL in %v)\n", lostMsg, grace)
			})
		case <-killTimer:
			killTimer = nil
			signalCmd(syscall.SIGKILL)
		case err := <-done:
			select {
			case <-m.Lost():
				if lostMsg == "" {
					lostMsg = fmt.Sprintf("the hold on %s was lost while the command ran: %v", quote(name), holdErr(m))
				}
				return 0, fail(exitLost, "%s; the command was terminated", lostMsg)
			default:
			}
			return exitStatus(err), nil
		}
	}
}

// exitStatus maps the command's end to lockctl's exit status.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitFailure
}

// waitingIndicator shows, on a terminal, how long run has been waiting. It
// returns the function that stops it and clears the line.
func waitingIndicator(e env, name string, quiet bool) func() {
	if quiet || !isTerminal(e.stderr) {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		shown := false
		spin := `|/-\`
		for i := 0; ; i++ {
			select {
			case <-stop:
				if shown {
					fmt.Fprint(e.stderr, "\r\033[K")
				}
				return
			case <-t.C:
				if el := time.Since(start); el >= 500*time.Millisecond {
					shown = true
					fmt.Fprintf(e.stderr, "\r\033[Klockctl: %c waiting for %s (%s)", spin[i%4], quote(name), el.Round(time.Second))
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// isTerminal reports whether v is a character device (a terminal).
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	// A character device is not enough: /dev/null is one, and a command
	// run with stdin from /dev/null must still get its own process group
	// (a lost hold stops its children too). Only a terminal answers
	// TCGETS.
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// holdErr is why m's hold was lost, without the "locker: " prefix.
func holdErr(m *locker.Mutex) string {
	return strings.TrimPrefix(fmt.Sprint(m.Err()), "locker: ")
}
