package audit

import (
	"cmp"
	"net/netip"
	"strings"
	"time"
)

// The OCSF class the FormatOCSF encoding produces.
const (
	// OCSFVersion is the OCSF schema release the mapping follows
	// (metadata.version).
	OCSFVersion = "1.8.0"
	// OCSFClassUID is API Activity; OCSFCategoryUID is Application
	// Activity. type_uid is OCSFClassUID*100 + activity_id.
	OCSFClassUID    = 6003
	OCSFCategoryUID = 6
)

// The activity_id values of API Activity.
const (
	activityUnknown = 0
	activityCreate  = 1
	activityRead    = 2
	activityUpdate  = 3
	activityDelete  = 4
	activityOther   = 99
)

// activityCaption is the schema's caption of activity_id a.
func activityCaption(a int) string {
	switch a {
	case activityCreate:
		return "Create"
	case activityRead:
		return "Read"
	case activityUpdate:
		return "Update"
	case activityDelete:
		return "Delete"
	case activityOther:
		return "Other"
	}
	return "Unknown"
}

// ocsfActivity maps an MCP method to API Activity's activity_id: what the
// method does to the server's state, where the method says. tools/call
// is Other: a tool may read, create, change or delete, and only the tool
// knows which. Methods not listed (ping, notifications, extensions) are
// Other too; activity_name then carries the method.
func ocsfActivity(method string) int {
	switch method {
	case "":
		return activityUnknown
	case "initialize", "resources/subscribe":
		return activityCreate // a session, a subscription
	case "tools/list", "prompts/list", "prompts/get", "resources/list",
		"resources/templates/list", "resources/read", "completion/complete", "roots/list":
		return activityRead
	case "logging/setLevel":
		return activityUpdate
	case "resources/unsubscribe":
		return activityDelete
	}
	return activityOther
}

// The severity_id values used.
const (
	severityUnknown       = 0
	severityInformational = 1
	severityLow           = 2
	severityMedium        = 3
	severityHigh          = 4
)

// severityCaption is the schema's caption of severity_id s.
func severityCaption(s int) string {
	switch s {
	case severityInformational:
		return "Informational"
	case severityLow:
		return "Low"
	case severityMedium:
		return "Medium"
	case severityHigh:
		return "High"
	}
	return "Unknown"
}

// The status_id values.
const (
	statusUnknown = 0
	statusSuccess = 1
	statusFailure = 2
)

// statusCaption is the schema's caption of status_id s.
func statusCaption(s int) string {
	switch s {
	case statusSuccess:
		return "Success"
	case statusFailure:
		return "Failure"
	}
	return "Unknown"
}

// control is the security_control profile's view of a decision.
type control struct {
	actionID      int
	action        string
	dispositionID int
	disposition   string
	severityID    int
	statusID      int
}

// ocsfControl maps a decision. Shadow decisions are Observed and Detected:
// the message went through, the control saw what it would have done.
func ocsfControl(d Decision) control {
	switch d {
	case DecisionAllow:
		return control{1, "Allowed", 1, "Allowed", severityInformational, statusSuccess}
	case DecisionDeny:
		return control{2, "Denied", 2, "Blocked", severityMedium, statusFailure}
	case DecisionModify:
		return control{4, "Modified", 11, "Corrected", severityLow, statusSuccess}
	case DecisionWouldDeny:
		return control{3, "Observed", 15, "Detected", severityMedium, statusSuccess}
	case DecisionWouldModify:
		return control{3, "Observed", 15, "Detected", severityLow, statusSuccess}
	}
	return control{0, "Unknown", 0, "Unknown", severityUnknown, statusUnknown}
}

// ocsfEvent is an API Activity event. Field order follows the schema's
// groups: classification, occurrence, primary, context.
type ocsfEvent struct {
	ActivityID   int    `json:"activity_id"`
	ActivityName string `json:"activity_name"`
	CategoryUID  int    `json:"category_uid"`
	CategoryName string `json:"category_name"`
	ClassUID     int    `json:"class_uid"`
	ClassName    string `json:"class_name"`
	TypeUID      int64  `json:"type_uid"`
	TypeName     string `json:"type_name"`
	SeverityID   int    `json:"severity_id"`
	Severity     string `json:"severity"`

	Time     int64 `json:"time"`
	Duration int64 `json:"duration,omitempty"`

	Message       string         `json:"message"`
	StatusID      int            `json:"status_id"`
	Status        string         `json:"status"`
	StatusCode    string         `json:"status_code,omitempty"`
	StatusDetail  string         `json:"status_detail,omitempty"`
	ActionID      int            `json:"action_id"`
	Action        string         `json:"action"`
	DispositionID int            `json:"disposition_id"`
	Disposition   string         `json:"disposition"`
	IsAlert       bool           `json:"is_alert"`
	Policy        *ocsfPolicy    `json:"policy,omitempty"`
	Actor         ocsfActor      `json:"actor"`
	API           ocsfAPI        `json:"api"`
	SrcEndpoint   ocsfEndpoint   `json:"src_endpoint"`
	Resources     []ocsfResource `json:"resources,omitempty"`
	Trace         *ocsfTrace     `json:"trace,omitempty"`

	Metadata ocsfMetadata `json:"metadata"`
	Unmapped ocsfUnmapped `json:"unmapped"`
}

type ocsfMetadata struct {
	Version        string      `json:"version"`
	Product        ocsfProduct `json:"product"`
	Profiles       []string    `json:"profiles"`
	LogName        string      `json:"log_name"`
	EventCode      string      `json:"event_code,omitempty"`
	CorrelationUID string      `json:"correlation_uid,omitempty"`
	TenantUID      string      `json:"tenant_uid,omitempty"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version"`
}

type ocsfActor struct {
	User    ocsfUser     `json:"user"`
	Session *ocsfSession `json:"session,omitempty"`
}

type ocsfUser struct {
	UID    string   `json:"uid,omitempty"`
	Name   string   `json:"name,omitempty"`
	TypeID int      `json:"type_id"`
	Type   string   `json:"type"`
	Org    *ocsfOrg `json:"org,omitempty"`
}

type ocsfOrg struct {
	UID string `json:"uid"`
}

type ocsfSession struct {
	UID string `json:"uid"`
}

type ocsfAPI struct {
	Operation string        `json:"operation"`
	Service   *ocsfService  `json:"service,omitempty"`
	Request   *ocsfRequest  `json:"request,omitempty"`
	Response  *ocsfResponse `json:"response,omitempty"`
}

type ocsfService struct {
	Name string `json:"name"`
}

type ocsfRequest struct {
	UID string `json:"uid"`
}

type ocsfResponse struct {
	Code         int    `json:"code,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

type ocsfEndpoint struct {
	IP   string `json:"ip,omitempty"`
	Port int    `json:"port,omitempty"`
	Name string `json:"name,omitempty"`
}

type ocsfResource struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type ocsfPolicy struct {
	Name string `json:"name,omitempty"`
	Type string `json:"type,omitempty"`
}

type ocsfTrace struct {
	UID string `json:"uid"`
}

// ocsfUnmapped holds what OCSF has no attribute for: the MCP specifics,
// under the native event's field names.
type ocsfUnmapped struct {
	JSONRPCID      string           `json:"jsonrpc_id,omitempty"`
	SessionID      string           `json:"session_id,omitempty"`
	SpanID         string           `json:"span_id,omitempty"`
	Target         string           `json:"target,omitempty"`
	Phase          Phase            `json:"phase,omitempty"`
	Decision       Decision         `json:"decision"`
	Mode           Mode             `json:"mode"`
	DecidedBy      DecidedBy        `json:"decided_by,omitzero"`
	Violation      Violation        `json:"violation,omitzero"`
	Error          string           `json:"error,omitempty"`
	IdentitySource string           `json:"identity_source"`
	Verified       bool             `json:"identity_verified"`
	Plugins        []PluginVerdict  `json:"plugins,omitempty"`
	Rules          []RuleEvaluation `json:"rules,omitempty"`
	DurationNS     time.Duration    `json:"duration_ns,omitempty"`
	ArgumentsHash  string           `json:"arguments_hash,omitempty"`
	ResultHash     string           `json:"result_hash,omitempty"`
	Content        *Content         `json:"content,omitempty"`
}

// unknownName fills a required name nothing is known for.
const unknownName = "unknown"

// toOCSF maps e (already bounded) to an API Activity event. Every
// attribute the schema requires is set whatever e holds; see
// docs/audit.md for the table.
func toOCSF(e *Event, p Product) *ocsfEvent {
	act := ocsfActivity(e.Method)
	actName := e.Method
	if act != activityOther {
		actName = activityCaption(act)
	}
	ctl := ocsfControl(e.Decision)
	sev := ctl.severityID
	if e.Error != "" {
		sev = max(sev, severityHigh)
	}
	source := e.Caller.Source
	if source == "" {
		source = SourceNone
	}
	o := &ocsfEvent{
		ActivityID:    act,
		ActivityName:  actName,
		CategoryUID:   OCSFCategoryUID,
		CategoryName:  "Application Activity",
		ClassUID:      OCSFClassUID,
		ClassName:     "API Activity",
		TypeUID:       OCSFClassUID*100 + int64(act),
		TypeName:      "API Activity: " + actName,
		SeverityID:    sev,
		Severity:      severityCaption(sev),
		Time:          e.Time.UnixMilli(),
		Duration:      e.Duration.Milliseconds(),
		Message:       ocsfMessage(e),
		StatusID:      ctl.statusID,
		Status:        statusCaption(ctl.statusID),
		StatusCode:    e.Violation.Code,
		StatusDetail:  e.Violation.Reason,
		ActionID:      ctl.actionID,
		Action:        ctl.action,
		DispositionID: ctl.dispositionID,
		Disposition:   ctl.disposition,
		IsAlert:       e.Decision == DecisionDeny || e.Decision == DecisionWouldDeny || e.Error != "",
		Actor:         ocsfActorOf(&e.Caller, e.SessionID),
		API:           ocsfAPIOf(e),
		SrcEndpoint:   ocsfEndpointOf(e.Caller.Address),
		Metadata: ocsfMetadata{
			Version:        OCSFVersion,
			Product:        ocsfProduct{Name: p.Name, VendorName: p.VendorName, Version: p.Version},
			Profiles:       []string{"security_control"},
			LogName:        "audit",
			EventCode:      string(e.Decision),
			CorrelationUID: e.RequestID,
			TenantUID:      e.Caller.Tenant,
		},
		Unmapped: ocsfUnmapped{
			JSONRPCID:      e.JSONRPCID,
			SessionID:      e.SessionID,
			SpanID:         e.SpanID,
			Target:         e.Target,
			Phase:          e.Phase,
			Decision:       e.Decision,
			Mode:           e.Mode,
			DecidedBy:      e.DecidedBy,
			Violation:      e.Violation,
			Error:          e.Error,
			IdentitySource: source,
			Verified:       e.Caller.Verified,
			Plugins:        e.Plugins,
			Rules:          e.Rules,
			DurationNS:     e.Duration,
			ArgumentsHash:  e.ArgumentsHash,
			ResultHash:     e.ResultHash,
			Content:        e.Content,
		},
	}
	if o.StatusDetail == "" {
		o.StatusDetail = e.Error
	}
	if e.DecidedBy != (DecidedBy{}) {
		o.Policy = &ocsfPolicy{Name: e.DecidedBy.Name, Type: e.DecidedBy.Kind}
	}
	if e.Target != "" {
		o.Resources = []ocsfResource{{Name: e.Target, Type: targetType(e.Method)}}
	}
	if e.TraceID != "" {
		o.Trace = &ocsfTrace{UID: e.TraceID}
		o.Metadata.Profiles = append(o.Metadata.Profiles, "trace")
	}
	return o
}

// ocsfActorOf maps the caller. actor.user is always set: a caller nobody
// identified is the user named "unknown" of type Unknown, so the schema's
// constraint (at least one of user, session, ...) holds and a query on
// actor.user finds the anonymous calls.
func ocsfActorOf(c *Caller, session string) ocsfActor {
	var a ocsfActor
	switch {
	case c.Subject != "" || c.Name != "":
		a.User = ocsfUser{UID: c.Subject, Name: c.Name, TypeID: 1, Type: "User"}
	default:
		a.User = ocsfUser{Name: unknownName, TypeID: 0, Type: "Unknown"}
	}
	if c.Tenant != "" {
		a.User.Org = &ocsfOrg{UID: c.Tenant}
	}
	if session != "" {
		a.Session = &ocsfSession{UID: session}
	}
	return a
}

// ocsfAPIOf maps the call: the MCP method is the operation, the JSON-RPC id
// (else Envoy's request id) the request's uid, a deny's JSON-RPC error
// the response.
func ocsfAPIOf(e *Event) ocsfAPI {
	api := ocsfAPI{Operation: e.Method}
	if api.Operation == "" {
		api.Operation = unknownName
	}
	if e.Server != "" {
		api.Service = &ocsfService{Name: e.Server}
	}
	if uid := cmp.Or(e.JSONRPCID, e.RequestID); uid != "" {
		api.Request = &ocsfRequest{UID: uid}
	}
	if e.Decision == DecisionDeny || e.Error != "" || e.ErrorCode != 0 {
		api.Response = &ocsfResponse{Code: e.ErrorCode, Error: e.Violation.Code,
			ErrorMessage: cmp.Or(e.Violation.Reason, e.Error)}
		if api.Response.Error == "" && e.Error != "" {
			api.Response.Error = "error"
		}
	}
	return api
}

// ocsfEndpointOf maps the client's address; src_endpoint is required, so
// an address that is missing or not an IP is named rather than left out.
func ocsfEndpointOf(addr string) ocsfEndpoint {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ocsfEndpoint{IP: ap.Addr().Unmap().String(), Port: int(ap.Port())}
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		return ocsfEndpoint{IP: ip.Unmap().String()}
	}
	if addr == "" {
		return ocsfEndpoint{Name: unknownName}
	}
	return ocsfEndpoint{Name: addr}
}

// targetType names what a method's target is.
func targetType(method string) string {
	switch {
	case strings.HasPrefix(method, "tools/"):
		return "tool"
	case strings.HasPrefix(method, "prompts/"):
		return "prompt"
	case strings.HasPrefix(method, "resources/"):
		return "resource"
	}
	return "target"
}

// ocsfMessage is a one-line summary for a human reading the SIEM:
// "tools/call search: deny by rule block-prod: no prod writes".
func ocsfMessage(e *Event) string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.Method, unknownName))
	if e.Target != "" {
		b.WriteByte(' ')
		b.WriteString(e.Target)
	}
	b.WriteString(": ")
	b.WriteString(string(cmp.Or(e.Decision, Decision(unknownName))))
	if e.DecidedBy.Kind != "" || e.DecidedBy.Name != "" {
		b.WriteString(" by ")
		b.WriteString(cmp.Or(e.DecidedBy.Kind, unknownName))
		if e.DecidedBy.Name != "" {
			b.WriteByte(' ')
			b.WriteString(e.DecidedBy.Name)
		}
	}
	if r := cmp.Or(e.Violation.Reason, e.Error); r != "" {
		b.WriteString(": ")
		b.WriteString(r)
	}
	return b.String()
}
