package policy

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// DefaultTokenCheckName is the name of the token-check plugin.
const DefaultTokenCheckName = "TokenCheck"

// NewTokenCheck returns the example auth plugin. On http_auth_resolve_user
// it answers the user of a known bearer token (tokens maps token → e-mail),
// refuses an unknown one (401, WWW-Authenticate: Bearer), and leaves a
// request without a bearer token to the other identity sources. On
// http_auth_check_permission it grants every permission to a caller some
// source named and denies an anonymous one (user_email ""), so that a
// request no identity source answers is refused (403). Tokens are compared
// in constant time and never logged.
func NewTokenCheck(name string, tokens map[string]string) (pluginserver.Plugin, error) {
	if name == "" {
		name = DefaultTokenCheckName
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: token check %q: no tokens", ErrInvalidConfig, name)
	}
	known := make([]tokenUser, 0, len(tokens))
	for tok, email := range tokens {
		if tok == "" || strings.TrimSpace(email) == "" {
			return nil, fmt.Errorf("%w: token check %q: empty token or e-mail", ErrInvalidConfig, name)
		}
		known = append(known, tokenUser{token: []byte(tok), email: email})
	}
	cfg := pluginserver.Config{Name: name, Hooks: []cpex.HookType{cpex.HTTPAuthResolveUser, cpex.HTTPAuthCheckPermission},
		Description: "example bearer-token check (http_auth_resolve_user, http_auth_check_permission)"}
	return pluginserver.Func(cfg, func(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if hook == cpex.HTTPAuthCheckPermission {
			return checkPermission(name, payload)
		}
		var p cpex.HTTPAuthResolveUserPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("http_auth_resolve_user payload: %w", err)
		}
		if p.Credentials == nil || !strings.EqualFold(p.Credentials.Scheme, "bearer") {
			return pluginserver.Continue(name), nil
		}
		if email, ok := lookupToken(known, p.Credentials.Credentials); ok {
			reply, err := pluginserver.Modify(name, map[string]any{"email": email, "full_name": "", "is_admin": false, "is_active": true})
			if err == nil {
				reply.Result.Metadata = map[string]any{"auth_method": "example_token"}
			}
			return reply, err
		}
		status := 401
		return pluginserver.Block(name, cpex.PluginViolation{Reason: "Invalid token", Description: "bearer token not recognised",
			Code: "INVALID_TOKEN", HTTPStatusCode: &status, HTTPHeaders: map[string]string{"WWW-Authenticate": "Bearer"}}), nil
	}), nil
}

// checkPermission grants a named caller and denies an anonymous one.
func checkPermission(name string, payload json.RawMessage) (*cpex.InvokeHookReply, error) {
	var p cpex.HTTPAuthCheckPermissionPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("http_auth_check_permission payload: %w", err)
	}
	granted, reason := true, "authenticated caller"
	if strings.TrimSpace(p.UserEmail) == "" {
		granted, reason = false, "no authenticated caller"
	}
	return pluginserver.Modify(name, cpex.PermissionDecision{Granted: &granted, Reason: reason})
}

type tokenUser struct {
	token []byte
	email string
}

// lookupToken finds tok among known, comparing every entry in constant
// time so the answer's timing does not tell how much of a token matched.
func lookupToken(known []tokenUser, tok string) (string, bool) {
	email, found := "", false
	for _, k := range known {
		if subtle.ConstantTimeCompare(k.token, []byte(tok)) == 1 {
			email, found = k.email, true
		}
	}
	return email, found
}
