package processor

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
)

// Replies are built here so the rules of the ext_proc contract live in one
// file: header values in raw_value only (docs/extproc-contract.md §5),
// content-length set in the same reply as a buffered body mutation (§4),
// both body modes explicit in every mode_override (§3.1). What goes with
// a reply is here too: the buffer an edited body is built in
// (bodyLender) and the decision Envoy gets as dynamic metadata
// (decision.attach).

func requestHeadersReply(override *filterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response:     &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
		ModeOverride: override,
	}
}

func responseHeadersReply(override *filterv3.ProcessingMode, mutation *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	hr := &extprocv3.HeadersResponse{}
	if mutation != nil {
		hr.Response = &extprocv3.CommonResponse{HeaderMutation: mutation}
	}
	return &extprocv3.ProcessingResponse{
		Response:     &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr},
		ModeOverride: override,
	}
}

// bodyReply answers a body message. A nil body leaves the chunk untouched; a
// non-nil body replaces it. setLength adds content-length for BUFFERED mode
// (in STREAMED mode Envoy ignores header mutations of body replies).
func bodyReply(response bool, body []byte, setLength bool) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{}
	if body != nil {
		cr := &extprocv3.CommonResponse{}
		if len(body) == 0 {
			cr.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}
		} else {
			cr.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
		}
		if setLength {
			cr.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				header("content-length", strconv.Itoa(len(body))),
			}}
		}
		br.Response = cr
	}
	if response {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
}

func trailersReply(response bool) *extprocv3.ProcessingResponse {
	if response {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
}

// jsonRPCReply ends the exchange with an HTTP answer carrying a JSON-RPC body.
// denied marks answers caused by a plugin (x-mcp-denied: true).
func jsonRPCReply(status int, body []byte, denied bool, extra map[string]string) *extprocv3.ProcessingResponse {
	set := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if denied {
		set = append(set, header("x-mcp-denied", "true"))
	}
	for k, v := range extra {
		set = append(set, header(k, v))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    body,
			Details: "mcp_extproc_refused",
		},
	}}
}

func header(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		Append: wrapperspb.Bool(false),
	}
}

// Processing modes chosen by mode_override. Body modes are always both set
// (docs/extproc-contract.md §3.1: both are taken literally). Each call returns a new message so
// no proto is shared between streams.

// modeSkipAll: no body in either direction and no response headers message, so
// traffic no hook can apply to costs one round trip.
func modeSkipAll() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		ResponseHeaderMode: filterv3.ProcessingMode_SKIP,
		RequestBodyMode:    filterv3.ProcessingMode_NONE,
		ResponseBodyMode:   filterv3.ProcessingMode_NONE,
	}
}

// modeInspectRequest reads the whole request body, then the response headers.
func modeInspectRequest() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: filterv3.ProcessingMode_NONE,
	}
}

// modeInspectRequestOnly reads the whole request body and skips the response
// headers: no post hook can apply to the answer. If Envoy ignored the
// override (allow_mode_override false), it ignores this SKIP too and sends
// the response headers, where the processor sees that the request body never
// came and refuses (the filter's own response_header_mode must stay SEND,
// the default, for that check to run).
func modeInspectRequestOnly() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		ResponseHeaderMode: filterv3.ProcessingMode_SKIP,
		RequestBodyMode:    filterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:   filterv3.ProcessingMode_NONE,
	}
}

// modeResponseStreamed streams the response body chunk by chunk and asks for
// the response trailers: when trailers follow, no body chunk carries
// end_of_stream (docs/extproc-contract.md §1) and the trailers message is the
// only end of the body the processor sees.
func modeResponseStreamed() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:     filterv3.ProcessingMode_NONE,
		ResponseBodyMode:    filterv3.ProcessingMode_STREAMED,
		ResponseTrailerMode: filterv3.ProcessingMode_SEND,
	}
}

// modeResponse sets the response body mode at response-headers time.
func modeResponse(body filterv3.ProcessingMode_BodySendMode) *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:  filterv3.ProcessingMode_NONE,
		ResponseBodyMode: body,
	}
}

// forPlan is the request-headers reply that asks Envoy for what plan p
// needs: shared, never changed.
func (c *canned) forPlan(p plan) *extprocv3.ProcessingResponse {
	switch {
	case p.body && p.readAnswer:
		return c.inspectRequest
	case p.body && p.answer:
		return c.inspectRequestHeaders
	case p.body:
		return c.inspectRequestOnly
	case p.readAnswer:
		return c.readResponse
	case p.answer:
		return c.answerHeaders
	}
	return c.skipAll
}

// canned holds the replies that do not depend on the stream, built once per
// Server and shared by all streams (messages are only read after they are
// built, so concurrent marshalling is safe): passthrough traffic allocates
// no reply of its own.
type canned struct {
	skipAll, inspectRequest *extprocv3.ProcessingResponse
	readResponse            *extprocv3.ProcessingResponse // no bodies now, the response headers decide
	inspectRequestOnly      *extprocv3.ProcessingResponse
	// inspectRequestHeaders and answerHeaders ask for the response
	// headers of an answer that is not read (http_post_request).
	inspectRequestHeaders, answerHeaders *extprocv3.ProcessingResponse
	responseNone, responseBuffered       *extprocv3.ProcessingResponse
	responseStreamed                     *extprocv3.ProcessingResponse
	requestBodyAsIs, responseBodyAsIs    *extprocv3.ProcessingResponse
	requestTrailers, responseTrailers    *extprocv3.ProcessingResponse
}

// readsAnswer is the request-headers reply of a request whose answer may
// be read: Accept-Encoding is removed, so that the server answers
// uncompressed and the post hooks and the rules read what the client will
// (an answer that still comes encoded is decoded or refused: answer.go).
func readsAnswer(override *filterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	resp := requestHeadersReply(override)
	resp.GetRequestHeaders().Response = &extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"accept-encoding"}},
	}
	return resp
}

// decodedBodyReply replaces a buffered response body that came
// content-encoded with body, which is not: the encoding header goes.
func decodedBodyReply(body []byte) *extprocv3.ProcessingResponse {
	resp := bodyReply(true, body, true)
	cr := resp.GetResponseBody().GetResponse()
	cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, "content-encoding")
	return resp
}

func newCanned() *canned {
	return &canned{
		skipAll:            requestHeadersReply(modeSkipAll()),
		inspectRequest:     readsAnswer(modeInspectRequest()),
		readResponse:       readsAnswer(modeResponse(filterv3.ProcessingMode_NONE)),
		inspectRequestOnly: requestHeadersReply(modeInspectRequestOnly()),
		inspectRequestHeaders: requestHeadersReply(&filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SEND,
			RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_NONE}),
		answerHeaders: requestHeadersReply(&filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SEND,
			RequestBodyMode: filterv3.ProcessingMode_NONE, ResponseBodyMode: filterv3.ProcessingMode_NONE}),
		// Envoy decided about content-length under the old mode; a
		// rewritten stream changes the length, so it goes (§4).
		responseStreamed: responseHeadersReply(modeResponseStreamed(),
			&extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}),
		responseNone:     responseHeadersReply(modeResponse(filterv3.ProcessingMode_NONE), nil),
		responseBuffered: responseHeadersReply(modeResponse(filterv3.ProcessingMode_BUFFERED), nil),
		requestBodyAsIs:  bodyReply(false, nil, false),
		responseBodyAsIs: bodyReply(true, nil, false),
		requestTrailers:  trailersReply(false),
		responseTrailers: trailersReply(true),
	}
}

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

// What the sidecar decided about a request goes to Envoy as dynamic
// metadata in the namespace MetadataNamespace, so that the filters after
// ext_proc (RBAC, rate limits) and the access log can read which tool was
// called and what the plugins and rules made of it. Envoy keeps it only
// when the ext_proc filter lists the namespace in
// metadata_options.receiving_namespaces.untyped, and merges each write into
// what the namespace holds: the request body's reply writes the decision,
// and a later reply writes it again, raised, when it changed (a post hook
// that blocked or modified the result, a list the rules filtered).
//
// A request whose body is not read (passthrough) has no decision and costs
// nothing here. In a batch, the decision is about the first refused
// message, else the first request.

// MetadataNamespace is the dynamic metadata namespace of the decisions.
const MetadataNamespace = "mcp_extproc"

// Outcomes of a decision, in the order a later phase may raise them.
const (
	decisionAllowed  = "allowed"
	decisionModified = "modified"
	decisionBlocked  = "blocked"
)

// Who decided: a plugin, a rule, or tool pinning.
const (
	byPlugin = "plugin"
	byRule   = "rule"
	byPin    = "pin"
)

func decisionRank(outcome string) int {
	switch outcome {
	case decisionAllowed:
		return 1
	case decisionModified:
		return 2
	case decisionBlocked:
		return 3
	}
	return 0
}

// decision is what was decided about one request, and the reply that
// carries it.
type decision struct {
	decisionValues
	dirty bool // changed since it was last sent
	// sent reports that a reply carrying the decision went out. The first
	// such reply is built in reply and buf, so that writing the decision
	// costs no allocation; a later one (a raised outcome) is allocated, as
	// the first may still be read by whoever received it.
	sent  bool
	reply extprocv3.ProcessingResponse
	buf   [decisionBufSize]byte
}

// decisionValues are the fields of a decision Envoy is sent.
type decisionValues struct {
	method, name string
	outcome      string // "" before the body is read
	by, byKind   string // the plugin's or rule's name, and which of the two
	code         string // the violation's code, when blocked by a plugin
	user, tenant string
}

// decisionBufSize holds a decision with a tool name, a user and a tenant
// of a few dozen bytes each; a longer one is allocated.
const decisionBufSize = 256

// raise sets the outcome unless a stronger one is already known.
func (d *decision) raise(outcome, by, byKind, code string) {
	if decisionRank(outcome) <= decisionRank(d.outcome) {
		return
	}
	d.outcome, d.by, d.byKind, d.code, d.dirty = outcome, by, byKind, code, true
}

// fields calls f with each of the decision's set fields, by the name
// Envoy's access log and filters read it under.
func (d *decisionValues) fields(f func(k, v string)) {
	for _, kv := range [...][2]string{
		{"method", d.method},
		{"name", d.name},
		{"decision", d.outcome},
		{"decided_by", d.by},
		{"decided_by_type", d.byKind},
		{"violation_code", d.code},
		{"user", d.user},
		{"tenant", d.tenant},
	} {
		if kv[1] != "" {
			f(kv[0], kv[1])
		}
	}
}

// metadata returns the decision as the namespace's Struct (what
// appendMetadata encodes, for tests).
func (d *decisionValues) metadata() *structpb.Struct {
	f := make(map[string]*structpb.Value, 8)
	d.fields(func(k, v string) { f[k] = structpb.NewStringValue(v) })
	return &structpb.Struct{Fields: f}
}

// set records the decision of the request body about method and its
// target name, for caller (nil when none is known).
func (d *decision) set(method, name string, caller *identity.Identity, outcome, by, byKind, code string) {
	d.method, d.name = method, name
	if caller != nil {
		d.user, d.tenant = caller.User, caller.Tenant
	}
	d.raise(outcome, by, byKind, code)
}

// attach returns resp carrying the decision when it changed since it
// was last sent. The reply may be a shared canned one: it is copied, never
// changed.
//
// The decision goes out encoded: appendMetadata writes the reply's
// dynamic_metadata field (a Struct holding the namespace's Struct) with
// protowire into the copy's unknown fields, which proto.Marshal sends as
// they are and any receiver decodes as dynamic_metadata. Built as
// structpb values, it cost 13 allocations per request and a map walk in
// gRPC's marshalling of every reply (docs/benchmarks.md, "What the
// passthrough regression was"); this costs none while the decision fits
// decisionBufSize.
func (d *decision) attach(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if !d.dirty || resp == nil {
		return resp
	}
	d.dirty = false
	out, buf := &d.reply, d.buf[:0]
	if d.sent {
		out, buf = new(extprocv3.ProcessingResponse), nil
	}
	d.sent = true
	copyReply(out, resp)
	buf = append(buf, resp.ProtoReflect().GetUnknown()...)
	out.ProtoReflect().SetUnknown(appendMetadata(buf, &d.decisionValues))
	return out
}

// fieldDynamicMetadata is the field number of
// envoy.service.ext_proc.v3.ProcessingResponse.dynamic_metadata.
const fieldDynamicMetadata protowire.Number = 8

// Field numbers of google.protobuf.Struct, its map entries and Value.
const (
	fieldStructFields protowire.Number = 1
	fieldEntryKey     protowire.Number = 1
	fieldEntryValue   protowire.Number = 2
	fieldValueString  protowire.Number = 3
	fieldValueStruct  protowire.Number = 5
)

// appendMetadata appends to b the dynamic_metadata field of a
// ProcessingResponse holding the decision d in MetadataNamespace: what
// proto.Marshal makes of {MetadataNamespace: d.metadata()}, its map
// entries in a fixed order. A value that is not valid UTF-8 (a header's
// bytes) has its bad bytes replaced, as a proto3 string must be UTF-8.
func appendMetadata(b []byte, d *decisionValues) []byte {
	inner := 0
	d.fields(func(k, v string) { inner += entrySize(k, stringValueSize(v)) })
	nsValue := protowire.SizeTag(fieldValueStruct) + protowire.SizeBytes(inner)
	b = protowire.AppendTag(b, fieldDynamicMetadata, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entrySize(MetadataNamespace, nsValue)))
	b = appendEntryHead(b, MetadataNamespace, nsValue)
	b = protowire.AppendTag(b, fieldValueStruct, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	d.fields(func(k, v string) {
		v = validUTF8(v)
		b = appendEntryHead(b, k, stringValueSize(v))
		b = protowire.AppendTag(b, fieldValueString, protowire.BytesType)
		b = protowire.AppendString(b, v)
	})
	return b
}

// entrySize is the size of a Struct's map entry, tag included, whose
// Value is valueSize bytes long.
func entrySize(key string, valueSize int) int {
	n := protowire.SizeTag(fieldEntryKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldEntryValue) + protowire.SizeBytes(valueSize)
	return protowire.SizeTag(fieldStructFields) + protowire.SizeBytes(n)
}

// appendEntryHead appends a Struct's map entry up to its Value's content.
func appendEntryHead(b []byte, key string, valueSize int) []byte {
	n := protowire.SizeTag(fieldEntryKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldEntryValue) + protowire.SizeBytes(valueSize)
	b = protowire.AppendTag(b, fieldStructFields, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, fieldEntryKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, fieldEntryValue, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(valueSize))
}

// stringValueSize is the size of a Value holding the string v.
func stringValueSize(v string) int {
	return protowire.SizeTag(fieldValueString) + protowire.SizeBytes(len(validUTF8(v)))
}

// validUTF8 returns s with its invalid bytes replaced by U+FFFD, s itself
// (no allocation) when it is valid.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// shallowCopy returns a ProcessingResponse holding every field of resp
// (sharing its messages).
func shallowCopy(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	out := new(extprocv3.ProcessingResponse)
	copyReply(out, resp)
	return out
}

// copyReply sets every field of dst to resp's (sharing its messages), and
// its unknown fields to resp's. Listed by hand, as reflection would cost
// two allocations per request; TestShallowCopy fails when Envoy's API adds
// a field this does not copy.
func copyReply(dst, resp *extprocv3.ProcessingResponse) {
	dst.Response = resp.Response
	dst.DynamicMetadata = resp.DynamicMetadata
	dst.TypedDynamicMetadata = resp.TypedDynamicMetadata
	dst.ModeOverride = resp.ModeOverride
	dst.RequestDrain = resp.RequestDrain
	dst.RequestDrainRequests = resp.RequestDrainRequests
	dst.RequestDrainResponses = resp.RequestDrainResponses
	dst.OverrideMessageTimeout = resp.OverrideMessageTimeout
	dst.ServerWindowUpdate = resp.ServerWindowUpdate
	dst.ProtoReflect().SetUnknown(resp.ProtoReflect().GetUnknown())
}
