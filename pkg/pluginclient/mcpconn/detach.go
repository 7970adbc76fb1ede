package mcpconn

import (
	"context"
	"sync"
	"time"
)

// drainGrace is how long a response body may still be read after the
// caller's context ended. The go-sdk hands a call its answer as soon as the
// SSE event arrives and only then reads the stream to its end, so that the
// connection can be reused; the caller, answered, cancels its context. If
// that cancelled the HTTP request, every stream the server ends a moment
// after its answer (the go-sdk stateless handler closes its per-request
// session first; any server in another process under load) would cost a
// TCP (and TLS) connection per call, and break a pinned session.
const drainGrace = time.Second

// detach returns the context of one HTTP request of a session: it ends when
// the session is retired or closed, or when the caller's context ends,
// except that once release(true) was called (the response headers are in)
// the body gets drainGrace more to be read to its end. release(false) ends
// the context at once (later calls do nothing); it must be called after
// any release(true).
func detach(caller, session context.Context) (context.Context, func(answered bool)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(caller))
	stopSession := context.AfterFunc(session, cancel)
	var (
		mu             sync.Mutex
		answered, done bool
		timer          *time.Timer
	)
	stopCaller := context.AfterFunc(caller, func() {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case done:
		case !answered:
			cancel()
		default:
			timer = time.AfterFunc(drainGrace, cancel)
		}
	})
	return ctx, func(ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			answered = true
			return
		}
		done = true
		stopCaller()
		stopSession()
		if timer != nil {
			timer.Stop()
		}
		cancel()
	}
}
