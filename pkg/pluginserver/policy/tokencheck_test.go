package policy

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func TestTokenCheck(t *testing.T) {
	p, err := NewTokenCheck("", map[string]string{"good-token": "alice@example.com", "other": "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != DefaultTokenCheckName {
		t.Errorf("name %q", p.Name())
	}
	for _, tc := range []struct {
		name, payload string
		user          string // the e-mail answered, "" for none
		block         bool
	}{
		{name: "known", payload: `{"headers":{},"credentials":{"scheme":"Bearer","credentials":"good-token"}}`, user: "alice@example.com"},
		{name: "scheme any case", payload: `{"headers":{},"credentials":{"scheme":"bearer","credentials":"other"}}`, user: "bob@example.com"},
		{name: "unknown", payload: `{"headers":{},"credentials":{"scheme":"Bearer","credentials":"good-tokenX"}}`, block: true},
		{name: "prefix of a token", payload: `{"headers":{},"credentials":{"scheme":"Bearer","credentials":"good"}}`, block: true},
		{name: "no credentials", payload: `{"headers":{},"credentials":null}`},
		{name: "basic", payload: `{"headers":{},"credentials":{"scheme":"Basic","credentials":"good-token"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, err := p.InvokeHook(context.Background(), cpex.HTTPAuthResolveUser, json.RawMessage(tc.payload), cpex.NewContext(cpex.GlobalContext{RequestID: "r"}))
			if err != nil {
				t.Fatal(err)
			}
			r := reply.Result
			switch {
			case tc.block:
				if r.Continue() || r.Violation == nil || *r.Violation.HTTPStatusCode != 401 || r.Violation.HTTPHeaders["WWW-Authenticate"] != "Bearer" {
					t.Errorf("result %+v, want a 401 block", r)
				}
			case tc.user != "":
				var u cpex.ResolvedUser
				if err := json.Unmarshal(r.ModifiedPayload, &u); err != nil || u.Email != tc.user || u.IsActive == nil || !*u.IsActive {
					t.Errorf("user %s, want %s", r.ModifiedPayload, tc.user)
				}
			default:
				if !r.Continue() || r.Modified() || r.Violation != nil {
					t.Errorf("result %+v, want continue without a user", r)
				}
			}
		})
	}
	if _, err := NewTokenCheck("x", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no tokens: %v", err)
	}
	if _, err := NewServer(nil, nil, p, p); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("duplicate extra plugin: %v", err)
	}
}

// TestTokenCheckPermission: a named caller is granted, an anonymous one
// denied, whatever the permission.
func TestTokenCheckPermission(t *testing.T) {
	p, err := NewTokenCheck("", map[string]string{"good-token": "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		payload string
		granted bool
	}{
		{payload: `{"user_email":"alice@example.com","permission":"tools.execute","resource_type":"tool","is_admin":false}`, granted: true},
		{payload: `{"user_email":"carol","permission":"prompts.read","is_admin":false}`, granted: true},
		{payload: `{"user_email":"","permission":"tools.execute","is_admin":false}`},
		{payload: `{"user_email":"  ","permission":"tools.read","is_admin":false}`},
	} {
		reply, err := p.InvokeHook(context.Background(), cpex.HTTPAuthCheckPermission, json.RawMessage(tc.payload), cpex.NewContext(cpex.GlobalContext{RequestID: "r"}))
		if err != nil {
			t.Fatal(err)
		}
		var d cpex.PermissionDecision
		if err := json.Unmarshal(reply.Result.ModifiedPayload, &d); err != nil || d.Granted == nil || *d.Granted != tc.granted || d.Reason == "" {
			t.Errorf("%s: decision %s, want granted %v with a reason", tc.payload, reply.Result.ModifiedPayload, tc.granted)
		}
	}
	if _, err := p.InvokeHook(context.Background(), cpex.HTTPAuthCheckPermission, json.RawMessage(`[]`), cpex.NewContext(cpex.GlobalContext{})); err == nil {
		t.Error("a payload that is not an object was answered")
	}
}
