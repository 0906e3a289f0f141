//go:build unix

package bus

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockStore takes an exclusive advisory lock on path (creating the file),
// held until release is called or the process ends, however it ends.
func lockStore(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the NATS store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrStoreLocked
		}
		return nil, fmt.Errorf("lock the NATS store: %w", err)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
