package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

// TestErrorMessages holds the messages users see: one "locker:" prefix,
// the cause named, a hint where one helps.
func TestErrorMessages(t *testing.T) {
	ctx := testCtx(t)
	open := func(raw string, opts ...locker.Option) func() error {
		return func() error {
			c, err := locker.Open(ctx, raw, opts...)
			closeIfOpen(c)
			return err
		}
	}
	cases := []struct {
		name string
		err  func() error
		want string
		is   error
	}{
		{"an empty URL", open(""), `locker: open : bad URL: no scheme (want e.g. redis://127.0.0.1:6379 or mem://)`, locker.ErrBadURL},
		{"an address without a scheme", open("127.0.0.1:6379"), `locker: open 127.0.0.1:6379: bad URL: no scheme (want e.g. redis://127.0.0.1:6379)`, locker.ErrBadURL},
		{"an unknown scheme", open("x://h"), `locker: unknown scheme "x" (forgotten import? registered: echo-test, mem)`, locker.ErrUnknownScheme},
		{"single_process that is not a boolean", open("mem://?single_process=maybe"), `locker: open mem://?single_process=maybe: bad URL: single_process="maybe": want true or false, once`, locker.ErrBadURL},
		{"an in-process driver where other processes must be excluded", open("mem://", locker.RequireCrossProcess()), `locker: open mem://: bad URL: an in-process driver cannot exclude other processes (RequireCrossProcess); use a store every process reaches: redis://, postgres://, etcd://, ...`, locker.ErrBadURL},
		{"a TTL too short", func() error { _, err := locker.New(locallock.New(nil), locker.WithTTL(time.Millisecond)); return err }, `locker: invalid TTL: 1ms (must be at least 10ms)`, locker.ErrInvalidTTL},
		{"a nil driver", func() error { _, err := locker.New(nil); return err }, `locker: invalid option: nil driver`, locker.ErrInvalidOption},
		{"a bad name", func() error { return newClient(t, locallock.New(nil)).NewMutex("").Lock(ctx) }, `locker: lock "": invalid lock name: empty`, locker.ErrInvalidName},
		{"Holds without an inspector", func() error {
			_, err := newClient(t, newWrapDriver(nil, false)).Holds(ctx, "")
			return err
		}, `locker: holds: not supported by this driver`, locker.ErrNotSupported},
		{"a store that fails until the deadline", func() error {
			d := newWrapDriver(nil, false)
			d.acquireErr = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
			dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			// Without a native wait, package locker retries: the ctx's end
			// says what the store last said.
			return newClient(t, pollOnly{d}).NewMutex("m").Lock(dctx)
		}, `locker: lock "m": context deadline exceeded (last store error: dial tcp 127.0.0.1:1: connect: connection refused)`, context.DeadlineExceeded},
		{"a hold lost for want of renewals", func() error {
			d := newWrapDriver(nil, true)
			d.mode.Store(int32(renewFail))
			m := newClient(t, d, locker.WithTTL(60*time.Millisecond)).NewMutex("r")
			mustLock(t, ctx, m)
			<-m.Lost()
			return m.Unlock(ctx)
		}, `locker: unlock "r": hold lost: no renewal succeeded before the lease could run out (`, locker.ErrLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != tc.want && !(tc.want[len(tc.want)-1] == '(' && len(got) > len(tc.want) && got[:len(tc.want)] == tc.want) {
				t.Errorf("message:\n got %s\nwant %s", got, tc.want)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("%v does not match %v", err, tc.is)
			}
		})
	}
	t.Run("the lost hold's error reports the attempts and the last error", func(t *testing.T) {
		d := newWrapDriver(nil, true)
		d.mode.Store(int32(renewFail))
		m := newClient(t, d, locker.WithTTL(60*time.Millisecond)).NewMutex("r2")
		mustLock(t, ctx, m)
		<-m.Lost()
		err := m.Unlock(ctx)
		if !errors.Is(err, errTransient) {
			t.Errorf("%v does not carry the store's last error", err)
		}
	})
}

// pollOnly hides a driver's native wait: package locker polls it.
type pollOnly struct{ backend.Driver }

// TestLongNamesInErrors: a name far over the limit makes a short error
// that still says what is wrong, with the name's first bytes.
func TestLongNamesInErrors(t *testing.T) {
	ctx := testCtx(t)
	long := "orders/" + strings.Repeat("x", 10*1024)
	c := newClient(t, locallock.New(nil))
	tmpl := locker.MustParseName("orders/{{.}}")
	_, tmplErr := tmpl.Name(strings.Repeat("x", 10*1024))
	for what, err := range map[string]error{
		"Lock":              c.NewMutex(long).Lock(ctx),
		"Unlock":            c.NewMutex(long).Unlock(ctx),
		"Do":                c.Do(ctx, long, func(context.Context) error { return nil }),
		"ForceRelease":      c.ForceRelease(ctx, long),
		"NameTemplate.Name": tmplErr,
	} {
		if !errors.Is(err, locker.ErrInvalidName) {
			t.Errorf("%s: %v, want ErrInvalidName", what, err)
			continue
		}
		msg := err.Error()
		if len(msg) > 300 || !strings.Contains(msg, `"orders/xxxxxxxx`) || !strings.Contains(msg, `…" (10247 bytes)`) || !strings.Contains(msg, "more than 512") {
			t.Errorf("%s: %d-byte error %.400q; want at most 300 bytes, with the name's start, cut, and the limit", what, len(msg), msg)
		}
	}
}
