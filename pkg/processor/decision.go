package processor

import (
	"strings"
	"unicode/utf8"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
)

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
