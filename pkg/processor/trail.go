package processor

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// What was decided about a request is recorded for a security team twice:
// as audit events, one per decided MCP message (docs/audit.md), and as a
// server span in the OpenTelemetry MCP semantic conventions, whose
// children are the plugin calls (docs/tracing.md). Both exist only for a
// request a plugin, rule or pin reads: passthrough costs nothing here.
// The events are emitted when the stream ends, with the final decision of
// each message (a post hook may still block a call the pre hooks let
// through); the Auditor never blocks.

// Auditor takes audit events; *audit.Logger satisfies it. Emit must not
// block.
type Auditor interface {
	Emit(audit.Event) bool
}

// Attributes of the server span (OpenTelemetry MCP semantic conventions).
const (
	attrMCPMethod          = "mcp.method.name"
	attrMCPSession         = "mcp.session.id"
	attrMCPProtocolVersion = "mcp.protocol.version"
	attrJSONRPCRequestID   = "jsonrpc.request.id"
	attrToolName           = "gen_ai.tool.name"
	attrPromptName         = "gen_ai.prompt.name"
	attrResourceURI        = "mcp.resource.uri"
	attrDecision           = "mcp_extproc.decision"
	attrDecidedBy          = "mcp_extproc.decided_by"
)

// trail is the audit events and the span of one request.
type trail struct {
	x       *exchange
	auditor Auditor
	tracer  trace.Tracer
	// recording says that anything is recorded (an auditor or a tracer is
	// set). Without it nothing here is called: a message then has no
	// audit event (index -1) and the stream nothing to finish.
	recording bool
	span      trace.Span // nil until started
	named     bool       // the span is named after the body's first message
	start     time.Time
	// events are this request's decided messages, in body order.
	events []audit.Event
}

// begin starts the span (a child of the client's trace context, which
// ensureContext put on the context) and the clock. Called once, when the
// request's messages are first read or a plugin is first called.
func (t *trail) begin() {
	x := t.x
	t.start = time.Now()
	if t.tracer == nil {
		return
	}
	x.ctx, t.span = t.tracer.Start(x.ctx, "mcp", trace.WithSpanKind(trace.SpanKindServer))
	if s := x.req.sessionID; s != "" {
		t.span.SetAttributes(attribute.String(attrMCPSession, s))
	}
	if v := x.req.std.version; v != nil {
		t.span.SetAttributes(attribute.String(attrMCPProtocolVersion, headerValue(v)))
	}
}

// message opens the audit event of a request or notification of the body
// and names the span after the first; it returns the event's index, or -1
// when the message is not audited: only calls are (the methods hookfamily
// knows: tools/call, prompts/get, resources/read, tasks, subscriptions)
// and lists with extproc.audit.include.lists; any other message gets an
// event only when it is refused (refusedMessage).
func (t *trail) message(m *mcpmsg.Message, target string) int {
	t.name(m, target)
	if _, call := hookfamily.Operation(m.Method); !call || (audit.IsList(m.Method) && !t.x.snap.Settings.Audit.Include.Lists) {
		return -1
	}
	return t.open(m, target)
}

// name names the span after the body's first message (a batch's later
// messages, audited or not, leave it as it is).
func (t *trail) name(m *mcpmsg.Message, target string) {
	if t.span != nil && !t.named {
		t.named = true
		name := m.Method
		if target != "" {
			name += " " + target
		}
		t.span.SetName(name)
		t.span.SetAttributes(attribute.String(attrMCPMethod, m.Method))
		if m.ID != nil {
			t.span.SetAttributes(attribute.String(attrJSONRPCRequestID, string(m.ID)))
		}
		if target != "" {
			t.span.SetAttributes(attribute.String(targetAttribute(m.Method), target))
		}
	}
}

// open opens the audit event of message m; -1 without an auditor.
func (t *trail) open(m *mcpmsg.Message, target string) int {
	if t.auditor == nil {
		return -1
	}
	x := t.x
	e := audit.Event{
		Time: time.Now(), RequestID: x.req.requestID, SessionID: x.req.sessionID,
		Caller: auditCaller(x.caller.id, x.http.client), Server: x.pinScope(),
		Method: m.Method, Target: target, Phase: audit.PhaseRequest,
		Decision: audit.DecisionAllow, Mode: audit.ModeEnforce, Duration: time.Since(t.start),
	}
	if m.ID != nil {
		e.JSONRPCID = string(m.ID)
	}
	if len(m.Arguments) > 0 {
		e.ArgumentsHash = audit.Hash(m.Arguments)
	} else if len(m.Params) > 0 {
		e.ArgumentsHash = audit.Hash(m.Params)
	}
	if x.snap.Settings.Shadow {
		e.Mode = audit.ModeShadow
	}
	t.events = append(t.events, e)
	return len(t.events) - 1
}

// targetAttribute is the span attribute naming a method's target.
func targetAttribute(method string) string {
	switch method {
	case mcpmsg.MethodPromptsGet:
		return attrPromptName
	case "resources/read":
		return attrResourceURI
	}
	return attrToolName
}

// auditCaller is the caller as the audit event names it.
func auditCaller(id *identity.Identity, client clientAddress) audit.Caller {
	c := audit.Caller{Source: audit.SourceNone, Address: client.host}
	if id == nil {
		return c
	}
	c.Subject, c.Tenant, c.Verified = id.User, id.Tenant, id.Verified()
	c.Name = id.Email
	if c.Name == "" {
		c.Name = id.Name
	}
	switch id.Source {
	case identity.SourceJWT:
		c.Source = audit.SourceJWTMetadata
	case identity.SourcePeer:
		c.Source = audit.SourcePeerCertificate
	case identity.SourceHeaders:
		c.Source = audit.SourceHeaders
	case identity.SourcePlugin:
		c.Source = audit.SourceResolveHook
	}
	return c
}

// invoked returns what records, on event i, each plugin invocation's
// verdict and latency (executor.RequestContext.OnInvoke).
func (t *trail) invoked(i int) func(plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
	return func(plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
		if i < 0 || i >= len(t.events) {
			return
		}
		e := &t.events[i]
		e.Plugins = append(e.Plugins, audit.PluginVerdict{Plugin: plugin, Hook: string(hook), Verdict: auditVerdict(v), Duration: d})
		e.Duration = time.Since(t.start)
	}
}

// modifier is the last plugin whose verdict was modify, "" for none.
func modifier(plugins []audit.PluginVerdict) string {
	for i := len(plugins) - 1; i >= 0; i-- {
		if plugins[i].Verdict == "modify" {
			return plugins[i].Plugin
		}
	}
	return ""
}

// auditVerdict is an executor verdict as the audit event names it.
func auditVerdict(v executor.Verdict) string {
	switch v {
	case executor.Allowed:
		return "allow"
	case executor.Modified:
		return "modify"
	case executor.Blocked, executor.Stopped:
		return "deny"
	case executor.ViolationNotEnforced:
		return "would_deny"
	}
	return "error" // errored, timed out, down, invalid, dropped
}

// rule records on event i, and on the span, that a rule matched: it
// denied, or, in shadow, would have.
func (t *trail) rule(i int, name string, shadow bool) {
	mode := audit.ModeEnforce
	if shadow {
		mode = audit.ModeShadow
	}
	if t.span != nil {
		t.span.AddEvent("mcp_extproc.rule", trace.WithAttributes(attribute.String("mcp_extproc.rule", name),
			attribute.String("mcp_extproc.rule.mode", string(mode))))
	}
	if i >= 0 && i < len(t.events) {
		e := &t.events[i]
		e.Rules = append(e.Rules, audit.RuleEvaluation{Name: name, Outcome: "match", Mode: mode})
	}
}

// refused records on event i that r refused the message, or, shadowed,
// would have.
func (t *trail) refused(i int, r *refusal, shadowed bool, phase audit.Phase) {
	if t.span != nil && !shadowed {
		t.span.SetStatus(codes.Error, "refused")
		t.span.SetAttributes(attribute.String(attrDecision, "deny"), attribute.String(attrDecidedBy, r.byKind+":"+r.by))
	}
	if i < 0 || i >= len(t.events) {
		return
	}
	e := &t.events[i]
	d := audit.DecisionDeny
	if shadowed {
		d = audit.DecisionWouldDeny
		if e.Decision == audit.DecisionDeny {
			return
		}
	}
	e.Decision, e.Phase, e.Duration = d, phase, time.Since(t.start)
	e.DecidedBy = audit.DecidedBy{Kind: auditKind(r.byKind), Name: r.by}
	e.Violation = audit.Violation{Code: r.violation, Reason: r.message}
	if !shadowed {
		e.ErrorCode = r.code
	}
	if r.reason == "plugin_error" {
		e.Error = r.message
	}
}

// changed records on event i that by changed the message, or, shadowed,
// would have.
func (t *trail) changed(i int, byKind, by string, shadowed bool, phase audit.Phase) {
	if i < 0 || i >= len(t.events) {
		return
	}
	e := &t.events[i]
	switch {
	case e.Decision == audit.DecisionDeny:
		return
	case shadowed && e.Decision != audit.DecisionAllow:
		return // a would_deny stays
	case shadowed:
		e.Decision = audit.DecisionWouldModify
	default:
		e.Decision = audit.DecisionModify
	}
	e.Phase, e.Duration = phase, time.Since(t.start)
	if e.DecidedBy.Name == "" {
		if by == "" && byKind == byPlugin {
			by = modifier(e.Plugins)
		}
		e.DecidedBy = audit.DecidedBy{Kind: auditKind(byKind), Name: by}
	}
}

// result records the hash of a result on event i.
func (t *trail) result(i int, result []byte) {
	if i >= 0 && i < len(t.events) && len(result) > 0 {
		t.events[i].ResultHash = audit.Hash(result)
	}
}

// auditKind is the audit name of who decided.
func auditKind(byKind string) string {
	switch byKind {
	case byPlugin:
		return audit.KindPlugin
	case byRule:
		return audit.KindRule
	}
	return audit.KindExtproc
}

// finish emits the events and ends the span; called once when the stream
// ends.
func (t *trail) finish() {
	var traceID, spanID string
	if t.span != nil {
		sc := t.span.SpanContext()
		if sc.IsValid() {
			traceID, spanID = sc.TraceID().String(), sc.SpanID().String()
		}
		t.span.End()
		t.span = nil
	}
	for i := range t.events {
		e := &t.events[i]
		e.TraceID, e.SpanID = traceID, spanID
		t.auditor.Emit(*e)
	}
	t.events = nil
}
