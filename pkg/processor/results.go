package processor

import (
	"bytes"
	"maps"
	"slices"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// A result reaches the client on the POST that asked for it, or on another
// stream (docs/mcp-result-paths.md): a GET that resumes a stream replays
// its responses, and a task's result is the answer to tasks/result or
// tasks/get. results is the one place that says which request a result
// answers: the requests of this stream whose answers are awaited, and, for
// any other, the sidecar's attribution.Store, where the stream that
// forwarded a request recorded what it was.

// awaitKind is what the answer to a request is read for.
type awaitKind uint8

const (
	// awaitHooked: its family's post hook runs on the result.
	awaitHooked awaitKind = iota + 1
	// awaitTask: a call whose answer may create a task (its target is
	// recorded for the task's result); no post hook runs on it.
	awaitTask
	// awaitList: a list the rules filter, pinning checks or a list hook
	// reads.
	awaitList
	// awaitUnknown: the request that would name the target is not known
	// (a task of unknown origin, a result of a request no record names);
	// the unattributed_responses policy applies to a result.
	awaitUnknown
)

// awaited is what is known of the request a result answers.
type awaited struct {
	kind   awaitKind
	route  *hookfamily.Route // nil for a list, or for an unknown request of any method
	target hookfamily.Target
	rc     *executor.RequestContext // the plugin context of the request's hooks
	list   *mcplist.List            // awaitList
	// event is the request's audit event (trail.go), -1 for none.
	event int
}

// results matches the answers a stream carries to their requests, and
// records this stream's requests for the answers other streams carry.
type results struct {
	x        *exchange
	store    attribution.Store
	accepted *attribution.Accepted // sessions a server accepted lately (Server-wide)
	// pending are the requests of this stream whose answers are read,
	// by canonical id (idKey).
	pending map[string]*awaited
	// own are the ids of this stream's requests: on a stream that may
	// carry other streams' results, their answers need no lookup.
	own map[string]struct{}
	// foreign: this stream may carry results of other streams' requests
	// (a GET; a POST whose answer is read), looked up in the store.
	foreign bool
	// records wait for the server to accept the request (commit);
	// recorded: a record was written, which a replica may wait for.
	records  []requestRecord
	recorded bool
	// lists is the Server's memo of parsed list answers (listmemo.go),
	// which an awaited list is read through; nil: none.
	lists *listMemo
}

// requestRecord is a request of this stream to record: its canonical id
// and what it was.
type requestRecord struct {
	id     string
	origin attribution.Origin
}

// reads reports whether requests are recorded and GET streams read: a
// post hook may apply to a replayed result, or rules filter (or pinning
// checks) a replayed list.
func (r *results) reads() bool {
	snap := r.x.snap
	return r.x.hooked.post || snap.Rules.Len() > 0 || snap.Pins != nil
}

// forgetSession forgets a session a DELETE ends: a later replay in it is
// unattributable, the safe direction.
func (r *results) forgetSession() {
	if s := r.x.req.sessionID; s != "" {
		r.store.ForgetSession(r.x.ctx, s)
		r.accepted.Forget(s)
	}
}

// wants returns what the answer of a routed request is read for, or nil:
// the post hook applies to its target; or it is a call that may create a
// task (its task id is learned from the answer); or it reads a task of
// unknown origin (the unattributed_responses policy applies to a result).
func (r *results) wants(route *hookfamily.Route, m *mcpmsg.Message, target hookfamily.Target, known bool) *awaited {
	if !route.Post || m.ID == nil {
		return nil
	}
	hooks, post := r.x.snap.Hooks, route.Family.Post
	switch {
	case !known:
		if !hooks.Applies(post) || !r.x.snap.Settings.RefusesUnattributed() {
			return nil
		}
		return &awaited{kind: awaitUnknown, route: route, target: target, event: -1}
	case hooks.AppliesTo(post, &r.x.req.global, target):
		return &awaited{kind: awaitHooked, route: route, target: target, event: -1}
	case route.CreatesTasks && mayCreateTask(m) && hooks.Applies(post):
		return &awaited{kind: awaitTask, route: route, target: target, event: -1}
	}
	return nil
}

// readsList reports whether the answer of a list method is read: the
// rules filter it, or its definitions are pinned (pinning.go).
func (x *exchange) readsList(method string) bool {
	l, ok := mcplist.ByMethod(method)
	if !ok {
		return false
	}
	return x.snap.Rules.Len() > 0 || pinsList(x.snap, method) || x.snap.Hooks.Applies(l.Hook)
}

// expectList makes the answer of a list request awaited, when the rules,
// pinning or a list hook read it.
func (r *results) expectList(m *mcpmsg.Message, event int) {
	if m.Kind != mcpmsg.KindRequest || !r.x.readsList(m.Method) {
		return
	}
	l, _ := mcplist.ByMethod(m.Method)
	r.await(m.ID, &awaited{kind: awaitList, list: l, event: event})
}

// await makes the answer to id awaited as a. The response is then read,
// so other streams' results on it are looked up too. Awaited answers are
// keyed by the id's value (mcpmsg.CanonicalID): Parse accepted the
// request, so it has one.
func (r *results) await(id []byte, a *awaited) {
	if r.pending == nil {
		r.pending = make(map[string]*awaited)
	}
	r.pending[string(idKey(id))] = a
	r.foreign = true
}

// idKey is the form of a JSON-RPC id that requests and answers are
// matched under: its value, as mcpmsg.CanonicalID writes it. An id without
// one (an answer's 7.0: no request Parse accepted has it) is returned as
// nil, which is the key of no request.
func idKey(id []byte) []byte {
	canon, err := mcpmsg.CanonicalID(id)
	if err != nil {
		return nil
	}
	return canon
}

// listKeys returns the keys of the list the awaited answers are, when
// they are lists of one kind (mcplist.List): mcpmsg.ParseList then indexes
// the list as it validates the answer, and the filter need not read it
// again (reader.edit).
func (r *results) listKeys() (mcpmsg.ListKeys, bool) {
	var l *mcplist.List
	for _, a := range r.pending {
		if a.kind != awaitList {
			continue
		}
		if l != nil && l != a.list {
			return mcpmsg.ListKeys{}, false
		}
		l = a.list
	}
	if l == nil {
		return mcpmsg.ListKeys{}, false
	}
	return mcpmsg.ListKeys{Items: l.ItemsKey, Name: l.NameKey}, true
}

// reading reports whether the answer is read at all.
func (r *results) reading() bool { return len(r.pending) > 0 || r.foreign }

// match returns what the response m answers, or nil when it passes
// unread: an awaited request of this stream (then no longer awaited), or,
// on a stream that may carry other streams' results, the store's record.
func (r *results) match(m *mcpmsg.Message) *awaited {
	key := idKey(m.ID)
	if a, ok := r.pending[string(key)]; ok && key != nil {
		delete(r.pending, string(key))
		return a
	}
	if !r.foreign {
		return nil
	}
	if _, mine := r.own[string(key)]; mine && key != nil {
		return nil
	}
	return r.lookup(m.ID)
}

// lookup finds what a response to a request of another stream answers.
// It returns nil when the response passes (no post hook applies to its
// request, or the policy lets unattributable responses pass).
func (r *results) lookup(id []byte) *awaited {
	x := r.x
	o, err := r.store.Lookup(x.ctx, x.req.sessionID, id)
	if err != nil {
		if !x.snap.Settings.RefusesUnattributed() {
			return nil
		}
		return &awaited{kind: awaitUnknown, event: -1}
	}
	if l, ok := mcplist.ByMethod(o.Method); ok {
		if !x.readsList(o.Method) {
			return nil
		}
		return &awaited{kind: awaitList, list: l, event: -1} // filtered (and checked) for this stream's caller
	}
	route, ok := hookfamily.ByMethod(o.Method)
	if !ok || !route.Post {
		return nil
	}
	x.ensureContext()
	target := hookfamily.Target{Family: route.Family, Name: o.Name}
	a := &awaited{kind: awaitHooked, route: route, target: target, rc: executor.NewRequestContext(x.req.global), event: -1}
	if !x.snap.Hooks.AppliesTo(route.Family.Post, &x.req.global, target) {
		if !route.CreatesTasks {
			return nil
		}
		a.kind = awaitTask
	}
	return a
}

// forwarded notes the requests of a body that goes on: recorded for the
// answers other streams may carry (at once in a session a server accepted
// lately, else once the answer shows it does: commit), and remembered as
// this stream's own.
//
// Requests of every method are recorded, not only hooked ones: a replayed
// answer whose id the store does not know is refused, and a tools/list
// answer must still resume. Sessionless requests are not recorded (their
// ids share one key space and collide; their answers can only come on
// their own POST), nor a task request whose task is unknown.
func (r *results) forwarded(msgs *mcpmsg.Body) {
	x := r.x
	record, now := r.recordsRequests(), r.accepted.Has(x.req.sessionID)
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest {
			continue
		}
		if r.foreign {
			if r.own == nil {
				r.own = make(map[string]struct{}, len(msgs.Messages))
			}
			r.own[string(idKey(m.ID))] = struct{}{}
		}
		if !record {
			continue
		}
		o := attribution.Origin{Method: m.Method}
		if route, ok := hookfamily.ByMethod(m.Method); ok {
			name, known := r.targetOf(route, m)
			if !known {
				continue
			}
			o.Name = name
		}
		if now {
			r.record(idKey(m.ID), o)
			continue
		}
		r.records = append(r.records, requestRecord{id: string(idKey(m.ID)), origin: o})
	}
}

// recordsRequests reports whether this request's ids are recorded for
// the results that may come on other streams.
func (r *results) recordsRequests() bool {
	return r.x.req.sessionID != "" && r.reads()
}

// awaitsAcceptance reports whether this request's ids can only be
// recorded once the server's answer shows it accepted the session: its
// answer's headers are then needed (plan.go). A session a server accepted
// lately is recorded at once, costing no message.
func (r *results) awaitsAcceptance() bool {
	return r.recordsRequests() && !r.accepted.Has(r.x.req.sessionID)
}

// waiting reports whether records are waiting for the answer, or were
// written and may need a sync.
func (r *results) waiting() bool { return len(r.records) > 0 || r.recorded }

// commit is called at the response headers, before anything of the
// response reaches the client. Records still waiting are written when the
// server accepted the request (2xx; the session is then remembered as
// accepted) and dropped otherwise: a request the server refused (a session
// it does not know: 404, 400) is never recorded, so made-up sessions cost
// the store nothing (docs/attribution-store.md). Then, with a store that
// writes behind the requests (shared between replicas), it waits until
// this stream's records can be seen by the other replicas, so that a
// replay through another replica finds them. Only an SSE response can be
// replayed (a GET resumes from an event id); a task's record waits on its
// own (RecordTask). The store bounds the wait.
func (r *results) commit(status int, mediaType string) {
	x := r.x
	accepted := status >= 200 && status <= 299
	if accepted && r.recordsRequests() {
		r.accepted.Add(x.req.sessionID) // a notification's 202 says so too
	}
	if len(r.records) > 0 {
		if !accepted {
			x.logger().Debug().Int("status", status).Int("requests", len(r.records)).Msg("requests not recorded for attribution: the server did not accept them")
			r.records = nil
			return
		}
		for _, rec := range r.records {
			r.record([]byte(rec.id), rec.origin)
		}
		r.records = nil
	}
	if !r.recorded {
		return
	}
	r.recorded = false
	if s, ok := r.store.(attribution.Syncer); ok && mediaType == "text/event-stream" {
		s.Sync(x.ctx)
	}
}

// record writes one request's record to the store.
func (r *results) record(id []byte, o attribution.Origin) {
	x := r.x
	if err := r.store.Record(x.ctx, x.req.sessionID, id, o); err != nil {
		x.logger().Debug().Err(err).Str("method", o.Method).Msg("request not recorded for attribution")
		return
	}
	r.recorded = true
}

// targetOf returns the target name of a routed request: from its params,
// or, for a route whose target is not in the request (tasks/result,
// tasks/get), the target of the call that created the task. known is
// false when that task was never seen (or is forgotten).
func (r *results) targetOf(route *hookfamily.Route, m *mcpmsg.Message) (name string, known bool) {
	if route.TargetParam != "" {
		return targetName(route, m), true
	}
	id, ok := attribution.ParamsTaskID(m.Params)
	if !ok {
		return "", false
	}
	o, err := r.store.LookupTask(r.x.ctx, r.x.req.sessionID, id)
	if err != nil {
		return "", false
	}
	if creator, ok := hookfamily.ByMethod(o.Method); !ok || !creator.CreatesTasks || creator.Family != route.Family {
		return "", false
	}
	return o.Name, true
}

// mayCreateTask reports whether a call may be answered with a task:
// params.task (2025-11-25) or the tasks extension declared in params._meta
// (2026-07-28) both name "task".
func mayCreateTask(m *mcpmsg.Message) bool {
	return bytes.Contains(m.Params, []byte("task")) || bytes.Contains(m.Params, []byte(`\u`))
}

// recordTask remembers the task an answer to a of route CreatesTasks
// created, so that its result (tasks/result, tasks/get) gets the post
// hook under a's target.
func (r *results) recordTask(a *awaited, result []byte) {
	if a.route == nil || !a.route.CreatesTasks {
		return
	}
	if !bytes.Contains(result, []byte(`"task`)) && !bytes.Contains(result, []byte(`\u`)) {
		return
	}
	id, ok := attribution.CreatedTaskID(result)
	if !ok {
		return
	}
	x := r.x
	if err := r.store.RecordTask(x.ctx, x.req.sessionID, id, attribution.Origin{Method: a.route.Method, Name: a.target.Name}); err != nil {
		x.logger().Warn().Err(err).Msg("task not recorded: its result will be unattributable")
	}
}

// failAwaited answers every awaited request with an internal error saying
// why, in a stable order, and forgets them.
func (r *results) failAwaited(message string) [][]byte {
	ids := slices.Sorted(maps.Keys(r.pending))
	errs := make([][]byte, 0, len(ids))
	for _, id := range ids {
		errs = append(errs, mcpmsg.ErrorResponse([]byte(id), mcpmsg.CodeInternalError, message, nil))
	}
	r.pending = nil
	return errs
}

// awaitedFailClosed reports whether an awaited answer must not pass
// unread: a list (nothing the rules hide may pass unfiltered), or a result
// whose post hook fails closed.
func (r *results) awaitedFailClosed() bool {
	hooks := r.x.snap.Hooks
	for _, a := range r.pending {
		switch a.kind {
		case awaitList:
			return true
		case awaitHooked, awaitUnknown:
			if hooks.FailClosed(a.target.Family.Post) {
				return true
			}
		}
	}
	return false
}

// unreadFailsClosed reports whether an answer too large or too encoded to
// read is refused: an awaited answer fails closed, or, on a stream that
// may carry other streams' results, anything read from them would.
func (r *results) unreadFailsClosed() bool {
	if r.awaitedFailClosed() {
		return true
	}
	if !r.foreign {
		return false
	}
	snap := r.x.snap
	if snap.Rules.Len() > 0 || (snap.Pins != nil && snap.Pins.OnChange() != toolpin.Alert) {
		return true // a list the rules filter, or pinning hides or blocks, may be in it
	}
	for f := range hookfamily.Families() {
		if snap.Hooks.Applies(f.Post) && snap.Hooks.FailClosed(f.Post) {
			return true
		}
	}
	return false
}
