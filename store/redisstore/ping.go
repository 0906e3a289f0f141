package redisstore

import (
	"context"
	"fmt"
)

// Ping reports whether Redis answers. The dispatcher asks it before it
// gives a message back on a store error, and holds the message while
// Redis does not answer (dispatch.Pinger).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}
