package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Decision is what the sidecar did, or in shadow mode would have done, with
// a message.
type Decision string

// The decisions. The "would_" ones are shadow decisions: a plugin or rule
// in shadow mode wanted to deny or change the message and was not let to.
const (
	DecisionAllow       Decision = "allow"
	DecisionDeny        Decision = "deny"
	DecisionModify      Decision = "modify"
	DecisionWouldDeny   Decision = "would_deny"
	DecisionWouldModify Decision = "would_modify"
)

// Mode says whether a decision was enforced.
type Mode string

// The modes.
const (
	// ModeEnforce: the decision took effect.
	ModeEnforce Mode = "enforce"
	// ModeShadow: every plugin and rule decided, nothing was blocked or
	// changed; the decision says what would have happened.
	ModeShadow Mode = "shadow"
)

// Phase is which message of an exchange was decided on.
type Phase string

// The phases.
const (
	PhaseRequest  Phase = "request"  // the client's message, before the server
	PhaseResponse Phase = "response" // the server's answer, before the client
)

// The values of [Caller.Source]: which identity source named the caller.
// The first three are the kinds of extproc.identity.sources.
const (
	SourceJWTMetadata     = "jwt_metadata"     // a JWT payload jwt_authn verified
	SourcePeerCertificate = "peer_certificate" // the mTLS peer's certificate
	SourceHeaders         = "headers"          // request headers Envoy set
	SourceResolveHook     = "resolve_hook"     // a plugin's http_auth_resolve_user hook
	SourceNone            = "none"             // nobody was identified
)

// The values of [DecidedBy.Kind].
const (
	KindPlugin  = "plugin"  // a plugin's hook returned the decision
	KindRule    = "rule"    // a rule of extproc.rules matched
	KindBuiltin = "builtin" // a built-in plugin of the sidecar
	KindExtproc = "extproc" // the sidecar itself: a bound, a parse error, fail-closed
)

// Event is one decided MCP message: the audit record. The processor fills
// one per decision; the zero value of a field means "not known" or "not
// applicable" and is left out of the encodings.
//
// Fields that come from the client (ids, method, target) are recorded as
// received; the encoders cut any over logsafe.DefaultCap bytes, visibly.
//
// An Event handed to [Logger.Emit] is encoded later, on the Logger's
// goroutine: the caller must not change the slices it refers to (Plugins,
// Rules, Content) after Emit.
type Event struct {
	// Time is when the decision was made.
	Time time.Time `json:"time"`
	// RequestID is Envoy's x-request-id of the HTTP exchange, to join with
	// Envoy's access log and traces.
	RequestID string `json:"request_id,omitempty"`
	// JSONRPCID is the message's JSON-RPC id: a string id as is, a number
	// in its JSON text ("7"); empty for a notification.
	JSONRPCID string `json:"jsonrpc_id,omitempty"`
	// SessionID is the MCP session (Mcp-Session-Id), if any.
	SessionID string `json:"session_id,omitempty"`
	// TraceID and SpanID are the W3C trace context (lower-case hex) of the
	// sidecar's span for the exchange, if traced.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Caller is who sent the message, as the identity sources resolved it.
	Caller Caller `json:"caller"`
	// Server names the MCP server the message is for (the upstream, or the
	// request's :authority), if known.
	Server string `json:"server,omitempty"`
	// Method is the JSON-RPC method ("tools/call", "resources/read"...).
	Method string `json:"method"`
	// Target is what the method acts on: the tool name of tools/call, the
	// prompt of prompts/get, the URI of resources/read. Empty otherwise.
	Target string `json:"target,omitempty"`
	// Phase is whether the request or the response was decided on.
	Phase Phase `json:"phase,omitempty"`
	// Decision is what was done (or, shadowed, would have been done).
	Decision Decision `json:"decision"`
	// Mode is ModeEnforce or ModeShadow.
	Mode Mode `json:"mode"`
	// DecidedBy is the plugin, rule or check whose verdict became the
	// decision; zero when nothing objected (an allow).
	DecidedBy DecidedBy `json:"decided_by,omitzero"`
	// Violation is the code and reason of a deny (or would-deny).
	Violation Violation `json:"violation,omitzero"`
	// Error is what went wrong while deciding (a plugin timed out or was
	// unreachable), if anything: the decision is then the configured
	// failure mode's (fail open: allow; fail closed: deny).
	Error string `json:"error,omitempty"`
	// ErrorCode is the JSON-RPC error code sent to the client in place of
	// the server's answer when the message was denied; 0 otherwise.
	ErrorCode int `json:"error_code,omitempty"`
	// Plugins is each plugin hook that ran, in order, with its verdict and
	// how long it took.
	Plugins []PluginVerdict `json:"plugins,omitempty"`
	// Rules is each rule evaluated, in order, with its outcome.
	Rules []RuleEvaluation `json:"rules,omitempty"`
	// Duration is how long deciding took, from the message's arrival at
	// the sidecar to the decision (plugins and rules included).
	Duration time.Duration `json:"duration_ns,omitempty"`
	// ArgumentsHash is [Hash] of the request's params.arguments (or the
	// params, for methods without arguments) as received, before any
	// plugin changed them.
	ArgumentsHash string `json:"arguments_hash,omitempty"`
	// ResultHash is [Hash] of the response's result as received from the
	// server, before any plugin changed it.
	ResultHash string `json:"result_hash,omitempty"`
	// Content is the message content, redacted. It is filled only when
	// the deployment opts in (extproc.audit.include.content), and the
	// redaction is the caller's: this package writes it as given.
	Content *Content `json:"content,omitempty"`
}

// Caller is who sent a message.
type Caller struct {
	// Subject is the user's id: a JWT sub, a SPIFFE id, a header's value.
	Subject string `json:"subject,omitempty"`
	// Name is a display name or e-mail, if the source gave one.
	Name string `json:"name,omitempty"`
	// Tenant is the caller's tenant or organisation, if any.
	Tenant string `json:"tenant,omitempty"`
	// Source is which identity source named the caller: one of the
	// Source* constants, SourceNone when nobody was identified.
	Source string `json:"source"`
	// Verified reports whether the identity comes from what Envoy
	// verified (a JWT, the mTLS peer) rather than headers or a plugin.
	Verified bool `json:"verified"`
	// Address is the client's address as Envoy saw it (source.address):
	// "ip" or "ip:port".
	Address string `json:"address,omitempty"`
}

// DecidedBy names what made a decision.
type DecidedBy struct {
	// Kind is one of KindPlugin, KindRule, KindBuiltin, KindExtproc.
	Kind string `json:"kind"`
	// Name is the plugin's or rule's name as configured, or the check's
	// ("bounds", "parse", "fail_closed") for KindExtproc.
	Name string `json:"name"`
}

// Violation is why a message was denied.
type Violation struct {
	// Code is the violation's machine-readable code (a plugin's
	// violation.code, a rule's code).
	Code string `json:"code,omitempty"`
	// Reason is the human-readable reason.
	Reason string `json:"reason,omitempty"`
}

// PluginVerdict is what one plugin hook said.
type PluginVerdict struct {
	// Plugin is the plugin's configured name.
	Plugin string `json:"plugin"`
	// Hook is the hook that ran ("tool_pre_invoke", ...).
	Hook string `json:"hook"`
	// Verdict is "allow", "deny", "modify" or "error" ("would_deny",
	// "would_modify" for a plugin in shadow or cpex audit mode).
	Verdict string `json:"verdict"`
	// Duration is how long the call took, transport included.
	Duration time.Duration `json:"duration_ns"`
}

// RuleEvaluation is the outcome of one rule.
type RuleEvaluation struct {
	// Name is the rule's name.
	Name string `json:"name"`
	// Outcome is "match" or "no_match" ("error" when it could not be
	// evaluated); a matching rule's effect is the Event's decision when
	// DecidedBy names it.
	Outcome string `json:"outcome"`
	// Mode is the rule's mode, ModeShadow for a shadow rule; empty means
	// enforced.
	Mode Mode `json:"mode,omitempty"`
}

// Content is a message's content, already redacted by the caller. Each
// field holds JSON as the caller encoded it.
type Content struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// HashPrefix starts every hash this package makes.
const HashPrefix = "sha256:"

// Hash returns "sha256:" and the lower-case hex SHA-256 of b: how an Event
// records arguments and results without their content. Hash the bytes as
// received, so a reader holding the same bytes (a server's log, a replay)
// can match them.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	var out [len(HashPrefix) + 2*sha256.Size]byte
	copy(out[:], HashPrefix)
	hex.Encode(out[len(HashPrefix):], sum[:])
	return string(out[:])
}

// IsList reports whether method is one of MCP's list methods (tools/list,
// prompts/list, resources/list, resources/templates/list), which callers
// audit only when configured to (extproc.audit.include.lists).
func IsList(method string) bool {
	return strings.HasSuffix(method, "/list")
}
