package attribution

import "context"

// Store is what the processor needs of an attribution memory: record what a
// forwarded request or a created task was, and look it up when a response
// arrives on another stream. [Memory] is the in-process implementation;
// package redisstore shares the memory between sidecar replicas.
//
// Errors of the lookups are [ErrUnknown], [ErrAmbiguous], [ErrInvalidID] or
// [ErrTooLarge]: a store that cannot reach its backend reports what it
// knows locally, and ErrUnknown for the rest, so the caller's policy for
// unattributable responses applies (never a pass by default). Record
// errors are ErrInvalidID or ErrTooLarge only; a backend failure on a
// write is the store's to count, not the caller's to handle.
type Store interface {
	Record(ctx context.Context, session string, id []byte, o Origin) error
	Lookup(ctx context.Context, session string, id []byte) (Origin, error)
	RecordTask(ctx context.Context, session, taskID string, o Origin) error
	LookupTask(ctx context.Context, session, taskID string) (Origin, error)
	ForgetSession(ctx context.Context, session string)
}

var _ Store = (*Memory)(nil)

// CanonicalID returns the form of a raw JSON-RPC id under which it is
// recorded: [mcpmsg.CanonicalID], so that ids equal as JSON values have
// one form. The error is ErrInvalidID.
func CanonicalID(id []byte) ([]byte, error) { return canonicalID(id) }

// WithDefaults returns o with every zero field set to its default, as New
// uses it.
func (o Options) WithDefaults() Options { return o.withDefaults() }

// Syncer is implemented by a Store that writes behind the requests (package
// redisstore). Sync returns once the records made so far can be seen by
// the other replicas, or after the store's own bound (it never blocks
// longer than that, nor past ctx). The processor calls it before a
// response of a stream that recorded reaches the client, so that whatever
// the client does next (a GET replay, tasks/get) finds the record on any
// replica.
type Syncer interface {
	Sync(ctx context.Context)
}
