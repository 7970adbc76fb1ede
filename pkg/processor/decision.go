package processor

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
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

// Who decided: a plugin or a rule.
const (
	byPlugin = "plugin"
	byRule   = "rule"
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

// decision is what was decided about one request.
type decision struct {
	method, name string
	outcome      string // "" before the body is read
	by, byKind   string // the plugin's or rule's name, and which of the two
	code         string // the violation's code, when blocked by a plugin
	user, tenant string
	dirty        bool // changed since it was last sent
}

// raise sets the outcome unless a stronger one is already known.
func (d *decision) raise(outcome, by, byKind, code string) {
	if decisionRank(outcome) <= decisionRank(d.outcome) {
		return
	}
	d.outcome, d.by, d.byKind, d.code, d.dirty = outcome, by, byKind, code, true
}

// metadata returns the decision as the namespace's Struct.
func (d *decision) metadata() *structpb.Struct {
	f := make(map[string]*structpb.Value, 8)
	add := func(k, v string) {
		if v != "" {
			f[k] = structpb.NewStringValue(v)
		}
	}
	add("method", d.method)
	add("name", d.name)
	add("decision", d.outcome)
	add("decided_by", d.by)
	add("decided_by_type", d.byKind)
	add("violation_code", d.code)
	add("user", d.user)
	add("tenant", d.tenant)
	return &structpb.Struct{Fields: f}
}

// decide records the decision of the request body.
func (st *stream) decide(method, name, outcome, by, byKind, code string) {
	d := &st.decision
	d.method, d.name = method, name
	if st.caller != nil {
		d.user, d.tenant = st.caller.User, st.caller.Tenant
	}
	d.raise(outcome, by, byKind, code)
}

// withDecision returns resp carrying the decision when it changed since it
// was last sent. The reply may be a shared canned one: it is wrapped, never
// changed.
func (st *stream) withDecision(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if !st.decision.dirty || resp == nil {
		return resp
	}
	st.decision.dirty = false
	out := shallowCopy(resp)
	out.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(st.decision.metadata()),
	}}
	return out
}

// shallowCopy returns a ProcessingResponse holding every field of resp
// (sharing its messages). Listed by hand, as reflection would cost two
// allocations per request; TestShallowCopy fails when Envoy's API adds a
// field this does not copy.
func shallowCopy(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response:               resp.Response,
		DynamicMetadata:        resp.DynamicMetadata,
		TypedDynamicMetadata:   resp.TypedDynamicMetadata,
		ModeOverride:           resp.ModeOverride,
		RequestDrain:           resp.RequestDrain,
		RequestDrainRequests:   resp.RequestDrainRequests,
		RequestDrainResponses:  resp.RequestDrainResponses,
		OverrideMessageTimeout: resp.OverrideMessageTimeout,
		ServerWindowUpdate:     resp.ServerWindowUpdate,
	}
}

// decideBody records the decision about a request body: the first refused
// message, else the first request (or notification), modified when a pre
// hook or a delegation changed the request.
func (st *stream) decideBody(msgs *mcpmsg.Body, ed *requestEdits) {
	if len(ed.refusals) > 0 {
		r := ed.refusals[0]
		m := &msgs.Messages[r.index]
		name, _ := ruleTarget(m)
		st.decide(m.Method, name, decisionBlocked, r.by, r.byKind, r.violation)
		return
	}
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
			continue
		}
		outcome := decisionAllowed
		if ed.replaced != nil || ed.headers != nil || ed.remove != nil || ed.delegated {
			outcome = decisionModified
		}
		name, _ := ruleTarget(m)
		st.decide(m.Method, name, outcome, "", "", "")
		return
	}
}
