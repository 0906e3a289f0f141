package store

import (
	"context"
	"time"
)

// Locker provides short leases shared by every process using the store, so
// that work such as a token refresh happens once.
type Locker interface {
	// TryLock takes the lease named key for ttl. It returns held false,
	// without error, when another holder has it. release gives it back
	// early; it only releases this holder's lease.
	TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error)
}
