package processor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// phase is where a stream is in its life. It only moves forward:
//
//	requestHeaders ─┬─▶ passThrough (not a hooked request: everything as is)
//	                └─▶ requestBody ─▶ requestSeen ─▶ responseNone
//	                                               ├─▶ responseJSON
//	                                               └─▶ responseSSE ─┬─▶ responseNone (over the limit, fail open)
//	                                                                └─▶ responseDropped (over the limit, fail closed)
type phase int

const (
	phaseRequestHeaders  phase = iota // nothing received yet
	phasePassThrough                  // bodies skipped; every message passes as is
	phaseRequestBody                  // the request body was asked for and not yet seen
	phaseRequestSeen                  // the request body was inspected
	phaseResponseNone                 // the response body is not inspected
	phaseResponseJSON                 // the response body is buffered JSON
	phaseResponseSSE                  // the response body is streamed SSE, event by event
	phaseResponseDropped              // the SSE stream failed closed: the rest is dropped
)

// stream is the state of one ext_proc stream, i.e. one HTTP request. The
// request path is in request.go, the response path in response.go (JSON)
// and response_sse.go (SSE).
type stream struct {
	ctx    context.Context
	snap   *Snapshot
	canned *canned
	log    zerolog.Logger
	obs    Observer
	phase  phase

	requestID    string
	sessionID    string
	path         string
	authority    string
	contextReady bool // ensureContext ran
	// refused, when set, answers every message: the filter is misconfigured.
	refused  *extprocv3.ProcessingResponse
	std      stdHeaders // MCP 2026-07-28 standard headers (decide.go)
	encoding string     // content-encoding of the request body, "" for identity
	// answerEncoding is the content-encoding of a response body that is
	// read, "" for identity (response.go).
	answerEncoding string
	// raw are header values kept as received until a plugin call or a log
	// line needs them (ensureContext).
	raw rawHeaders
	// droppedHeaders are client headers not forwarded to plugins (size, format).
	droppedHeaders []dropped
	// withHeaders attaches HTTP headers to the plugin calls made with a ctx.
	withHeaders func(context.Context, http.Header) context.Context
	logBodies   bool
	logHeaders  []string // request headers for --log-bodies, sensitive ones redacted
	global      cpex.GlobalContext
	// caller is who is calling, when a configured source or an identity
	// plugin said (identity.go, httphooks.go); rules read it (rules.go).
	caller *identity.Identity
	// decision is what was decided about this request, for Envoy's
	// dynamic metadata (decision.go).
	decision decision
	// listers hide list items by the rules, per call method (rules.go).
	listers map[string]*rules.Lister
	// envoyMethod is the method Envoy's MCP filter read from the body, ""
	// when not known (mcpfilter.go).
	envoyMethod string
	// envoyContext is what Envoy sent beside the request headers: dynamic
	// metadata and attributes, read by resolveIdentity (identity.go);
	// metadata is its metadata_context, checked once read (envoyMetadata).
	// All are set during the request headers only.
	envoyContext *extprocv3.ProcessingRequest
	metadata     structwire.Metadata
	metadataRead bool
	// claims is the caller's JWT payload, once a rule has read it.
	claims *structpb.Struct
	// headerSets are the request headers http_pre_request set; httpRefusal
	// its refusal of a POST, answered at the body (httphooks.go).
	headerSets  map[string]string
	httpRefusal *refusal
	// httpContext is the plugin context the HTTP hooks left, copied into
	// each message's hooks (requestContext).
	httpContext *executor.RequestContext
	// msgContext is the plugin context the hooks of the message being
	// inspected share (permission, pre hook, delegate, then its post hook
	// and, for a body of one message, http_post_request); nil until one of
	// them runs.
	msgContext *executor.RequestContext
	// client is the downstream peer Envoy named, for the HTTP hooks'
	// client_host and client_port (client.go).
	client clientAddress
	// httpReq is the request as the HTTP hooks saw it, kept when
	// http_post_request will run on the response headers (httppost.go).
	httpReq   *httpRequest
	forwarded map[string]string // request headers forwarded to the pre hooks that carry headers

	// pending are the requests of this stream whose response a post hook
	// applies to, by raw JSON-RPC id.
	pending map[string]*pendingCall
	sse     *sse.Decoder // phaseResponseSSE

	// attr is the sidecar's memory of forwarded requests and tasks
	// (attribute.go); a store shared by replicas may write behind the
	// request (commitRecords). foreign: responses to requests of other streams are
	// looked up there (a GET stream; a POST stream whose response is
	// read). own: ids of this stream's requests, whose answers need no
	// lookup.
	attr     attribution.Store
	foreign  bool
	own      map[string]struct{}
	post     int8            // postConfigured's answer: 0 unknown, 1 no, 2 yes
	records  []requestRecord // to record once the server accepted them (commitRecords)
	recorded bool            // records were written: a replica may wait for them (syncRecords)
	accepted *attribution.Accepted

	// headers are the request headers of a POST whose body is read;
	// mcpHeaders the standard ones of MCP 2026-07-28 among them, taken
	// from headers on first use (headers.go).
	headers    *corev3.HeaderMap
	mcpHeaders []mcpheaders.Header
	mcpRead    bool
}

// pendingCall is a request waiting for its response.
type pendingCall struct {
	route  *hookfamily.Route
	target hookfamily.Target // the family's post hook runs on the result
	rc     *executor.RequestContext
	// hook: the post hook applies. A tools/call without it is pending only
	// to learn the task its answer may create.
	hook bool
	// unknown: the request that would name the target is not known (a
	// task of unknown origin, an unattributable response); the
	// unattributed_responses policy applies to a result.
	unknown bool
	// list: the request is a list whose result the rules filter
	// (rules.go); route is nil then.
	list *mcplist.List
}

func newStream(ctx context.Context, snap *Snapshot, opts *Options, c *canned, accepted *attribution.Accepted) *stream {
	return &stream{ctx: ctx, snap: snap, log: opts.Logger, obs: opts.Observer, canned: c, attr: opts.Attribution, accepted: accepted,
		withHeaders: opts.WithHeaders, logBodies: opts.LogBodies && opts.Logger.GetLevel() <= zerolog.DebugLevel}
}

// ensureContext fills in what only a plugin call or a log line needs: the
// request id (generated when the request has none or an oversized one), the
// plugin context metadata, the headers that follow the call into plugins
// (trace context validated and in canonical form, x-request-id), and the
// logger's fields. A request no plugin applies to never pays for it.
func (st *stream) ensureContext() {
	if st.contextReady {
		return
	}
	st.contextReady = true
	if id := headerBytes(st.raw.requestID); len(id) > MaxRequestIDBytes {
		st.dropHeader("x-request-id", len(id))
	} else if st.requestID == "" {
		st.requestID = string(id)
	}
	if st.requestID == "" {
		st.requestID = rand.Text()
	}
	st.log = st.log.With().Str("request_id", st.requestID).Str("mcp_session_id", logsafe.Cap(st.sessionID, logsafe.DefaultCap)).Logger()
	st.global.RequestID = st.requestID
	st.global.Metadata = map[string]any{"path": st.path, "authority": st.authority}
	if st.sessionID != "" {
		st.global.Metadata["mcp_session_id"] = st.sessionID
	}
	h := st.traceContext()
	if h == nil {
		h = make(http.Header, 1)
	}
	for k := range h {
		st.global.Metadata[strings.ToLower(k)] = h.Get(k)
	}
	h.Set("x-request-id", st.requestID)
	if st.withHeaders != nil {
		st.ctx = st.withHeaders(st.ctx, h)
	}
	st.logDropped()
}

// logger returns the stream's logger with the request fields set.
func (st *stream) logger() *zerolog.Logger {
	st.ensureContext()
	return &st.log
}

// anyHook reports whether any MCP hook, or a hook that runs per MCP
// message (http_auth_check_permission, token_delegate), has a plugin, or
// rules are configured.
func (st *stream) anyHook() bool {
	if st.snap.Rules.Len() > 0 || st.snap.Pins != nil {
		return true // rules and pinning read every request's body (rules.go, pinning.go)
	}
	if st.snap.Hooks.Applies(cpex.HTTPAuthCheckPermission) || st.snap.Hooks.Applies(cpex.TokenDelegate) {
		return true
	}
	for _, h := range cpex.MCPHooks { // the hooks of every family (hookfamily tests this)
		if st.snap.Hooks.Applies(h) {
			return true
		}
	}
	return st.listHooksNeedAnswer()
}

func internalError(st *stream, reason string) *extprocv3.ProcessingResponse {
	st.obs.Immediate("internal")
	return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, reason, nil), false, nil)
}

// redactHeader hides the value of credential headers in --log-bodies logs.
func redactHeader(k, v string) string {
	if config.IsCredentialHeader(k) {
		return "[redacted]"
	}
	return v
}

// headerBytes returns a header's value without copying it (Envoy sends
// raw_value; value only from older senders).
func headerBytes(hv *corev3.HeaderValue) []byte {
	if hv == nil {
		return nil
	}
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return raw
	}
	return []byte(hv.GetValue())
}

// findHeader returns the first header named name (lower case) in hm, or
// nil.
func findHeader(hm *corev3.HeaderMap, name string) *corev3.HeaderValue {
	for _, hv := range hm.GetHeaders() {
		if hv.GetKey() == name {
			return hv
		}
	}
	return nil
}

func headerValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return hv.GetValue()
}

// userJSON keeps a user header as a JSON string for the plugin context.
func userJSON(v string) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func forwardHeader(list []string, key string) bool {
	for _, h := range list {
		if h == key {
			return true
		}
	}
	return false
}

func joinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}
