package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/golocker/locker"
)

// The paused-holder tests run a holder in a child process (this test
// binary, re-executed), so that it can be frozen with SIGSTOP as a real
// process would be by a long GC pause, a VM migration or a debugger.
const (
	helperURLEnv  = "ETCDLOCK_TEST_HELPER_URL"
	helperNameEnv = "ETCDLOCK_TEST_HELPER_NAME"
)

// helperMain is the child: it takes the lock, prints "held <token>", waits
// until its hold is reported lost, prints "lost", unlocks and prints
// "unlock lost=<whether Unlock said ErrLost>".
func helperMain() int {
	ctx := context.Background()
	c, err := locker.Open(ctx, os.Getenv(helperURLEnv))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	m := c.NewMutex(os.Getenv(helperNameEnv))
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.Lock(lctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Printf("held %d\n", m.Token())
	select {
	case <-m.Lost():
		fmt.Println("lost")
	case <-time.After(2 * time.Minute):
		fmt.Println("not lost")
	}
	err = m.Unlock(ctx)
	fmt.Printf("unlock lost=%v\n", errors.Is(err, locker.ErrLost))
	return 0
}
