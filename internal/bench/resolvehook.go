package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// ResolveHookTarget bounds a sidecar with a resolve hook against the same
// tool call for the same caller plus that hook's round trip made directly.
const ResolveHookTarget = Target

// resolvedCallerConfig is the identity block of a sidecar given, in
// headers Envoy set, the caller the bench's resolve hook answers: its
// plugins get the same identity (user, user_context), so the resolve
// hook's row compares one more round trip and nothing else.
const resolvedCallerConfig = `  identity:
    sources:
      - headers: {set_by_envoy: true, user: x-user, email: x-user-email, name: x-user-name}
`

// The user the bench's resolve hook answers.
const (
	resolvedEmail = "alice@acme.example"
	resolvedName  = "Alice"
)

// resolveHookRows measure a sidecar with the policy plugin (at policyURL)
// and an http_auth_resolve_user plugin against the same policy with the
// resolved caller given by Envoy-set headers, followed by the resolve call
// made directly (the check), and against today (no caller) followed by
// that call.
func (r *runner) resolveHookRows(ctx context.Context, cl *closers, policyURL string, today *Endpoint) ([]identityRow, error) {
	auth := pluginserver.Func(pluginserver.Config{Name: "Auth", Hooks: []cpex.HookType{cpex.HTTPAuthResolveUser}},
		func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			return pluginserver.Modify("Auth", map[string]any{"email": resolvedEmail, "full_name": resolvedName, "is_admin": false, "is_active": true})
		})
	as, err := StartPlugin(auth)
	if err != nil {
		return nil, err
	}
	cl.add(as)
	policy := PluginSpec{Name: "Policy", URL: policyURL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}
	sc, err := StartSidecar(ctx, "sidecar (resolve hook)", SidecarConfig(0, policy,
		PluginSpec{Name: "Auth", URL: as.URL, Hooks: []cpex.HookType{cpex.HTTPAuthResolveUser}}))
	if err != nil {
		return nil, err
	}
	cl.add(sc)
	same, err := StartSidecar(ctx, "sidecar (the resolved caller from Envoy-set headers)", SidecarConfig(0, policy)+resolvedCallerConfig)
	if err != nil {
		return nil, err
	}
	cl.add(same)
	direct, err := DialDirect(ctx, as.URL, "Auth")
	if err != nil {
		return nil, err
	}
	cl.add(direct)
	bearer := Header{"authorization", "Bearer 3q2+7wAAAAE.bench.token"}
	p, err := toolsCallWith(bearer)
	if err != nil {
		return nil, err
	}
	ps, err := toolsCallWith(bearer, Header{"x-user", resolvedEmail}, Header{"x-user-email", resolvedEmail}, Header{"x-user-name", resolvedName})
	if err != nil {
		return nil, err
	}
	d := &Driver{}
	msgs, err := messages(ctx, d, p, untouched(p), sc, today)
	if err != nil {
		return nil, err
	}
	if err := callsOnce(ctx, d, sc, p, untouched(p), as.calls.Load); err != nil {
		return nil, err
	}
	call := hookCall{d: direct, hook: cpex.HTTPAuthResolveUser, payload: resolvePayload(p.x), pctx: pluginContext()}
	cmp, err := Compare(ctx, r.seq, exchangeOp(d, sc, p, untouched(p)),
		baselineOp(d, same, ps, untouched(ps), false, false, call), baselineOp(d, today, p, untouched(p), false, false, call))
	if err != nil {
		return nil, err
	}
	r.rep.Checks = append(r.rep.Checks, Check{Name: "resolve hook p50 / the same caller from Envoy-set headers + the hook's round trip",
		Ratio: cmp.Ratio(0, 1, MetricP50), Target: ResolveHookTarget})
	ms := fmt.Sprintf("%d/%d", msgs[0], msgs[1])
	return []identityRow{
		{name: "resolve hook, vs the same caller from Envoy-set headers + its round trip", cmp: cmp, a: 0, b: 1, msgs: ms},
		{name: "resolve hook, vs today (no caller) + its round trip", cmp: cmp, a: 0, b: 2, msgs: ms},
	}, nil
}

// resolvePayload is the http_auth_resolve_user payload of x, as the
// processor builds it.
func resolvePayload(x *Exchange) json.RawMessage {
	p := cpex.HTTPAuthResolveUserPayload{Headers: map[string]string{}}
	for _, h := range x.RequestHeaders {
		if !strings.HasPrefix(h.Key, ":") {
			p.Headers[h.Key] = h.Value
		}
	}
	if scheme, cred, ok := strings.Cut(p.Headers["authorization"], " "); ok {
		p.Credentials = &cpex.HTTPCredentials{Scheme: scheme, Credentials: cred}
	}
	b, _ := json.Marshal(p)
	return b
}
