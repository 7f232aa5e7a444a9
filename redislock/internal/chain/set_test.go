package chain

import (
	"testing"
	"time"
)

func grant(name string, token, last uint64) Grant {
	return Grant{Name: name, Key: "k:" + name, Owner: "first", TTL: ct, Token: token, Last: last, SetAt: time.Now(), Listen: true}
}

// TestSetStartsOnlyChainsThatCanPass: a grant without the inbox, or with
// nothing reserved and no batch, starts no chain; with a batch, one that
// reserved nothing asks for tokens at once.
func TestSetStartsOnlyChainsThatCanPass(t *testing.T) {
	s := NewSet(time.Second)
	g := grant("a", 5, 68)
	g.Listen = false
	if c, _ := s.Start(g, 0); c != nil {
		t.Error("a grant without the inbox started a chain")
	}
	if c, _ := s.Start(grant("a", 5, 5), 0); c != nil {
		t.Error("a grant with nothing reserved started a chain without a batch")
	}
	if _, ok := s.State("a"); ok {
		t.Error("a name without a chain has a state")
	}
	c, reserve := s.Start(grant("b", 5, 5), 2)
	if c == nil || !reserve {
		t.Fatalf("a batch chain whose grant reserved nothing: %v, reserve %v; want a chain that reserves", c, reserve)
	}
	if st, _ := s.State("b"); !st.Remote || st.Left != 0 {
		t.Errorf("state %+v, want remote with nothing left", st)
	}
	prev := s.Reserving(c)
	s.Reserved(c, prev, prev+Block, nil)
	if st, _ := s.State("b"); st.Left != Block {
		t.Errorf("%d tokens left after a reservation of %d", st.Left, Block)
	}
}

// TestSetPassesAndEnds: passes go through the Set while the chain may
// pass, to the holder of the moment, and End takes the chain out once its
// hold now ends; an older hold cannot end it.
func TestSetPassesAndEnds(t *testing.T) {
	s := NewSet(time.Second)
	c, _ := s.Start(grant("n", 10, 73), 0)
	p, _, ok := s.Pass(c, 10, "second", time.Now(), ct, 0)
	if !ok || p.Token != 11 || p.TTL != ct {
		t.Fatalf("Pass = %+v, %v; want token 11 with the chain's TTL", p, ok)
	}
	if _, _, ok := s.Pass(c, 10, "third", time.Now(), ct, 0); ok {
		t.Error("a hold that was passed on passed again")
	}
	if st, _ := s.State("n"); st.Holder != "second" || st.Token != 11 || st.Owner != "first" {
		t.Errorf("state %+v, want the second hold, owned in Redis by the first", st)
	}
	if s.End(c, 10) {
		t.Error("the first hold ended the chain after it passed it on")
	}
	if !s.End(c, 11) {
		t.Fatal("the hold now did not end the chain")
	}
	if _, ok := s.State("n"); ok {
		t.Error("an ended chain is still in the Set")
	}
}

// TestSetKeepsAnEarlyQueuedForTheNextChain: a "q" before any chain of the
// name marks the next one remote, and only it, and only if it comes
// within the Set's early.
func TestSetKeepsAnEarlyQueuedForTheNextChain(t *testing.T) {
	s := NewSet(time.Hour)
	s.Queued("n")
	c, _ := s.Start(grant("n", 1, 64), 0)
	if st, _ := s.State("n"); !st.Remote {
		t.Error("the chain after an early q is not remote")
	}
	s.End(c, 1)
	s.Start(grant("n", 65, 128), 0)
	if st, _ := s.State("n"); st.Remote {
		t.Error("the early q marked a second chain")
	}

	stale := NewSet(0) // every q is older than early
	stale.Queued("m")
	stale.Start(grant("m", 1, 64), 0)
	if st, _ := stale.State("m"); st.Remote {
		t.Error("a q older than early marked the chain")
	}
}

// TestSetTellsEveryChain: a reconnect stops every chain, a forced release
// or a loss its own.
func TestSetTellsEveryChain(t *testing.T) {
	s := NewSet(time.Second)
	a, _ := s.Start(grant("a", 1, 64), 0)
	b, _ := s.Start(grant("b", 1, 64), 0)
	c, _ := s.Start(grant("c", 1, 64), 0)
	s.ForcedOff("a")
	s.Lost(b)
	if _, _, ok := s.Pass(a, 1, "x", time.Now(), ct, 0); ok {
		t.Error("a chain freed by force passed")
	}
	if _, _, ok := s.Pass(b, 1, "x", time.Now(), ct, 0); ok {
		t.Error("a lost chain passed")
	}
	s.Renewed(nil, time.Now(), false) // a hold of no chain
	s.Lost(nil)
	s.Reconnected()
	if st, _ := s.State("c"); !st.Remote {
		t.Error("a reconnect left a chain that may pass ahead of another Driver's waiter")
	}
	if _, _, ok := s.Pass(c, 1, "x", time.Now(), ct, 0); ok {
		t.Error("a chain passed after a reconnect")
	}
}
