package processor

import "sync"

// An edited list result (rules.go) is the body of the reply that carries
// it: as large as the server's answer, tens of KiB for a list of a few
// hundred tools. Building each in a new buffer made the GC the largest
// cost of a filtered list after the two passes over it, so the buffers
// are lent from a pool the Server keeps, and come back to it once the
// reply carrying them is sent: gRPC's Send has encoded the reply by the
// time it returns, so the bytes are no longer read.

// maxPooledBody is the largest buffer kept for reuse: a larger one (an
// unusually large list) is left to the GC rather than held by the pool.
const maxPooledBody = 1 << 20

// bodyBuffers lends the buffers edited bodies are built in. The zero
// value is ready to use.
type bodyBuffers struct{ pool sync.Pool } // of *[]byte

// get returns a buffer, empty but maybe with capacity.
func (p *bodyBuffers) get() *[]byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// put gives b back for reuse. b must no longer be read or written by
// anyone else.
func (p *bodyBuffers) put(b *[]byte) {
	if cap(*b) > maxPooledBody {
		return
	}
	*b = (*b)[:0]
	p.pool.Put(b)
}

// bodyLender lends an exchange the buffer for the body it edits next and
// takes it back once the reply carrying it is sent.
type bodyLender struct {
	pool *bodyBuffers // nil: each edit allocates
	lent *[]byte      // the buffer the reply being built or sent carries
}

// lend returns the buffer for the body the exchange edits next, or
// nil when it has no pool or a buffer is lent already (the reply being
// built carries it): then the edit allocates its own.
func (l *bodyLender) lend() []byte {
	if l.pool == nil || l.lent != nil {
		return nil
	}
	l.lent = l.pool.get()
	return *l.lent
}

// keep settles the buffer lend returned: out, when not nil, is
// what was built in it (or in a larger copy it grew into), and the reply
// carries it until it is sent (sent); with nil the buffer was not used
// and goes back at once.
func (l *bodyLender) keep(out []byte) {
	if l.lent == nil {
		return
	}
	if out == nil {
		l.pool.put(l.lent)
		l.lent = nil
		return
	}
	*l.lent = out
}

// sent is called once the reply to a message was sent: the body it
// carried, when built in a lent buffer, is no longer read and the buffer
// goes back to the pool.
func (l *bodyLender) sent() {
	if l.lent != nil {
		l.pool.put(l.lent)
		l.lent = nil
	}
}
