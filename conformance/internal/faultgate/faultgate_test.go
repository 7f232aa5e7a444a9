package faultgate

import (
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate
	if d, err := g.Wait(nil); d != 0 || err != nil {
		t.Fatalf("zero Gate: Wait = %v, %v; want 0, nil", d, err)
	}
	g.SetDelay(3 * time.Millisecond)
	if d, err := g.Wait(nil); d != 3*time.Millisecond || err != nil {
		t.Fatalf("with a delay: Wait = %v, %v; want 3ms, nil", d, err)
	}

	g.Pause()
	g.Pause() // one pause, not two
	if n := g.Pauses(); n != 1 {
		t.Fatalf("Pauses = %d after one pause, want 1", n)
	}
	done := make(chan struct{})
	close(done)
	if _, err := g.Wait(done); !errors.Is(err, ErrDone) {
		t.Fatalf("paused, done closed: Wait error %v, want ErrDone", err)
	}
	g.Resume()
	if _, err := g.Wait(done); err != nil {
		t.Fatalf("resumed: Wait error %v", err)
	}

	g.Cut()
	if !g.IsCut() {
		t.Fatal("IsCut false after Cut")
	}
	if _, err := g.Wait(nil); !errors.Is(err, ErrCut) {
		t.Fatalf("cut: Wait error %v, want ErrCut", err)
	}
	g.Restore()
	if _, err := g.Wait(nil); err != nil || g.IsCut() {
		t.Fatalf("restored: Wait error %v, IsCut %v", err, g.IsCut())
	}
}
