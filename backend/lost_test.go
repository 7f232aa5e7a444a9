package backend_test

import (
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

func TestLostSignal(t *testing.T) {
	s := backend.NewLostSignal()
	if s.Fired() {
		t.Fatal("a new signal has fired")
	}
	ran := make(chan string, 3)
	s.AfterLost(func() { ran <- "before" })
	stop := s.AfterLost(func() { ran <- "stopped" })
	if !stop() {
		t.Error("stop before Fire = false, want true")
	}
	if stop() {
		t.Error("a second stop = true, want false")
	}
	if !s.Fire() {
		t.Error("the first Fire = false")
	}
	if s.Fire() {
		t.Error("a second Fire = true")
	}
	select {
	case <-s.C():
	default:
		t.Error("the channel is open after Fire")
	}
	if !s.Fired() {
		t.Error("Fired = false after Fire")
	}
	late := s.AfterLost(func() { ran <- "after" })
	if late() {
		t.Error("stop of a function registered after Fire = true, want false: it runs at once")
	}
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case f := <-ran:
			got[f] = true
		case <-deadline:
			t.Fatalf("ran %v, want before and after", got)
		}
	}
	if got["stopped"] || !got["before"] || !got["after"] {
		t.Errorf("ran %v, want before and after", got)
	}
	select {
	case f := <-ran:
		t.Errorf("%s ran too", f)
	case <-time.After(50 * time.Millisecond):
	}
}
