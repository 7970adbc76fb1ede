package redisstore

import "time"

// Sync waits until the writes queued so far were sent (or given up), at most
// a few seconds: tests read what another replica wrote behind its requests.
func (s *Store) Sync() {
	w := write{kind: writeBarrier, done: make(chan struct{})}
	select {
	case s.queue <- w:
	case <-time.After(5 * time.Second):
		return
	}
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
	}
}
