package redisstore

import (
	"context"
	"time"
)

// sync waits for the writes queued so far (a few seconds at most), as a
// stream does before its response goes out: tests read what another
// replica wrote.
func (s *Store) sync() {
	s.mu.Lock()
	target := s.seq
	s.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); s.flushed.Load() < target && time.Now().Before(deadline); {
		s.Sync(context.Background())
	}
}
