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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
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
}

// Server implements extprocv3.ExternalProcessorServer.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	opts     Options
	canned   *canned
	draining atomic.Bool
	open     atomic.Int64
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Server{opts: opts, canned: newCanned()}
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
	st := newStream(srv.Context(), s.opts.Snapshot(), &s.opts, s.canned)
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		resp := st.handle(req)
		if err := srv.Send(resp); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
}

// handle answers one message with exactly one reply of the matching kind.
func (st *stream) handle(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		st.obs.Message("request_headers")
		return st.requestHeaders(r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		st.obs.Message("request_body")
		return st.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		st.obs.Message("request_trailers")
		return st.canned.requestTrailers
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		st.obs.Message("response_headers")
		return st.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		st.obs.Message("response_body")
		return st.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		st.obs.Message("response_trailers")
		return st.canned.responseTrailers
	default:
		// An unknown message kind (a newer Envoy): there is no reply kind to
		// match, so refuse the request rather than guess.
		st.logger().Error().Str("type", fmt.Sprintf("%T", r)).Msg("unknown ext_proc message")
		return internalError(st, "unsupported ext_proc message")
	}
}
