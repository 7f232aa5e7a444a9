//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/golocker/locker"
)

// Worker is one worker process of the demo, started by Run: rounds of
// lock, work, fenced write to the ledger, unlock, until stdin ends. args
// are those Run gave Config.Worker; the backend is $LOCKER_URL. It reports
// each step as a JSON line on stdout.
func Worker(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("ledger", "", "ledger file")
	id := fs.Int("id", 0, "worker number")
	name := fs.String("name", "", "lock name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	emit := func(ev string, token uint64, msg string) {
		_ = enc.Encode(event{MS: time.Now().UnixMilli(), W: *id, Ev: ev, Token: token, Msg: msg})
	}
	c, err := locker.Open(ctx, os.Getenv("LOCKER_URL"), locker.RequireCrossProcess(), locker.WithTTL(ttl))
	if err != nil {
		emit("error", 0, err.Error())
		return err
	}
	defer c.Close()
	led := &ledger{path: *path}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(stop)
	}()
	for range maxRounds {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := round(ctx, c.NewMutex(*name), led, *id, emit); err != nil {
			return err
		}
		time.Sleep(hold / 2)
	}
	return nil
}

// round is one round of a worker: lock, work, fenced write, unlock.
func round(ctx context.Context, m *locker.Mutex, led *ledger, id int, emit func(ev string, token uint64, msg string)) error {
	if err := m.Lock(ctx); err != nil {
		emit("error", 0, err.Error())
		return err
	}
	tok := m.Token()
	emit("holding", tok, "")
	time.Sleep(hold) // the work; a frozen worker resumes here
	switch ok, highest, err := led.write(id, tok); {
	case err != nil:
		emit("error", tok, err.Error())
	case ok:
		emit("accepted", tok, "")
	default:
		emit("refused", tok, fmt.Sprintf("the ledger has seen token %d", highest))
	}
	if err := m.Unlock(ctx); errors.Is(err, locker.ErrLost) {
		emit("lost", tok, "its lease ran out while it was frozen")
	} else if err != nil {
		emit("error", tok, err.Error())
	}
	return nil
}
