package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

const permissionPayload = `{"user_email":"alice@example.com","permission":"tools.execute","resource_type":"tool","is_admin":false}`

// TestCheckPermissionChain: granted:false is a block naming the plugin when
// the mode may block, and only logged when it may not; the payload every
// plugin sees is the request's; a wrong answer is a failure.
func TestCheckPermissionChain(t *testing.T) {
	deny := modifyH(`{"granted":false,"reason":"bob may not"}`)
	for _, tc := range []struct {
		name      string
		mode      config.Mode
		answer    handler
		denied    bool
		err       bool
		secondRan bool
	}{
		{"granted", config.ModeSequential, modifyH(`{"granted":true,"reason":"ok"}`), false, false, true},
		{"no answer", config.ModeSequential, okH(), false, false, true},
		{"denied", config.ModeSequential, deny, true, false, false},
		{"denied by a concurrent plugin", config.ModeConcurrent, deny, true, false, true},
		{"denied in transform mode: not enforced", config.ModeTransform, deny, false, false, true},
		{"denied in audit mode: not enforced", config.ModeAudit, deny, false, false, true},
		{"granted missing", config.ModeSequential, modifyH(`{"reason":"?"}`), false, true, false},
		{"granted not a bool", config.ModeSequential, modifyH(`{"granted":"no"}`), false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(onErr(plug("rbac", tc.mode, 1, cpex.HTTPAuthCheckPermission), config.OnErrorFail),
				plug("second", config.ModeSequential, 5, cpex.HTTPAuthCheckPermission))
			f.set("rbac", tc.answer)
			f.set("second", okH())
			e := newExec(t, f, Options{})
			out := e.Run(context.Background(), cpex.HTTPAuthCheckPermission, json.RawMessage(permissionPayload), nil, Target{})
			if got := out.Violation != nil; got != tc.denied {
				t.Fatalf("denied %v, want %v (outcome %+v)", got, tc.denied, out)
			}
			if v := out.Violation; v != nil && (v.PluginName != "rbac" || v.Code != "PERMISSION_DENIED" || v.Description != "bob may not" ||
				v.HTTPStatusCode == nil || *v.HTTPStatusCode != 403) {
				t.Errorf("violation %+v", v)
			}
			if got := out.Err != nil; got != tc.err || (got && !errors.Is(out.Err, ErrInvalidPayload)) {
				t.Errorf("err %v, want an ErrInvalidPayload failure: %v", out.Err, tc.err)
			}
			s := f.callsOf("second")
			if got := len(s) == 1; got != tc.secondRan {
				t.Errorf("second ran %v, want %v", got, tc.secondRan)
			}
			if len(s) == 1 && !jsonEqual(json.RawMessage(s[0].payload), json.RawMessage(permissionPayload)) {
				t.Errorf("second saw %s, want the request's payload", s[0].payload)
			}
		})
	}
}

// TestRecordedPermissionAnswers runs the answers of the real cpex 0.1.3
// server (doc §3) for http_auth_check_permission and http_post_request.
func TestRecordedPermissionAnswers(t *testing.T) {
	run := func(file string, hook cpex.HookType, payload string) Outcome {
		f := newFake(plug("HooksPlugin", config.ModeSequential, 1, hook))
		f.set("HooksPlugin", recorded(t, file))
		return newExec(t, f, Options{}).Run(context.Background(), hook, json.RawMessage(payload), nil, Target{})
	}
	if out := run("check_permission.json", cpex.HTTPAuthCheckPermission, permissionPayload); out.Violation != nil || out.Err != nil ||
		!jsonEqual(out.Payload, json.RawMessage(`{"granted":true,"reason":"alice-only tools.execute"}`)) {
		t.Errorf("granted: %+v", out)
	}
	if out := run("check_permission_denied.json", cpex.HTTPAuthCheckPermission, permissionPayload); out.Violation == nil ||
		out.Violation.PluginName != "HooksPlugin" || out.Violation.Description != "alice-only tools.execute" {
		t.Errorf("denied: %+v", out)
	}
	post := `{"path":"/mcp","method":"POST","headers":{},"response_headers":{"content-type":"application/json"},"status_code":200}`
	out := run("post_request.json", cpex.HTTPPostRequest, post)
	want := `{"path":"/mcp","method":"POST","headers":{},"response_headers":{"content-type":"application/json","x-post-status":"200","x-saw-pre":"/mcp"},"status_code":200}`
	if !out.Modified || !jsonEqual(out.Payload, json.RawMessage(want)) {
		t.Errorf("post_request: %s", out.Payload)
	}
}

// TestTokenDelegateResult: the recorded delegation is the result; every
// plugin gets the request's payload; the last answer wins; a wrong shape
// is a failure.
func TestTokenDelegateResult(t *testing.T) {
	payload := `{"target_name":"get_compensation","target_type":"tool","bearer_token":"user-tok"}`
	f := newFake(plug("HooksPlugin", config.ModeSequential, 1, cpex.TokenDelegate), plug("second", config.ModeSequential, 2, cpex.TokenDelegate))
	f.set("HooksPlugin", recorded(t, "token_delegate.json"))
	f.set("second", okH())
	e := newExec(t, f, Options{})
	out := e.Run(context.Background(), cpex.TokenDelegate, json.RawMessage(payload), nil, Target{})
	var d cpex.Delegation
	if err := json.Unmarshal(out.Payload, &d); err != nil || !out.Modified || d.ForwardedHeaders["authorization"] != "Bearer delegated-get_compensation" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	if s := f.callsOf("second"); len(s) != 1 || !jsonEqual(json.RawMessage(s[0].payload), json.RawMessage(payload)) {
		t.Errorf("second saw %v, want the request's payload", s)
	}
	f.set("second", modifyH(`{"forwarded_headers":{"authorization":"Bearer later"}}`))
	out = e.Run(context.Background(), cpex.TokenDelegate, json.RawMessage(payload), nil, Target{})
	if err := json.Unmarshal(out.Payload, &d); err != nil || d.ForwardedHeaders["authorization"] != "Bearer later" {
		t.Errorf("last writer: %s", out.Payload)
	}
	f.set("second", modifyH(`{"forwarded_headers":{"authorization":1}}`))
	if out = e.Run(context.Background(), cpex.TokenDelegate, json.RawMessage(payload), nil, Target{}); !errors.Is(out.Err, ErrInvalidPayload) {
		t.Errorf("a non-string header: %+v", out)
	}
}

// TestIdentityResolveAnswers: the recorded subject is the result; the
// recorded rejection (continue_processing true, rejected true) is a block
// naming the plugin with its reject_status, also as gRPC's double; it is
// not enforced from a mode that cannot block.
func TestIdentityResolveAnswers(t *testing.T) {
	payload := `{"raw_token":"raw-alice","source":"bearer","headers":{}}`
	run := func(mode config.Mode, h handler) Outcome {
		f := newFake(plug("HooksPlugin", mode, 1, cpex.IdentityResolve))
		f.set("HooksPlugin", h)
		return newExec(t, f, Options{}).Run(context.Background(), cpex.IdentityResolve, json.RawMessage(payload), nil, Target{})
	}
	out := run(config.ModeSequential, recorded(t, "identity_resolve.json"))
	var res cpex.IdentityResolution
	if err := json.Unmarshal(out.Payload, &res); err != nil || out.Violation != nil || res.Subject == nil || res.Subject.ID != "alice@example.com" ||
		len(res.Subject.Teams) != 1 {
		t.Errorf("subject: %+v (%v)", out, err)
	}
	out = run(config.ModeSequential, recorded(t, "identity_resolve_rejected.json"))
	if v := out.Violation; v == nil || v.PluginName != "HooksPlugin" || v.Code != "IDENTITY_REJECTED" || *v.HTTPStatusCode != 401 || v.Description != "unknown token" {
		t.Errorf("rejected: %+v", out)
	}
	out = run(config.ModeSequential, modifyH(`{"rejected":true,"reject_status":403.0}`))
	if v := out.Violation; v == nil || *v.HTTPStatusCode != 403 {
		t.Errorf("rejected with a double status: %+v", out)
	}
	if out = run(config.ModeAudit, recorded(t, "identity_resolve_rejected.json")); out.Violation != nil {
		t.Errorf("audit mode enforced a rejection: %+v", out)
	}
	if out = run(config.ModeSequential, modifyH(`{"subject":"alice"}`)); !errors.Is(out.Err, ErrInvalidPayload) {
		t.Errorf("a string subject: %+v", out)
	}
}
