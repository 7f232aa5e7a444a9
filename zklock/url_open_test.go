package zklock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/zkserver"
	"github.com/golocker/locker/zklock"
)

// TestOpenRefusesASessionTimeoutTheEnsembleRaises: the test server grants
// at least 2 ticks; a URL that asks for less is refused at Open, naming
// what the ensemble grants, rather than running with a longer session than
// configured. Asking for what it grants, or for nothing, opens.
func TestOpenRefusesASessionTimeoutTheEnsembleRaises(t *testing.T) {
	z := standalone.Get(t)
	least := 2 * zkserver.ZooKeeperTickTime
	ctx := drivertest.Context(t, time.Minute)

	asked := least - 100*time.Millisecond
	d, err := zklock.Open(ctx, urlOf(z, "/granted", "session_timeout="+asked.String()))
	if err == nil {
		_ = d.Close()
	}
	if !errors.Is(err, backend.ErrInvalidOption) || !strings.Contains(err.Error(), "the ensemble granted "+least.String()) {
		t.Errorf("Open asking for %v of an ensemble that grants at least %v = %v; want ErrInvalidOption naming %v", asked, least, err, least)
	}
	openDriver(t, urlOf(z, "/granted", "session_timeout="+least.String()))
	openDriver(t, urlOf(z, "/granted", "")) // 10 s asked, lowered to 20 ticks: fine
}
