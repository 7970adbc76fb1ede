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
