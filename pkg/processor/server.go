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
	"sync/atomic"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
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
	// then have nowhere to go, so a hooked request builds none for its
	// plugin calls (Options.WithHeaders is not called). False, the zero
	// value, builds them.
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
	bufs     bodyBuffers           // the buffers edited bodies are built in (bodybuf.go)
	lists    *listMemo             // the list answers parsed, by their bytes (listmemo.go)
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
	st := newStream(srv.Context(), s.opts.Snapshot(), &s.opts, s.canned, s.accepted)
	st.x.body.pool = &s.bufs
	st.x.lists = s.lists
	defer st.x.trail.finish()
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
