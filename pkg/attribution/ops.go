package attribution

import (
	"context"
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// Record remembers that the request with JSON-RPC id (its raw JSON, e.g.
// `7` or `"a"`) in MCP session session (empty when the server issued none)
// was o. Recording the same key again with the same origin refreshes its
// TTL; with another origin it makes the key ambiguous. The error is
// ErrInvalidID or ErrTooLarge; nothing is recorded then.
//
// Without a session id all clients share one key space (and one
// per-session cap), so their ids collide and become ambiguous: a caller may
// prefer not to record sessionless requests whose answers can only arrive on
// their own POST stream.
func (s *Memory) Record(_ context.Context, session string, id []byte, o Origin) error {
	var buf [128]byte
	key, err := s.requestKey(buf[:0], session, id)
	if err != nil {
		return err
	}
	if len(o.Name) > s.opts.MaxFieldBytes || len(o.Method) > s.opts.MaxFieldBytes {
		return fmt.Errorf("%w: name of %d bytes", ErrTooLarge, len(o.Name))
	}
	s.shard(s.requests, session).put(session, key, o, s.now())
	return nil
}

// Lookup returns the origin recorded for (session, id). The error is
// ErrUnknown, ErrAmbiguous or ErrInvalidID; the caller applies its policy for
// responses it cannot attribute. Lookup does not consume the entry: a
// response may be replayed more than once.
func (s *Memory) Lookup(_ context.Context, session string, id []byte) (Origin, error) {
	var buf [128]byte
	key, err := s.requestKey(buf[:0], session, id)
	if err != nil {
		return Origin{}, err
	}
	return found(s.shard(s.requests, session).get(key, s.now()))
}

// RecordTask remembers that task taskID of MCP session session was created
// by the request o (a tools/call and its tool name). Same rules as Record.
func (s *Memory) RecordTask(_ context.Context, session, taskID string, o Origin) error {
	var buf [128]byte
	key, err := s.taskKey(buf[:0], session, taskID)
	if err != nil {
		return err
	}
	if len(o.Name) > s.opts.MaxFieldBytes || len(o.Method) > s.opts.MaxFieldBytes {
		return fmt.Errorf("%w: name of %d bytes", ErrTooLarge, len(o.Name))
	}
	s.shard(s.tasks, session).put(session, key, o, s.now())
	return nil
}

// LookupTask returns the origin of task taskID in session session. Errors as
// for Lookup. A task created in another session (or without one) is
// unknown.
func (s *Memory) LookupTask(_ context.Context, session, taskID string) (Origin, error) {
	var buf [128]byte
	key, err := s.taskKey(buf[:0], session, taskID)
	if err != nil {
		return Origin{}, err
	}
	return found(s.shard(s.tasks, session).get(key, s.now()))
}

// ForgetSession drops every request and task entry of session, e.g. when
// the client deletes the session.
func (s *Memory) ForgetSession(_ context.Context, session string) {
	s.shard(s.requests, session).dropSession(session)
	s.shard(s.tasks, session).dropSession(session)
}

// Stats are a Memory's current size.
type Stats struct {
	Requests, Tasks, Sessions int
	Bytes                     int // accounted bytes, see the package doc
}

// Stats counts the entries now held (expired ones not yet swept included).
func (s *Memory) Stats() Stats {
	var st Stats
	for i, table := range [][]*shard{s.requests, s.tasks} {
		for _, sh := range table {
			sh.mu.Lock()
			if i == 0 {
				st.Requests += sh.n
			} else {
				st.Tasks += sh.n
			}
			st.Sessions += len(sh.sessions)
			st.Bytes += sh.bytes
			sh.mu.Unlock()
		}
	}
	return st
}

func found(o Origin, ok, ambiguous bool) (Origin, error) {
	switch {
	case !ok:
		return Origin{}, ErrUnknown
	case ambiguous:
		return Origin{}, ErrAmbiguous
	}
	return o, nil
}

// requestKey appends session, a NUL and the canonical id to dst. The NUL
// cannot occur in a canonical JSON id, so distinct (session, id) pairs give
// distinct keys.
func (s *Memory) requestKey(dst []byte, session string, id []byte) ([]byte, error) {
	if len(session) > s.opts.MaxFieldBytes || len(id) > s.opts.MaxFieldBytes {
		return nil, fmt.Errorf("%w: session id or request id", ErrTooLarge)
	}
	canon, err := canonicalID(id)
	if err != nil {
		return nil, err
	}
	dst = append(dst, session...)
	dst = append(dst, 0)
	return append(dst, canon...), nil
}

// taskKey is requestKey for task ids (strings, compared exactly).
func (s *Memory) taskKey(dst []byte, session, taskID string) ([]byte, error) {
	if taskID == "" {
		return nil, ErrInvalidID
	}
	if len(session) > s.opts.MaxFieldBytes || len(taskID) > s.opts.MaxFieldBytes {
		return nil, fmt.Errorf("%w: session id or task id", ErrTooLarge)
	}
	dst = append(dst, session...)
	dst = append(dst, 0)
	return append(dst, taskID...), nil
}

// canonicalID is mcpmsg.CanonicalID with this package's error.
func canonicalID(id []byte) ([]byte, error) {
	canon, err := mcpmsg.CanonicalID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidID, err)
	}
	return canon, nil
}
