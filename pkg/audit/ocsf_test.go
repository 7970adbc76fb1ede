package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The requirements below are the OCSF schema's, release 1.8.0 (the
// ocsf-schema repository's events/base_event.json, events/application/
// api_activity.json, the objects' files and dictionary.json at that
// release): which attributes an API Activity event (class_uid 6003, in
// category 6, Application Activity) must carry, their types, and the
// constraints on their values. "required" rows must be present;
// "if present" rows constrain an attribute when it is there (recommended
// or optional ones, and required attributes of optional objects).
//
// Types: integer_t and long_t are JSON integers (timestamp_t is a long_t
// of milliseconds since the epoch); port_t an integer in 0..65535; ip_t an
// IPv4 or IPv6 address string.

type ocsfRule struct {
	path     string // dotted path from the event's root
	required bool   // false: checked only when present
	// requiredIn names the object within which the attribute is required:
	// it must be there whenever that object is.
	requiredIn string
	typ        string // "integer", "string", "object", "boolean", "array"
	// enum lists the allowed integer values; nil means any.
	enum []int64
	// atLeastOne names the object's attributes of which one must be
	// present (the schema's "at_least_one" constraint).
	atLeastOne []string
	// check is a further constraint on the value; root is the event.
	check func(v any, root map[string]any) error
}

var ocsfAPIActivityRules = []ocsfRule{
	// base_event.json, classification and occurrence.
	{path: "activity_id", required: true, typ: "integer", enum: []int64{0, 1, 2, 3, 4, 99}}, // api_activity adds 1..4 to base's 0, 99
	{path: "category_uid", required: true, typ: "integer", enum: []int64{6}},
	{path: "class_uid", required: true, typ: "integer", enum: []int64{6003}},
	{path: "type_uid", required: true, typ: "integer", check: checkTypeUID},
	{path: "time", required: true, typ: "integer", check: checkTimestamp},
	{path: "severity_id", required: true, typ: "integer", enum: []int64{0, 1, 2, 3, 4, 5, 6, 99}},
	{path: "metadata", required: true, typ: "object"},
	// base_event.json, recommended.
	{path: "status_id", typ: "integer", enum: []int64{0, 1, 2, 99}},
	{path: "status", typ: "string"},
	{path: "status_code", typ: "string"},
	{path: "status_detail", typ: "string"},
	{path: "message", typ: "string"},
	{path: "activity_name", typ: "string"},
	{path: "type_name", typ: "string"},
	{path: "duration", typ: "integer"},
	// api_activity.json, primary.
	{path: "actor", required: true, typ: "object",
		atLeastOne: []string{"process", "user", "invoked_by", "session", "app_name", "app_uid"}},
	{path: "api", required: true, typ: "object"},
	{path: "src_endpoint", required: true, typ: "object",
		atLeastOne: []string{"ip", "uid", "name", "hostname", "svc_name", "instance_uid", "interface_uid", "interface_name", "domain"}},
	{path: "resources", typ: "array"},
	// metadata.json.
	{path: "metadata.version", required: true, typ: "string", check: checkSemver},
	{path: "metadata.product", required: true, typ: "object", atLeastOne: []string{"name", "uid"}},
	{path: "metadata.product.vendor_name", typ: "string"},
	{path: "metadata.product.version", typ: "string"},
	{path: "metadata.profiles", typ: "array"},
	{path: "metadata.correlation_uid", typ: "string"},
	{path: "metadata.tenant_uid", typ: "string"},
	// api.json, request.json, response.json, service.json.
	{path: "api.operation", required: true, typ: "string"},
	{path: "api.request", typ: "object"},
	{path: "api.request.uid", typ: "string", requiredIn: "api.request"},
	{path: "api.response", typ: "object"},
	{path: "api.response.code", typ: "integer"},
	{path: "api.response.error", typ: "string"},
	{path: "api.response.error_message", typ: "string"},
	{path: "api.service", typ: "object", atLeastOne: []string{"name", "uid"}},
	// actor.json, user.json, organization.json, session.json.
	{path: "actor.user", typ: "object", atLeastOne: []string{"account", "name", "uid"}},
	{path: "actor.user.type_id", typ: "integer", enum: []int64{0, 1, 2, 3, 99}},
	{path: "actor.user.org", typ: "object", atLeastOne: []string{"name", "uid"}},
	{path: "actor.session", typ: "object"},
	{path: "actor.session.uid", typ: "string"},
	// network_endpoint.json.
	{path: "src_endpoint.ip", typ: "string", check: checkIP},
	{path: "src_endpoint.port", typ: "integer", check: checkPort},
	// profiles/security_control.json.
	{path: "action_id", typ: "integer", enum: []int64{0, 1, 2, 3, 4, 99}},
	{path: "disposition_id", typ: "integer", enum: []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 99}},
	{path: "is_alert", typ: "boolean"},
	{path: "policy", typ: "object", atLeastOne: []string{"name", "type", "uid"}},
	// profiles/trace.json, trace.json.
	{path: "trace", typ: "object"},
	{path: "trace.uid", typ: "string", requiredIn: "trace"},
	// base_event.json, context.
	{path: "unmapped", typ: "object"},
}

// validateOCSF checks line against ocsfAPIActivityRules.
func validateOCSF(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	var errs []string
	for _, r := range ocsfAPIActivityRules {
		v, ok := lookup(root, r.path)
		if !ok {
			if r.required {
				errs = append(errs, r.path+": required, missing")
			} else if _, in := lookup(root, r.requiredIn); r.requiredIn != "" && in {
				errs = append(errs, r.path+": required in "+r.requiredIn+", missing")
			}
			continue
		}
		if err := checkType(v, r.typ); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r.path, err))
			continue
		}
		if r.enum != nil {
			n, _ := v.(json.Number).Int64()
			if !containsInt(r.enum, n) {
				errs = append(errs, fmt.Sprintf("%s: %d not in %v", r.path, n, r.enum))
			}
		}
		if r.atLeastOne != nil {
			obj := v.(map[string]any)
			found := false
			for _, k := range r.atLeastOne {
				if _, ok := obj[k]; ok {
					found = true
				}
			}
			if !found {
				errs = append(errs, fmt.Sprintf("%s: needs at least one of %v", r.path, r.atLeastOne))
			}
		}
		if r.check != nil {
			if err := r.check(v, root); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", r.path, err))
			}
		}
	}
	if errs != nil {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func lookup(root map[string]any, path string) (any, bool) {
	var cur any = root
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func checkType(v any, typ string) error {
	ok := false
	switch typ {
	case "integer":
		if n, isNum := v.(json.Number); isNum {
			_, err := strconv.ParseInt(string(n), 10, 64)
			ok = err == nil
		}
	case "string":
		_, ok = v.(string)
	case "object":
		_, ok = v.(map[string]any)
	case "boolean":
		_, ok = v.(bool)
	case "array":
		_, ok = v.([]any)
	}
	if !ok {
		return fmt.Errorf("want %s, got %T %v", typ, v, v)
	}
	return nil
}

func containsInt(list []int64, n int64) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

func checkTypeUID(v any, root map[string]any) error {
	uid, _ := v.(json.Number).Int64()
	classN, ok1 := root["class_uid"].(json.Number)
	actN, ok2 := root["activity_id"].(json.Number)
	if !ok1 || !ok2 {
		return fmt.Errorf("class_uid or activity_id missing or not a number")
	}
	class, _ := classN.Int64()
	act, _ := actN.Int64()
	if uid != class*100+act {
		return fmt.Errorf("%d != class_uid*100 + activity_id = %d", uid, class*100+act)
	}
	return nil
}

// checkTimestamp: milliseconds since the epoch, so a date in this century
// (seconds or nanoseconds would fall outside).
func checkTimestamp(v any, _ map[string]any) error {
	ms, _ := v.(json.Number).Int64()
	lo := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	if ms < lo || ms > hi {
		return fmt.Errorf("%d is not epoch milliseconds of this century", ms)
	}
	return nil
}

func checkSemver(v any, _ map[string]any) error {
	parts := strings.SplitN(v.(string), ".", 3)
	if len(parts) != 3 {
		return fmt.Errorf("%q is not a semantic version", v)
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(strings.SplitN(p, "-", 2)[0]); err != nil {
			return fmt.Errorf("%q is not a semantic version", v)
		}
	}
	return nil
}

func checkIP(v any, _ map[string]any) error {
	if _, err := netip.ParseAddr(v.(string)); err != nil {
		return fmt.Errorf("not an IP address: %w", err)
	}
	return nil
}

func checkPort(v any, _ map[string]any) error {
	n, _ := v.(json.Number).Int64()
	if n < 0 || n > 65535 {
		return fmt.Errorf("port %d out of range", n)
	}
	return nil
}

// fullEvent is an event with every field set.
func fullEvent() Event {
	return Event{
		Time:      time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		RequestID: "9f1c-req",
		JSONRPCID: "7",
		SessionID: "sess-1",
		TraceID:   "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:    "00f067aa0ba902b7",
		Caller: Caller{Subject: "alice", Name: "alice@example.com", Tenant: "acme",
			Source: SourceJWTMetadata, Verified: true, Address: "10.0.0.7:51234"},
		Server:    "github-mcp",
		Method:    "tools/call",
		Target:    "delete_repo",
		Phase:     PhaseRequest,
		Decision:  DecisionDeny,
		Mode:      ModeEnforce,
		DecidedBy: DecidedBy{Kind: KindRule, Name: "no-deletes"},
		Violation: Violation{Code: "FORBIDDEN_TOOL", Reason: "deletes are not allowed"},
		ErrorCode: -32001,
		Plugins: []PluginVerdict{{Plugin: "pii", Hook: "tool_pre_invoke", Verdict: "allow",
			Duration: 1200 * time.Microsecond}},
		Rules:         []RuleEvaluation{{Name: "no-deletes", Outcome: "match"}},
		Duration:      3 * time.Millisecond,
		ArgumentsHash: Hash([]byte(`{"repo":"x"}`)),
	}
}

// encodeOCSF encodes e and decodes the result for checks.
func encodeOCSF(t testing.TB, e Event) ([]byte, map[string]any) {
	t.Helper()
	enc := Encoder{Format: FormatOCSF, Product: Product{Version: "v0.9.0"}}
	line, err := enc.Encode(&e)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	return bytes.Clone(line), m
}

func TestOCSFValidates(t *testing.T) {
	line, _ := encodeOCSF(t, fullEvent())
	if err := validateOCSF(line); err != nil {
		t.Fatalf("OCSF event does not validate: %v\n%s", err, line)
	}
}

// The validator must reject what breaks the schema, or a green test proves
// nothing.
func TestOCSFValidatorRejects(t *testing.T) {
	line, _ := encodeOCSF(t, fullEvent())
	if err := validateOCSF(line); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
	}{
		{"no class_uid", func(m map[string]any) { delete(m, "class_uid") }},
		{"wrong category", func(m map[string]any) { m["category_uid"] = 5 }},
		{"bad type_uid", func(m map[string]any) { m["type_uid"] = 6003 }},
		{"time in seconds", func(m map[string]any) { m["time"] = 1782907200 }},
		{"time as string", func(m map[string]any) { m["time"] = "2026-07-01T12:00:00Z" }},
		{"no actor", func(m map[string]any) { delete(m, "actor") }},
		{"empty actor", func(m map[string]any) { m["actor"] = map[string]any{} }},
		{"no api.operation", func(m map[string]any) { delete(m["api"].(map[string]any), "operation") }},
		{"request without uid", func(m map[string]any) { m["api"].(map[string]any)["request"] = map[string]any{} }},
		{"no src_endpoint", func(m map[string]any) { delete(m, "src_endpoint") }},
		{"empty src_endpoint", func(m map[string]any) { m["src_endpoint"] = map[string]any{"port": 1} }},
		{"bad ip", func(m map[string]any) { m["src_endpoint"].(map[string]any)["ip"] = "10.0.0" }},
		{"no metadata.version", func(m map[string]any) { delete(m["metadata"].(map[string]any), "version") }},
		{"no metadata.product", func(m map[string]any) { delete(m["metadata"].(map[string]any), "product") }},
		{"severity out of enum", func(m map[string]any) { m["severity_id"] = 7 }},
		{"status_id as string", func(m map[string]any) { m["status_id"] = "2" }},
		{"trace without uid", func(m map[string]any) { m["trace"] = map[string]any{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatal(err)
			}
			c.change(m)
			bad, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if validateOCSF(bad) == nil {
				t.Errorf("validator accepted %s", bad)
			}
		})
	}
}

// TestOCSFMapping checks the mapping's edges: who, what, what was decided.
func TestOCSFMapping(t *testing.T) {
	type want map[string]any // dotted path → value (numbers as float64); nil: absent
	for _, c := range []struct {
		name string
		edit func(e *Event)
		want want
	}{
		{
			name: "enforced deny by a rule",
			want: want{
				"class_uid": 6003.0, "category_uid": 6.0, "activity_id": 99.0, "activity_name": "tools/call",
				"type_uid": 600399.0, "time": float64(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).UnixMilli()),
				"severity_id": 3.0, "status_id": 2.0, "status": "Failure", "status_code": "FORBIDDEN_TOOL",
				"status_detail": "deletes are not allowed", "action_id": 2.0, "disposition_id": 2.0, "is_alert": true,
				"actor.user.uid": "alice", "actor.user.name": "alice@example.com", "actor.user.org.uid": "acme",
				"actor.session.uid": "sess-1", "api.operation": "tools/call", "api.service.name": "github-mcp",
				"api.request.uid": "7", "api.response.code": -32001.0, "api.response.error": "FORBIDDEN_TOOL",
				"src_endpoint.ip": "10.0.0.7", "src_endpoint.port": 51234.0, "policy.name": "no-deletes", "policy.type": "rule",
				"metadata.version": OCSFVersion, "metadata.product.name": "mcp-extproc", "metadata.product.version": "v0.9.0",
				"metadata.correlation_uid": "9f1c-req", "metadata.tenant_uid": "acme", "trace.uid": "4bf92f3577b34da6a3ce929d0e0e4736",
				"unmapped.decision": "deny", "unmapped.mode": "enforce", "unmapped.target": "delete_repo",
				"unmapped.identity_source": "jwt_metadata", "unmapped.identity_verified": true, "duration": 3.0,
				"message": "tools/call delete_repo: deny by rule no-deletes: deletes are not allowed",
			},
		},
		{
			name: "no caller",
			edit: func(e *Event) { e.Caller = Caller{}; e.SessionID = "" },
			want: want{"actor.user.name": "unknown", "actor.user.type_id": 0.0, "actor.user.uid": nil,
				"actor.user.org": nil, "actor.session": nil, "src_endpoint.name": "unknown", "src_endpoint.ip": nil,
				"unmapped.identity_source": "none", "unmapped.identity_verified": false, "metadata.tenant_uid": nil},
		},
		{
			name: "tenant without subject",
			edit: func(e *Event) { e.Caller = Caller{Tenant: "acme", Source: SourceHeaders} },
			want: want{"actor.user.name": "unknown", "actor.user.org.uid": "acme", "unmapped.identity_source": "headers"},
		},
		{
			name: "no target",
			edit: func(e *Event) { e.Method = "tools/list"; e.Target = "" },
			want: want{"activity_id": 2.0, "activity_name": "Read", "type_uid": 600302.0, "resources": nil,
				"unmapped.target": nil, "message": "tools/list: deny by rule no-deletes: deletes are not allowed"},
		},
		{
			name: "resources/read targets a resource",
			edit: func(e *Event) { e.Method = "resources/read"; e.Target = "file:///etc/passwd" },
			want: want{"activity_id": 2.0, "resources": []any{map[string]any{"name": "file:///etc/passwd", "type": "resource"}}},
		},
		{
			name: "shadow would deny",
			edit: func(e *Event) { e.Decision = DecisionWouldDeny; e.Mode = ModeShadow; e.ErrorCode = 0 },
			want: want{"status_id": 1.0, "status": "Success", "action_id": 3.0, "action": "Observed",
				"disposition_id": 15.0, "is_alert": true, "severity_id": 3.0, "api.response": nil,
				"unmapped.mode": "shadow", "unmapped.decision": "would_deny", "status_code": "FORBIDDEN_TOOL"},
		},
		{
			name: "shadow would modify",
			edit: func(e *Event) {
				e.Decision, e.Mode, e.ErrorCode, e.Violation = DecisionWouldModify, ModeShadow, 0, Violation{}
			},
			want: want{"status_id": 1.0, "action_id": 3.0, "disposition_id": 15.0, "is_alert": false,
				"severity_id": 2.0, "status_code": nil},
		},
		{
			name: "modify",
			edit: func(e *Event) { e.Decision, e.ErrorCode, e.Violation = DecisionModify, 0, Violation{} },
			want: want{"status_id": 1.0, "action_id": 4.0, "action": "Modified", "disposition_id": 11.0, "is_alert": false},
		},
		{
			name: "allow, nothing objected",
			edit: func(e *Event) {
				e.Decision, e.ErrorCode, e.Violation, e.DecidedBy = DecisionAllow, 0, Violation{}, DecidedBy{}
			},
			want: want{"status_id": 1.0, "action_id": 1.0, "disposition_id": 1.0, "severity_id": 1.0,
				"is_alert": false, "policy": nil, "unmapped.decided_by": nil, "api.response": nil,
				"message": "tools/call delete_repo: allow"},
		},
		{
			name: "error outcome, fail closed",
			edit: func(e *Event) {
				e.Violation = Violation{}
				e.Error = "plugin pii: deadline exceeded"
				e.DecidedBy = DecidedBy{Kind: KindExtproc, Name: "fail_closed"}
			},
			want: want{"status_id": 2.0, "severity_id": 4.0, "is_alert": true, "status_detail": "plugin pii: deadline exceeded",
				"api.response.error": "error", "api.response.error_message": "plugin pii: deadline exceeded",
				"unmapped.error": "plugin pii: deadline exceeded", "policy.type": "extproc"},
		},
		{
			name: "error outcome, fail open",
			edit: func(e *Event) {
				e.Decision, e.ErrorCode, e.Violation, e.DecidedBy = DecisionAllow, 0, Violation{}, DecidedBy{}
				e.Error = "plugin pii: unreachable"
			},
			want: want{"status_id": 1.0, "severity_id": 4.0, "is_alert": true, "action_id": 1.0,
				"api.response.error_message": "plugin pii: unreachable"},
		},
		{
			name: "notification: no ids",
			edit: func(e *Event) {
				e.Method, e.Target, e.JSONRPCID, e.RequestID = "notifications/initialized", "", "", ""
			},
			want: want{"activity_id": 99.0, "activity_name": "notifications/initialized", "api.request": nil,
				"metadata.correlation_uid": nil},
		},
		{
			name: "request id stands in for the JSON-RPC id",
			edit: func(e *Event) { e.JSONRPCID = "" },
			want: want{"api.request.uid": "9f1c-req"},
		},
		{
			name: "no method: the message did not parse",
			edit: func(e *Event) {
				e.Method, e.Target = "", ""
				e.DecidedBy = DecidedBy{Kind: KindExtproc, Name: "parse"}
			},
			want: want{"activity_id": 0.0, "activity_name": "Unknown", "type_uid": 600300.0, "api.operation": "unknown"},
		},
		{
			name: "initialize creates, unsubscribe deletes, setLevel updates",
			edit: func(e *Event) { e.Method = "initialize" },
			want: want{"activity_id": 1.0, "activity_name": "Create"},
		},
		{
			name: "unsubscribe",
			edit: func(e *Event) { e.Method = "resources/unsubscribe" },
			want: want{"activity_id": 4.0, "type_uid": 600304.0},
		},
		{
			name: "setLevel",
			edit: func(e *Event) { e.Method = "logging/setLevel" },
			want: want{"activity_id": 3.0},
		},
		{
			name: "IPv6 address with port, IPv4-mapped",
			edit: func(e *Event) { e.Caller.Address = "[::ffff:10.1.2.3]:443" },
			want: want{"src_endpoint.ip": "10.1.2.3", "src_endpoint.port": 443.0},
		},
		{
			name: "bare IPv6",
			edit: func(e *Event) { e.Caller.Address = "2001:db8::1" },
			want: want{"src_endpoint.ip": "2001:db8::1", "src_endpoint.port": nil},
		},
		{
			name: "address that is not an IP",
			edit: func(e *Event) { e.Caller.Address = "unix:/run/envoy.sock" },
			want: want{"src_endpoint.name": "unix:/run/envoy.sock", "src_endpoint.ip": nil},
		},
		{
			name: "no trace",
			edit: func(e *Event) { e.TraceID, e.SpanID = "", "" },
			want: want{"trace": nil, "metadata.profiles": []any{"security_control"}},
		},
		{
			name: "unknown decision",
			edit: func(e *Event) { e.Decision = "" },
			want: want{"status_id": 0.0, "action_id": 0.0, "disposition_id": 0.0, "severity_id": 0.0},
		},
		{
			name: "hashes and redacted content ride in unmapped",
			edit: func(e *Event) {
				e.ResultHash = Hash([]byte("{}"))
				e.Content = &Content{Arguments: json.RawMessage(`{"repo":"[REDACTED]"}`)}
			},
			want: want{"unmapped.arguments_hash": Hash([]byte(`{"repo":"x"}`)),
				"unmapped.result_hash":            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
				"unmapped.content.arguments.repo": "[REDACTED]"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := fullEvent()
			if c.edit != nil {
				c.edit(&e)
			}
			line, m := encodeOCSF(t, e)
			if err := validateOCSF(line); err != nil {
				t.Errorf("does not validate: %v", err)
			}
			for path, w := range c.want {
				got, ok := lookup(m, path)
				if w == nil {
					if ok {
						t.Errorf("%s = %v, want absent", path, got)
					}
					continue
				}
				if !ok {
					t.Errorf("%s absent, want %v", path, w)
					continue
				}
				if fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("%s = %v, want %v", path, got, w)
				}
			}
			if t.Failed() {
				t.Logf("%s", line)
			}
		})
	}
}

// FuzzOCSF: whatever a client, a plugin or the identity sources put in an
// event, the OCSF encoding is one line that validates.
func FuzzOCSF(f *testing.F) {
	f.Add("tools/call", "search", "alice", "acme", "10.0.0.1:80", "deny", "1", "", "sess")
	f.Add("", "", "", "", "", "", "", "boom", "")
	f.Add("resources/read", "file:///x", "", "t", "[::1]:0", "would_deny", `"a"`, "", "")
	f.Add("x\n\"y", "\xff\xfe", "\u2028", "", "not an ip", "weird", "", "", "")
	f.Fuzz(func(t *testing.T, method, target, subject, tenant, addr, decision, id, errText, session string) {
		e := fullEvent()
		e.Method, e.Target, e.Caller.Subject, e.Caller.Tenant = method, target, subject, tenant
		e.Caller.Address, e.Decision, e.JSONRPCID, e.Error, e.SessionID = addr, Decision(decision), id, errText, session
		enc := Encoder{Format: FormatOCSF}
		line, err := enc.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("not one line: %q", line)
		}
		if err := validateOCSF(line); err != nil {
			t.Fatalf("%v\n%s", err, line)
		}
	})
}
