package reconnect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors returned by [Supervisor].
var (
	// ErrOpen means the circuit is open: the peer is down and a background
	// loop is reconnecting. Callers should apply their failure policy at once.
	ErrOpen = errors.New("circuit open")
	// ErrStopped means the supervisor was closed.
	ErrStopped = errors.New("supervisor stopped")
	// ErrNotStarted means Start has not been called yet.
	ErrNotStarted = errors.New("supervisor not started")
)

// State is the state of a supervised connection.
type State int32

// The states of a supervised connection. Connecting is the state before the
// first connection succeeded; Ready means the circuit is closed (a rebuild may
// be running: callers wait for it); Down means the circuit is open.
const (
	Connecting State = iota
	Ready
	Down
)

// String returns "connecting", "ready" or "down".
func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Ready:
		return "ready"
	case Down:
		return "down"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// MinLoopDelay is the backoff base of the background loop when
// Config.Backoff.Base is zero.
const MinLoopDelay = time.Millisecond

// Config configures a [Supervisor]. Only Connect is required.
type Config struct {
	// Connect establishes a new connection and installs it, replacing the
	// previous one. epoch is the epoch the connection will have once
	// Connect returns nil; callers report a broken connection to Rebuild by
	// its epoch. Connect must honour ctx, which is cancelled by Close.
	Connect func(ctx context.Context, epoch uint64) error
	// Attempts is the number of Connect calls one rebuild (or the initial
	// connection) makes before the circuit opens. Values below 1 mean 1.
	Attempts int
	// Backoff spaces the attempts of a rebuild (retry n waits
	// Backoff.Delay(n)) and, continuing the count, the attempts of the
	// background loop while the circuit is open. Set Backoff.Max to cap the
	// loop's interval. A Base of zero makes the retries of a round
	// immediate; the loop then uses a base of [MinLoopDelay] so that it
	// never spins.
	Backoff Backoff
	// Sleep waits between attempts; nil means [Sleep]. Tests inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error

	// The hooks below are optional. They are called from the supervisor's
	// own goroutine, never with its lock held, and must not block.

	// OnRebuild is called when a rebuild starts (once per single flight).
	OnRebuild func()
	// OnAttemptFailed is called after every failed Connect. attempt counts
	// from 0 within a rebuild and keeps counting in the background loop.
	OnAttemptFailed func(attempt int, err error)
	// OnStateChange is called after every state transition.
	OnStateChange func(from, to State)
	// OnConnected is called after every successful connection round,
	// rebuilds included (which are no state transition).
	OnConnected func()
}

// A Supervisor owns the life cycle of one logical connection: the initial
// connection, single-flight rebuilds after a failure, and the circuit breaker.
//
// Transitions: Start runs the first connection round (Connecting → Ready, or
// → Down after Attempts failures). Rebuild, called by whoever saw the
// connection of an epoch fail, runs one round shared by every caller
// (Ready → Ready with epoch+1, or → Down). While Down, Acquire and Rebuild
// return ErrOpen at once, and a background loop calls Connect with capped
// backoff until it succeeds (Down → Ready). Close stops everything.
//
// A Supervisor is safe for concurrent use.
type Supervisor struct {
	cfg Config

	mu      sync.Mutex
	ctx     context.Context // set by Start; cancelled by Close
	cancel  context.CancelFunc
	state   State
	epoch   uint64
	lastErr error   // last Connect error, for ErrOpen messages
	running *flight // the connection round in progress, if any
	closed  bool
	wg      sync.WaitGroup
}

// flight is one connection round that callers may join.
type flight struct {
	done chan struct{}
	err  error // set before done is closed
}

// New returns a Supervisor in state Connecting. Call Start to connect.
func New(cfg Config) *Supervisor {
	if cfg.Attempts < 1 {
		cfg.Attempts = 1
	}
	if cfg.Sleep == nil {
		cfg.Sleep = Sleep
	}
	return &Supervisor{cfg: cfg}
}

// Start begins the first connection round in the background and returns at
// once. Its goroutines stop when Close is called or ctx is done. Calls after
// the first are no-ops.
func (s *Supervisor) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil || s.closed {
		return
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.startRound(false)
}

// State returns the current state.
func (s *Supervisor) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Epoch returns the epoch (connection number) of the current connection (0
// before the first connection succeeded).
func (s *Supervisor) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Acquire waits for any connection round in progress and returns the current
// epoch when the circuit is closed. It returns an error wrapping
// ErrOpen at once while the circuit is open, ErrNotStarted before Start,
// ErrStopped after Close, or ctx.Err() if ctx ends while it waits.
func (s *Supervisor) Acquire(ctx context.Context) (uint64, error) {
	for {
		s.mu.Lock()
		if err := s.unusableLocked(); err != nil {
			s.mu.Unlock()
			return 0, err
		}
		if f := s.running; f != nil {
			s.mu.Unlock()
			if err := wait(ctx, f); err != nil {
				return 0, err
			}
			continue
		}
		epoch := s.epoch
		s.mu.Unlock()
		return epoch, nil
	}
}

// Rebuild reports that the connection of the given epoch failed and waits
// until a newer connection is ready. Concurrent callers share one rebuild
// round; a caller whose epoch is already stale returns nil at once.
// Errors are as for Acquire; a rebuild that fails opens the circuit and
// returns an error wrapping ErrOpen.
func (s *Supervisor) Rebuild(ctx context.Context, epoch uint64) error {
	for {
		s.mu.Lock()
		if err := s.unusableLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		f := s.running
		if f == nil {
			if epoch < s.epoch {
				s.mu.Unlock()
				return nil
			}
			f = s.startRound(true)
		}
		s.mu.Unlock()
		if err := wait(ctx, f); err != nil {
			return err
		}
	}
}

// Usable reports whether a caller would get the current connection at once:
// the circuit is closed and no connection round is in progress. A pool of
// supervised connections skips the ones that are not usable.
func (s *Supervisor) Usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == Ready && s.running == nil && s.unusableLocked() == nil
}

// Invalidate reports, without waiting, that the connection of the given
// epoch is broken: it starts a rebuild round unless one is running, the
// epoch is stale, or the circuit is open (the background loop is already
// reconnecting). It reports whether it started a round.
func (s *Supervisor) Invalidate(epoch uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unusableLocked() != nil || s.running != nil || s.state != Ready || epoch < s.epoch {
		return false
	}
	s.startRound(true)
	return true
}

// Close stops the background goroutines and waits for them. Connection
// rounds in progress see their context cancelled; callers waiting on them get
// ErrStopped. Close does not close the connection itself: that is the owner's
// job, once Close has returned.
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// unusableLocked returns the error a caller gets when no connection can be
// handed out, or nil. A running round is not an error: callers wait for it.
func (s *Supervisor) unusableLocked() error {
	switch {
	case s.closed:
		return ErrStopped
	case s.running != nil:
		return nil
	case s.ctx == nil:
		return ErrNotStarted
	case s.ctx.Err() != nil:
		return ErrStopped
	case s.state == Down:
		return fmt.Errorf("%w (last error: %v)", ErrOpen, s.lastErr)
	}
	return nil
}

// startRound starts a connection round; s.mu must be held.
func (s *Supervisor) startRound(rebuild bool) *flight {
	f := &flight{done: make(chan struct{})}
	s.running = f
	epoch := s.epoch + 1
	s.wg.Add(1)
	go s.round(f, epoch, rebuild)
	return f
}

// round makes up to Attempts connection attempts, publishes the outcome to
// the flight's waiters and, if every attempt failed, keeps reconnecting in
// the background until it succeeds or the supervisor is closed.
func (s *Supervisor) round(f *flight, epoch uint64, rebuild bool) {
	defer s.wg.Done()
	ctx := s.ctx // immutable after Start
	if rebuild && s.cfg.OnRebuild != nil {
		s.cfg.OnRebuild()
	}
	var err error
	attempt := 0
	for ; attempt < s.cfg.Attempts; attempt++ {
		if attempt > 0 {
			if err = s.cfg.Sleep(ctx, s.cfg.Backoff.Delay(attempt-1)); err != nil {
				break
			}
		}
		if err = s.cfg.Connect(ctx, epoch); err == nil {
			break
		}
		if ctx.Err() != nil {
			break
		}
		if s.cfg.OnAttemptFailed != nil {
			s.cfg.OnAttemptFailed(attempt, err)
		}
	}

	s.mu.Lock()
	from := s.state
	s.running = nil
	switch {
	case ctx.Err() != nil:
		// Closing: leave the state alone, waiters see ErrStopped.
		f.err = ErrStopped
	case err == nil:
		s.epoch, s.state = epoch, Ready
	default:
		s.state, s.lastErr = Down, err
		f.err = err
	}
	to := s.state
	close(f.done)
	s.mu.Unlock()
	s.notify(from, to)
	if err == nil && ctx.Err() == nil && s.cfg.OnConnected != nil {
		s.cfg.OnConnected()
	}

	if err != nil && ctx.Err() == nil {
		s.loop(ctx, epoch, attempt)
	}
}

// loop reconnects while the circuit is open.
func (s *Supervisor) loop(ctx context.Context, epoch uint64, attempt int) {
	backoff := s.cfg.Backoff
	if backoff.Base <= 0 {
		backoff.Base = MinLoopDelay
	}
	for {
		if s.cfg.Sleep(ctx, backoff.Delay(attempt-1)) != nil {
			return
		}
		err := s.cfg.Connect(ctx, epoch)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.mu.Lock()
			from := s.state
			s.epoch, s.state = epoch, Ready
			s.mu.Unlock()
			s.notify(from, Ready)
			if s.cfg.OnConnected != nil {
				s.cfg.OnConnected()
			}
			return
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		if s.cfg.OnAttemptFailed != nil {
			s.cfg.OnAttemptFailed(attempt, err)
		}
		attempt++
	}
}

func (s *Supervisor) notify(from, to State) {
	if from != to && s.cfg.OnStateChange != nil {
		s.cfg.OnStateChange(from, to)
	}
}

// wait waits for f or ctx. It returns nil when f is done (the caller then
// re-reads the state), or ctx.Err().
func wait(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
