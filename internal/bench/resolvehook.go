package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// ResolveHookTarget bounds a sidecar with a resolve hook against today's
// tool call plus that hook's round trip made directly.
const ResolveHookTarget = Target

// resolveHookRow measures a sidecar with the policy plugin (at policyURL)
// and an http_auth_resolve_user plugin against today (the same policy
// alone) followed by the resolve call made directly.
func (r *runner) resolveHookRow(ctx context.Context, cl *closers, policyURL string, today *Endpoint) (identityRow, error) {
	auth := pluginserver.Func(pluginserver.Config{Name: "Auth", Hooks: []cpex.HookType{cpex.HTTPAuthResolveUser}},
		func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			return pluginserver.Modify("Auth", map[string]any{"email": "alice@acme.example", "full_name": "Alice", "is_admin": false, "is_active": true})
		})
	as, err := StartPlugin(auth)
	if err != nil {
		return identityRow{}, err
	}
	cl.add(as)
	cfg := SidecarConfig(0,
		PluginSpec{Name: "Policy", URL: policyURL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
		PluginSpec{Name: "Auth", URL: as.URL, Hooks: []cpex.HookType{cpex.HTTPAuthResolveUser}})
	sc, err := StartSidecar(ctx, "sidecar (resolve hook)", cfg)
	if err != nil {
		return identityRow{}, err
	}
	cl.add(sc)
	direct, err := DialDirect(ctx, as.URL, "Auth")
	if err != nil {
		return identityRow{}, err
	}
	cl.add(direct)
	x, err := ToolsCall()
	if err != nil {
		return identityRow{}, err
	}
	x.RequestHeaders = append(x.RequestHeaders, Header{"authorization", "Bearer 3q2+7wAAAAE.bench.token"})
	p := Prepare(x)
	ok := untouched(p)
	d := &Driver{}
	msgs, err := messages(ctx, d, p, ok, sc, today)
	if err != nil {
		return identityRow{}, err
	}
	if err := callsOnce(ctx, d, sc, p, ok, as.calls.Load); err != nil {
		return identityRow{}, err
	}
	call := hookCall{d: direct, hook: cpex.HTTPAuthResolveUser, payload: resolvePayload(x), pctx: pluginContext()}
	cmp, err := Compare(ctx, r.seq, exchangeOp(d, sc, p, ok), baselineOp(d, today, p, ok, false, false, call))
	if err != nil {
		return identityRow{}, err
	}
	r.rep.Checks = append(r.rep.Checks, Check{Name: "resolve hook p50 / today + its round trip", Ratio: cmp.Ratio(0, 1, MetricP50), Target: ResolveHookTarget})
	return identityRow{name: "resolve hook", cmp: cmp, a: 0, b: 1, msgs: fmt.Sprintf("%d/%d", msgs[0], msgs[1])}, nil
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
