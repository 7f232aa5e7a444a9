package driverkit

import (
	"time"

	"github.com/golocker/locker/backend"
)

// Grant is what the lease of a driver whose store only answers requests
// (mysqllock, mongolock) knows of its hold: the lock's name, its owner,
// its fencing token and when the granting request was sent. Such a store
// does not tell a holder that its lock changed hands — the next renewal
// finds out — so Lost returns nil. A lease type embeds a Grant and adds
// Renew and Release.
type Grant struct {
	Name, Owner string
	Fence       uint64
	Sent        time.Time
}

// GrantOf returns the Grant of r, with fence, requested at sent.
func GrantOf(r backend.Request, fence int64, sent time.Time) Grant {
	return Grant{Name: r.Name, Owner: r.Owner, Fence: uint64(fence), Sent: sent}
}

// Token returns the fence of the grant.
func (g *Grant) Token() uint64 { return g.Fence }

// Start returns when the granting request was sent.
func (g *Grant) Start() time.Time { return g.Sent }

// Lost returns nil: the store does not tell.
func (g *Grant) Lost() *backend.LostSignal { return nil }
