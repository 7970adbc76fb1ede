// Package processor implements Envoy's ExternalProcessor service for MCP
// traffic: per stream it decides from the request headers whether the body is
// needed, finds the MCP JSON-RPC messages, runs the plugin hooks on them and
// answers Envoy with continue, a rewritten body, or an immediate JSON-RPC error.
//
// The gRPC loop (this file) knows Envoy's reply rule once: exactly one reply,
// of the matching kind, per message received. Everything request-specific
// lives in a per-stream value.
package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// Hooks runs plugin hooks; *executor.Executor satisfies it.
type Hooks interface {
	// Applies reports whether any plugin runs on hook. It is called per
	// request and must be cheap.
	Applies(hook cpex.HookType) bool
	// AppliesTo reports whether any plugin would run on hook for this
	// message (its conditions match g and t); asked before a payload is
	// built.
	AppliesTo(hook cpex.HookType, g *cpex.GlobalContext, t executor.Target) bool
	// Run runs hook through the plugin chain.
	Run(ctx context.Context, hook cpex.HookType, payload json.RawMessage, rc *executor.RequestContext, t executor.Target) executor.Outcome
	// FailClosed reports whether a failure to run hook (e.g. a response too
	// large to inspect) must refuse the message under the plugins' on_error.
	FailClosed(hook cpex.HookType) bool
	// Version changes whenever Applies may answer differently: a new
	// plugin set, a plugin disabled at run time. What the processor
	// derives from Applies is kept until it changes (hookFacts).
	Version() uint64
}

// hookFacts are the questions about the plugins that walk the list of
// dispatched hooks (cpex.Dispatched): asked once per configuration
// snapshot and run-time disable (Hooks.Version), not per request.
type hookFacts struct {
	snap    *Snapshot // whose Hooks answered
	version uint64
	// atHeaders: a plugin has a hook dispatched at the request or response
	// headers (http_pre_request, the identity hooks, http_post_request).
	atHeaders bool
	// atBody: a plugin has a hook that reads an MCP POST's body or its
	// answer (dispatched per message, per result or per list).
	atBody bool
	// post: a plugin has a family's post hook or a list hook, so answers
	// may be read and requests are recorded for them.
	post bool
	// listHook: a plugin has a list hook.
	listHook bool
	// permission, delegate: a plugin has http_auth_check_permission,
	// token_delegate (asked per message).
	permission, delegate bool
}

// hookFactsOf asks snap's Hooks the questions of hookFacts.
func hookFactsOf(snap *Snapshot) *hookFacts {
	hooks := snap.Hooks
	f := &hookFacts{snap: snap, version: hooks.Version(),
		permission: hooks.Applies(cpex.HTTPAuthCheckPermission), delegate: hooks.Applies(cpex.TokenDelegate)}
	for hook, when := range cpex.Dispatched() {
		if !hooks.Applies(hook) {
			continue
		}
		switch when {
		case cpex.AtRequestHeaders, cpex.AtResponseHeaders:
			f.atHeaders = true
		case cpex.PerMessage:
			f.atBody = true
		case cpex.PerResult:
			f.atBody, f.post = true, true
		case cpex.PerList:
			f.atBody, f.post, f.listHook = true, true, true
		}
	}
	return f
}

// factsCache keeps the hookFacts of the latest plugins. The zero value is
// ready to use.
type factsCache struct{ last atomic.Pointer[hookFacts] }

// of returns the hookFacts of snap: the kept ones while the snapshot and
// its Hooks' Version are the same (a reload makes a new snapshot).
func (c *factsCache) of(snap *Snapshot) *hookFacts {
	if f := c.last.Load(); f != nil && f.snap == snap && f.version == snap.Hooks.Version() {
		return f
	}
	f := hookFactsOf(snap)
	c.last.Store(f)
	return f
}

// Snapshot is the configuration one stream runs with from start to end; a
// reload swaps in a new Snapshot for later streams.
type Snapshot struct {
	Settings *config.Extproc
	Hooks    Hooks
	// Identity resolves the caller from what Envoy verified
	// (extproc.identity); nil keeps the legacy identity headers of Settings.
	// Build it with identity.New from the same configuration.
	Identity *identity.Resolver
	// Rules are extproc.rules compiled (rules.Compile); nil or empty: none.
	Rules *rules.Set
	// Pins check the definitions servers advertise (extproc.tool_pinning,
	// pinning.go); nil: off.
	Pins *toolpin.Pinner
	// InProcessOnly says that every plugin runs in this process and no
	// span is exported: the request's headers (trace context, x-request-id)
	// and the global context's metadata (path, authority, session, trace
	// context) then have nowhere to go, so a hooked request builds none
	// for its plugin calls (Options.WithHeaders is not called). False,
	// the zero value, builds them.
	InProcessOnly bool
}

// Options configure a Server.
type Options struct {
	Logger zerolog.Logger
	// Snapshot returns the configuration for a new stream.
	Snapshot func() *Snapshot
	// Observer, if set, is told about each stream's decisions (metrics).
	Observer Observer
	// WithHeaders, if set, attaches HTTP headers to the plugin calls made
	// with the returned context (pluginclient.WithHeaders): the request's
	// traceparent, tracestate and x-request-id follow each tool call into
	// its plugins.
	WithHeaders func(context.Context, http.Header) context.Context
	// LogBodies logs request bodies at debug level (with credential headers
	// redacted). Off by default: bodies may hold secrets.
	LogBodies bool
	// Audit, if set, is given one event per decided MCP message
	// (docs/audit.md), when its stream ends; *audit.Logger satisfies it.
	Audit Auditor
	// Tracer, if set, starts a server span for each request a plugin,
	// rule or pin reads, in the MCP semantic conventions, continuing the
	// client's trace; the plugin calls' spans are its children.
	Tracer trace.Tracer
	// Attribution remembers what each forwarded request and created task
	// was, so that results arriving on other streams (GET replays, tasks)
	// get their post hooks. Create one per sidecar and keep it across
	// configuration reloads; nil means New makes an attribution.Memory
	// with the default bounds. A store shared by replicas
	// (attribution/redisstore) is waited for (attribution.Syncer) before
	// the response of a stream that recorded goes out.
	Attribution attribution.Store
}

// Server implements extprocv3.ExternalProcessorServer.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	opts     Options
	canned   *canned
	accepted *attribution.Accepted // sessions a server accepted (commitRecords)
	bufs     bodyBuffers           // the buffers edited bodies are built in (replies.go)
	lists    *listMemo             // the list answers parsed, by their bytes (listmemo.go)
	facts    factsCache            // what the plugins answer (hookFacts)
	draining atomic.Bool
	open     atomic.Int64
	// warned* make a filter misconfiguration loud once, not once per request.
	warnedDuplex, warnedObservability atomic.Bool
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Attribution == nil {
		opts.Attribution = attribution.New(attribution.Options{})
	}
	return &Server{opts: opts, canned: newCanned(), accepted: attribution.NewAccepted(0, 0, nil), lists: newListMemo(listMemoBytes)}
}

// Drain makes the server refuse new streams; open streams run to their end.
func (s *Server) Drain() { s.draining.Store(true) }

// OpenStreams returns the number of streams being processed.
func (s *Server) OpenStreams() int64 { return s.open.Load() }

// errDraining refuses streams during shutdown.
var errDraining = status.Error(codes.Unavailable, "mcp-extproc is shutting down")

// Process implements [extprocv3.ExternalProcessorServer.Process].
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	if s.draining.Load() {
		return errDraining
	}
	s.open.Add(1)
	s.opts.Observer.StreamOpened()
	defer func() {
		s.open.Add(-1)
		s.opts.Observer.StreamClosed()
	}()
	reserveStack()
	snap := s.opts.Snapshot()
	st := newStream(srv.Context(), snap, s.facts.of(snap), &s.opts, s.canned, s.accepted)
	st.x.body.pool = &s.bufs
	st.x.results.lists = s.lists
	if st.x.trail.recording {
		defer st.x.trail.finish()
	}
	for first := true; ; first = false {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		if first {
			s.checkFilter(st, req)
		}
		if req.GetObservabilityMode() {
			// Envoy expects no reply and applies none: nothing the plugins
			// decide could be enforced, so they are not called.
			s.warnObservability()
			st.x.obs.Message("observability_mode")
			continue
		}
		resp := st.refused
		if resp == nil {
			resp = st.handle(req)
		}
		if err := srv.Send(resp); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		// Send has encoded resp: a body it carried in a lent buffer is
		// no longer read.
		st.x.body.sent()
	}
}

// reserveFrame is the frame reserveStack pushes: with what is above a
// stream's Process (gRPC's frames, a few KiB at most) it needs more than 8
// KiB and less than 16, so the stack becomes 16 KiB, the largest size the
// runtime keeps in its per-CPU stack caches.
const reserveFrame = 10 << 10

// reserveStack grows the goroutine's stack once, while it is shallow, to
// what a stream's deepest work needs. A stream starts on a 2 KiB stack (a
// new goroutine, or a stream worker whose idle stack the GC halved), and
// its work runs 30 to 60 frames deep: the request-headers parsing, the body
// parsed with jsontext, a plugin chain (executor, plugin client, a
// built-in's JSON scan, or the MCP client's HTTP and JSON layers). Grown
// there, the stack is copied two or three times, each copy adjusting every
// frame on it: runtime.copystack was 27 % of a passthrough stream's CPU
// and 35 % of a tool call through three built-ins, in memory. One copy of
// a few frames here costs a fraction of that, and zeroing the frame.
//
//go:noinline
func reserveStack() {
	var frame [reserveFrame]byte
	keep(frame[:])
}

// keep keeps reserveStack's frame from being optimised away.
//
//go:noinline
func keep([]byte) {}

// What the ext_proc filter is configured with, as far as the first message of
// a stream tells: Envoy sends its body modes in protocol_config, and marks
// every message of an observability-mode filter.

// checkFilter refuses a stream whose filter streams a body FULL_DUPLEX: that
// mode ignores mode_override, wants streamed_response body mutations and
// sends a body in chunks the processor would parse one by one, so the
// processor cannot inspect anything correctly. Every message of such a
// stream is answered with a 500 immediate response (valid after any
// message, docs/extproc-contract.md §2), and the first one is logged.
func (s *Server) checkFilter(st *stream, req *extprocv3.ProcessingRequest) {
	pc := req.GetProtocolConfig()
	const duplex = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if pc.GetRequestBodyMode() != duplex && pc.GetResponseBodyMode() != duplex {
		return
	}
	if !s.warnedDuplex.Swap(true) {
		st.x.log.Error().Str("request_body_mode", pc.GetRequestBodyMode().String()).
			Str("response_body_mode", pc.GetResponseBodyMode().String()).
			Msg("ext_proc filter misconfigured: FULL_DUPLEX_STREAMED is not supported; every request is refused with 500 (use request_body_mode NONE or BUFFERED, response_body_mode NONE, allow_mode_override: true)")
	}
	st.x.obs.Immediate("internal")
	st.refused = jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError,
		"mcp-extproc misconfigured: the ext_proc filter uses FULL_DUPLEX_STREAMED, which it does not support", nil), false, nil)
}

// warnObservability logs once that the filter runs in observability mode.
func (s *Server) warnObservability() {
	if !s.warnedObservability.Swap(true) {
		s.opts.Logger.Warn().Msg("ext_proc filter runs in observability_mode: Envoy applies no reply, so plugins cannot enforce anything; messages are not answered and no plugin is called")
	}
}

// Observer is told what each stream did; the metrics package implements it.
// Labels passed are from small fixed sets.
type Observer interface {
	StreamOpened()
	StreamClosed()
	// Message counts a message received from Envoy, by oneof name.
	Message(kind string)
	// ModeOverride counts the body mode chosen ("skip", "request_buffered",
	// "response_headers" (a GET stream whose response headers decide),
	// "response_none", "response_buffered", "response_streamed").
	ModeOverride(mode string)
	// Immediate counts an immediate response by reason ("blocked",
	// "plugin_error", "invalid_request", "too_large", "unsupported_encoding",
	// "internal", "header_mismatch", "header_mirror", "mcp_filter_mismatch", "repeated_header",
	// "pinned")
	// or a result refused in a stream ("unattributed", "invalid_response").
	Immediate(reason string)
	// BodyInspected counts a body (or SSE event) parsed, by direction
	// ("request", "response"), with its size.
	BodyInspected(direction string, bytes int)
	// RuleDecision counts what a rule did: "deny" (a message refused),
	// "hide" (n list items dropped), or under shadow "would_deny" and
	// "would_hide".
	RuleDecision(rule, decision string, n int)
	// RuleEvaluation observes the time the rules took, by phase
	// ("request": one message checked; "list": one list result filtered).
	RuleEvaluation(phase string, d time.Duration)
	// PinChange counts a definition a list showed changed since it was
	// pinned, by kind ("tool", "prompt", "resourceTemplate") and what it
	// cost ("alert", "hide", "block").
	PinChange(kind, action string)
	// Shadowed counts what a plugin, rule or check would have done and
	// was not let to (extproc.shadow, or a rule's mode shadow): by whom
	// ("plugin", "rule", "pin"), its name, and the decision
	// ("would_deny", "would_modify").
	Shadowed(by, name, decision string)
	// ListRead counts a list answer read for the rules, pinning or a list
	// hook that is large enough to be remembered (listmemo.go), by where
	// its parse came from: "memo" (the same bytes were read before) or
	// "scan" (read now).
	ListRead(from string)
}

type nopObserver struct{}

func (nopObserver) StreamOpened()                        {}
func (nopObserver) StreamClosed()                        {}
func (nopObserver) Message(string)                       {}
func (nopObserver) ModeOverride(string)                  {}
func (nopObserver) Immediate(string)                     {}
func (nopObserver) BodyInspected(string, int)            {}
func (nopObserver) RuleDecision(string, string, int)     {}
func (nopObserver) RuleEvaluation(string, time.Duration) {}
func (nopObserver) PinChange(string, string)             {}
func (nopObserver) Shadowed(string, string, string)      {}
func (nopObserver) ListRead(string)                      {}

// Envoy puts the forwarded dynamic metadata (metadata_context: a verified
// JWT payload, say) on every ext_proc message, and the request attributes
// on the first of each direction, but the processor reads them from the
// request headers only (caller.go). Codec decodes a ProcessingRequest
// without them when it is any other message. Of the request headers it
// decodes the attributes but leaves metadata_context encoded, among the
// message's unknown fields: [forwardedMetadata] reads the few claims it
// needs from there (package structwire), where decoding a 12-claim JWT
// payload into Structs would cost about 17 µs and 115 allocations per
// request. Everything else is gRPC's proto codec, unchanged.

// Field numbers of envoy.service.ext_proc.v3.ProcessingRequest.
const (
	fieldRequestHeaders  protowire.Number = 2
	fieldMetadataContext protowire.Number = 8
	fieldAttributes      protowire.Number = 9
)

// NewCodec returns the gRPC codec of the ExternalProcessor server (pass it
// with grpc.ForceServerCodecV2). It is named "proto", as the codec it
// wraps.
func NewCodec() encoding.CodecV2 {
	return codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

type codec struct{ base encoding.CodecV2 }

func (c codec) Name() string { return c.base.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*extprocv3.ProcessingRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalRequest(buf.ReadOnlyData(), m)
}

// unmarshalRequest decodes b, an encoded ProcessingRequest, into m:
// without its metadata_context and attributes unless it carries request
// headers, and with metadata_context left encoded (unknown fields) when it
// does. The parts between the fields left out are decoded one after the
// other into m (the wire format's concatenation is a merge), so nothing is
// copied but metadata_context. Bytes that do not parse as fields are
// decoded whole, for proto.Unmarshal to say why.
func unmarshalRequest(b []byte, m *extprocv3.ProcessingRequest) error {
	skip, kept := envoyContextSpans(b)
	if len(skip) == 0 {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	merge := proto.UnmarshalOptions{Merge: true}
	prev := 0
	for _, s := range skip {
		if err := merge.Unmarshal(b[prev:s.start], m); err != nil {
			return err
		}
		prev = s.end
	}
	if err := merge.Unmarshal(b[prev:], m); err != nil {
		return err
	}
	if kept {
		r := m.ProtoReflect()
		unknown := r.GetUnknown()
		for _, s := range skip {
			unknown = append(unknown, b[s.start:s.end]...) // b is the transport's buffer: copied
		}
		r.SetUnknown(unknown)
	}
	return nil
}

// envoyContextSpans returns the spans of the fields of b that
// unmarshalRequest leaves out, in order: metadata_context and attributes,
// or, when b carries request headers, metadata_context only (kept then
// reports true). It returns nil when b does not parse.
func envoyContextSpans(b []byte) (skip []span, kept bool) {
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil, false
		}
		switch num {
		case fieldRequestHeaders:
			kept = true
		case fieldMetadataContext, fieldAttributes:
			skip = append(skip, span{i, i + n + m, num})
		}
		i += n + m
	}
	if kept {
		skip = slices.DeleteFunc(skip, func(s span) bool { return s.num == fieldAttributes })
	}
	return skip, kept
}

// span is where field num of an encoded message lies: b[start:end].
type span struct {
	start, end int
	num        protowire.Number
}

// forwardedMetadata returns the metadata_context Envoy sent with r,
// checked for reading (structwire.Parse): as the codec left it encoded, or,
// from a server without the codec, encoded again. nil when r has none.
func forwardedMetadata(r *extprocv3.ProcessingRequest) (structwire.Metadata, error) {
	if md := r.GetMetadataContext(); md != nil {
		b, err := proto.Marshal(md)
		if err != nil {
			return nil, fmt.Errorf("encode metadata_context: %w", err)
		}
		return structwire.Parse(b)
	}
	enc, err := structwire.MessageField(r.ProtoReflect().GetUnknown(), fieldMetadataContext)
	if err != nil {
		return nil, fmt.Errorf("unknown fields: %w", err)
	}
	if enc == nil {
		return nil, nil
	}
	return structwire.Parse(enc)
}
