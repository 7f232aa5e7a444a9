package driverkit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

func TestLife(t *testing.T) {
	l := NewLife()
	if err := l.Err(); err != nil {
		t.Fatalf("Err of an open Life = %v", err)
	}
	release := make(chan struct{})
	var ended atomic.Bool
	if !l.Go(func() { <-release; ended.Store(true) }) {
		t.Fatal("Go on an open Life ran nothing")
	}
	closed := make(chan error, 1)
	var thens atomic.Int32
	boom := errors.New("boom")
	go func() { closed <- l.Close(func() error { thens.Add(1); return boom }) }()
	<-l.Done() // Close has begun
	if l.Go(func() { t.Error("ran after Close began") }) {
		t.Fatal("Go after Close began reported true")
	}
	if !errors.Is(l.Err(), backend.ErrClosed) {
		t.Fatalf("Err of a closing Life = %v, want ErrClosed", l.Err())
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the goroutine of Go ended", err)
	default:
	}
	close(release)
	if err := <-closed; !errors.Is(err, boom) || !ended.Load() {
		t.Fatalf("Close = %v (goroutine ended: %v), want boom after the goroutine", err, ended.Load())
	}
	if err := l.Close(nil); !errors.Is(err, boom) || thens.Load() != 1 {
		t.Fatalf("second Close = %v with then run %d times, want boom and once", err, thens.Load())
	}
}

func TestSetup(t *testing.T) {
	var s Setup
	l := NewLife()
	ctx := context.Background()
	calls := 0
	fail := errors.New("not yet")
	f := func(context.Context) error {
		calls++
		if calls == 1 {
			return fail
		}
		return nil
	}
	if err := s.Run(ctx, l, f); !errors.Is(err, fail) {
		t.Fatalf("first Run = %v, want its failure", err)
	}
	for range 3 {
		if err := s.Run(ctx, l, f); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Fatalf("set-up ran %d times, want 2 (a failure, then one success)", calls)
	}

	// A caller waiting for another's set-up gives up when its ctx ends or
	// the driver closes.
	var busy Setup
	inside, leave := make(chan struct{}), make(chan struct{})
	go func() {
		_ = busy.Run(ctx, l, func(context.Context) error { close(inside); <-leave; return nil })
	}()
	<-inside
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := busy.Run(short, l, f); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run waiting past its ctx = %v, want DeadlineExceeded", err)
	}
	go func() { _ = l.Close(nil) }()
	if err := busy.Run(ctx, l, f); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("Run waiting when the driver closes = %v, want ErrClosed", err)
	}
	close(leave)
}
