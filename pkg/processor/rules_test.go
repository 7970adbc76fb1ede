package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// The rules of these tests: one by role, one by tool prefix, one on an
// argument. Callers prove their roles with a JWT that the fake Envoy's
// jwt_authn (Proxy.Info) verified.
const rulesConfig = `plugins: []
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload, claims: {roles: roles}}
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && !("admin" in identity.roles)'
      message: only admins may delete files
    - name: ops-only
      deny: 'mcp.name.startsWith("ops_") && !("ops" in identity.roles)'
    - name: public-read
      deny: 'mcp.name == "read_file" && !mcp.arguments.path.startsWith("/public/")'
`

// ruleTools are the MCP server's tools, served 3 to a page.
var ruleTools = []string{"echo", "delete_file", "read_file", "ops_restart", "ops_drain", "status", "search"}

// rulesServer is a real Go SDK MCP server with ruleTools, paginated.
func rulesServer(jsonResponse bool) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "rules", Version: "1"}, &mcp.ServerOptions{PageSize: 3})
	for _, name := range ruleTools {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "The " + name + " tool."},
			func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done"}}}, nil, nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse, EventStore: mcp.NewMemoryEventStore(nil)})
}

// rolesByToken is what jwt_authn verified for each bearer token.
var rolesByToken = map[string][]any{"admin-token": {"admin", "ops"}, "dev-token": {"dev"}}

// jwtInfo plays jwt_authn: a known bearer token's payload in dynamic
// metadata; an unknown or missing one, nothing.
func jwtInfo(r *http.Request) *envoytest.StreamInfo {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	roles, ok := rolesByToken[token]
	if !ok {
		return nil
	}
	payload, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{"sub": strings.TrimSuffix(token, "-token"), "roles": roles}})
	if err != nil {
		panic(err)
	}
	return &envoytest.StreamInfo{DynamicMetadata: map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": payload}}
}

// decisions collects what Envoy kept in the mcp_extproc namespace, per
// exchange.
type decisions struct {
	mu  sync.Mutex
	all []map[string]any
}

func (d *decisions) observe(res *envoytest.Result, _ error) {
	if res == nil {
		return
	}
	if ns := res.DynamicMetadata[processor.MetadataNamespace]; ns != nil {
		d.mu.Lock()
		d.all = append(d.all, ns.AsMap())
		d.mu.Unlock()
	}
}

func (d *decisions) find(name, decision string) map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.all {
		if got, _ := m["name"].(string); got == name && m["decision"] == decision {
			return m
		}
	}
	return nil
}

// rulesFront serves upstream behind the fake Envoy with jwt_authn in
// front and mcp_extproc among the receiving namespaces.
func rulesFront(t *testing.T, upstream http.Handler, mods ...func(*envoytest.Proxy)) (string, *decisions) {
	return rulesFrontWith(t, upstream, harnessOptions{}, mods...)
}

// rulesFrontWith is rulesFront with the harness options ho.
func rulesFrontWith(t *testing.T, upstream http.Handler, ho harnessOptions, mods ...func(*envoytest.Proxy)) (string, *decisions) {
	h := newHarnessWith(t, rulesConfig, ho)
	h.filter.Forwarding = envoytest.Forwarding{
		MetadataNamespaces:  []string{"envoy.filters.http.jwt_authn", envoytest.MCPFilterNamespace},
		ReceivingNamespaces: []string{processor.MetadataNamespace},
	}
	up := httptest.NewServer(upstream)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := &decisions{}
	p := &envoytest.Proxy{Filter: h.filter, Upstream: u, Info: jwtInfo, Observe: d.observe}
	for _, mod := range mods {
		mod(p)
	}
	fr := httptest.NewServer(p)
	t.Cleanup(func() {
		fr.Close()
		p.CloseIdleConnections()
		up.Close()
	})
	return fr.URL + "/mcp", d
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectAs(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	return connectAsVersion(t, endpoint, token, "")
}

// connectAsVersion is connectAs asking for protocol version ("": the
// SDK's latest).
func connectAsVersion(t *testing.T, endpoint, token, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "rules-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}},
		DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect as %s: %v", token, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listedTools walks every page of tools/list.
func listedTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// TestRulesEndToEnd: through the strict fake Envoy to a real MCP server,
// as JSON and as SSE: each caller's tools/list shows only its tools on
// every page; a hidden tool called by name is refused with the rule's
// name; the argument rule refuses one call and allows another; the
// decision reaches Envoy's dynamic metadata.
func TestRulesEndToEnd(t *testing.T) {
	for _, mode := range []struct {
		name string
		json bool
	}{{"json", true}, {"sse", false}} {
		t.Run(mode.name, func(t *testing.T) {
			endpoint, d := rulesFront(t, rulesServer(mode.json))
			admin, dev := connectAs(t, endpoint, "admin-token"), connectAs(t, endpoint, "dev-token")

			if got := listedTools(t, admin); !slices.Equal(got, sortedTools()) {
				t.Errorf("admin sees %v, want every tool %v", got, sortedTools())
			}
			want := []string{"echo", "read_file", "search", "status"}
			if got := listedTools(t, dev); !slices.Equal(got, want) {
				t.Errorf("dev sees %v, want %v", got, want)
			}

			_, err := callTool(t, dev, "delete_file", map[string]any{"path": "/tmp/x"})
			if err == nil || !strings.Contains(err.Error(), "only admins may delete files") {
				t.Errorf("dev calling the hidden delete_file: %v, want the rule's message", err)
			}
			_, err = callTool(t, dev, "ops_restart", map[string]any{})
			if err == nil || !strings.Contains(err.Error(), "ops-only") {
				t.Errorf("dev calling the hidden ops_restart: %v, want the rule's name", err)
			}
			if res, err := callTool(t, admin, "delete_file", map[string]any{"path": "/tmp/x"}); err != nil || res.IsError {
				t.Errorf("admin calling delete_file: %v %+v", err, res)
			}

			if res, err := callTool(t, dev, "read_file", map[string]any{"path": "/public/readme"}); err != nil || res.IsError {
				t.Errorf("read_file /public/readme: %v %+v", err, res)
			}
			if _, err := callTool(t, dev, "read_file", map[string]any{"path": "/etc/passwd"}); err == nil || !strings.Contains(err.Error(), "public-read") {
				t.Errorf("read_file /etc/passwd: %v, want refused by public-read", err)
			}
			if _, err := callTool(t, dev, "read_file", map[string]any{}); err == nil || !strings.Contains(err.Error(), "public-read") {
				t.Errorf("read_file without a path: %v, want refused (the rule fails, which denies)", err)
			}

			blocked := d.find("delete_file", "blocked")
			if blocked == nil || blocked["decided_by"] != "admins-delete" || blocked["decided_by_type"] != "rule" ||
				blocked["user"] != "dev" || blocked["method"] != "tools/call" {
				t.Errorf("decision metadata of the refused call: %v (all: %v)", blocked, d.all)
			}
			if allowed := d.find("delete_file", "allowed"); allowed == nil || allowed["user"] != "admin" {
				t.Errorf("decision metadata of the allowed call: %v", allowed)
			}
			if listed := d.find("", "modified"); listed == nil || listed["method"] != "tools/list" {
				t.Errorf("decision metadata of a filtered list: %v", listed)
			}
		})
	}
}

func sortedTools() []string {
	s := slices.Clone(ruleTools)
	slices.Sort(s)
	return s
}

// TestRulesFilterReplayedList: a tools/list answer replayed on a GET that
// resumes its stream (Last-Event-ID) is filtered like the POST's.
func TestRulesFilterReplayedList(t *testing.T) {
	endpoint, _ := rulesFront(t, rulesServer(false))
	s := goSession(t, endpoint) // no token: no roles
	post := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
	checkListed(t, "POST", post, "2")
	if len(post.Events) < 2 || post.Events[0].ID == "" {
		t.Fatalf("POST events %+v: want a priming event first", post.Events)
	}
	get := rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", post.Events[0].ID), "", nil)
	checkListed(t, "GET replay", get, "2")
}

// checkListed fails unless the answer with id lists the first page
// without the tools a caller with no roles may not call.
func checkListed(t *testing.T, what string, a answer, id string) {
	t.Helper()
	r, ok := responsesOf(t, a)[id]
	if !ok {
		t.Fatalf("%s: no answer %s in %q", what, id, a.Body)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("%s: %v in %s", what, err, r.Result)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	// The first page is delete_file, echo, ops_drain: only echo may be called.
	if !slices.Equal(names, []string{"echo"}) || res.NextCursor == "" {
		t.Errorf("%s: tools %v, next cursor %q; want [echo] and a cursor", what, names, res.NextCursor)
	}
}

// rulesHarness is the harness of rulesConfig with jwt_authn's metadata
// forwarded; callAs sends body as the caller of token.
func rulesHarness(t *testing.T) (*harness, func(token, body string, up envoytest.Upstream, kv ...string) *envoytest.Result) {
	return rulesHarnessOf(t, rulesConfig)
}

// rulesHarnessOf is rulesHarness with the config yaml.
func rulesHarnessOf(t *testing.T, yaml string) (*harness, func(token, body string, up envoytest.Upstream, kv ...string) *envoytest.Result) {
	h := newHarness(t, yaml)
	h.filter.Forwarding = envoytest.Forwarding{
		MetadataNamespaces:  []string{"envoy.filters.http.jwt_authn"},
		ReceivingNamespaces: []string{processor.MetadataNamespace},
	}
	return h, func(token, body string, up envoytest.Upstream, kv ...string) *envoytest.Result {
		req := mcpPost(body, kv...)
		if info := jwtInfo(&http.Request{Header: http.Header{"Authorization": {"Bearer " + token}}}); info != nil {
			req.Info = *info
		}
		return h.do(req, up)
	}
}

const threeTools = `{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"echo"},{"name":"delete_file"},{"name":"ops_drain"}],"nextCursor":"c2"}}`

// TestRulesListMessages: with MCP 2026-07-28 headers naming tools/list,
// the answer is read only when the rules may hide something from the
// caller; without them (2025-11-25) a request may be a list, so its
// response headers are read, and its body only when it was one.
func TestRulesListMessages(t *testing.T) {
	_, callAs := rulesHarness(t)
	list := `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`
	h26 := []string{"Mcp-Protocol-Version", v26, "Mcp-Method", "tools/list"}
	for _, tc := range []struct {
		name, token, body string
		kv                []string
		up                string
		msgs              int // ext_proc messages
		want              string
	}{
		{"2026 list, admin: nothing to hide, not read", "admin-token", list, h26, threeTools, 2, threeTools},
		{"2026 list, dev: filtered", "dev-token", list, h26, threeTools, 4,
			`{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"echo"}],"nextCursor":"c2"}}`},
		{"2025 list, admin: read, nothing hidden", "admin-token", list, nil, threeTools, 4, threeTools},
		{"2025 tools/call: response headers only", "dev-token", echoCall, nil, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`, 3,
			`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callAs(tc.token, tc.body, jsonUpstream(http.StatusOK, tc.up), tc.kv...)
			if string(res.Body) != tc.want {
				t.Errorf("client got %s, want %s", res.Body, tc.want)
			}
			if len(res.Sent) != tc.msgs {
				t.Errorf("%d ext_proc messages, want %d", len(res.Sent), tc.msgs)
			}
		})
	}
}

// TestRulesRefusals: in a batch, a denied element refuses the batch; a list result the filter
// cannot read is refused, never passed; a rule refuses before any plugin
// is asked.
func TestRulesRefusals(t *testing.T) {
	_, callAs := rulesHarness(t)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file","arguments":{}}}]`
	res := callAs("dev-token", batch, noUpstream(t))
	if res.Status != http.StatusOK || !strings.Contains(string(res.Body), "only admins may delete files") ||
		!strings.Contains(string(res.Body), "not executed") {
		t.Errorf("batch with a denied element: %d %s", res.Status, res.Body)
	}
	bad := `{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"echo","name":"delete_file"}]}}`
	res = callAs("dev-token", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, jsonUpstream(http.StatusOK, bad))
	if strings.Contains(string(res.Body), "delete_file") || !strings.Contains(string(res.Body), `"error"`) {
		t.Errorf("ambiguous list result: %s, want an error and no delete_file", res.Body)
	}
}

// TestRulesSeeRequestHeaders: request.headers holds the request's headers
// by lower-case name, and the credentials only with allow_credential_headers.
func TestRulesSeeRequestHeaders(t *testing.T) {
	const rulesYAML = `plugins: []
extproc:
  rules:
    - name: banned-client
      deny: '"x-client" in request.headers && request.headers["x-client"] == "banned"'
    - name: sees-credentials
      deny: 'has(request.headers.authorization) || has(request.headers.cookie)'
`
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)
	h := newHarness(t, rulesYAML)
	if res := h.do(mcpPost(echoCall, "X-Client", "banned"), noUpstream(t)); !strings.Contains(string(res.Body), "banned-client") {
		t.Errorf("x-client: banned: %s, want refused by banned-client", res.Body)
	}
	if res := h.do(mcpPost(echoCall, "X-Client", "ok", "Authorization", "Bearer t", "Cookie", "a=1"), up); res.Immediate {
		t.Errorf("credentials reached the rules: %s", res.Body)
	}
	withCreds := newHarness(t, rulesYAML+"  allow_credential_headers: true\n")
	if res := withCreds.do(mcpPost(echoCall, "Cookie", "a=1"), noUpstream(t)); !strings.Contains(string(res.Body), "sees-credentials") {
		t.Errorf("allow_credential_headers: %s, want the cookie seen", res.Body)
	}
}

// TestRulesReferencedItems: completion/complete of a prompt or a resource
// template and resources/subscribe (and unsubscribe) of a resource are
// denied what the rules hide of that prompt or resource; the others reach
// the server.
func TestRulesReferencedItems(t *testing.T) {
	const yaml = `plugins: []
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload, claims: {roles: roles}}
  rules:
    - name: admin-prompts
      deny: 'mcp.method == "prompts/get" && mcp.name.startsWith("admin_") && !("admin" in identity.roles)'
    - name: private-files
      deny: 'mcp.method == "resources/read" && mcp.name.startsWith("file:///private/")'
`
	_, callAs := rulesHarnessOf(t, yaml)
	ok := `{"jsonrpc":"2.0","id":1,"result":{}}`
	for _, tc := range []struct {
		name, token, body, rule string // rule "": reaches the server
	}{
		{"complete a hidden prompt", "dev-token", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"admin_report"},"argument":{"name":"a","value":"b"}}}`, "admin-prompts"},
		{"complete it as admin", "admin-token", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"admin_report"},"argument":{"name":"a","value":"b"}}}`, ""},
		{"complete another prompt", "dev-token", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greeting"},"argument":{"name":"a","value":"b"}}}`, ""},
		{"complete a hidden template", "admin-token", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///private/{name}"},"argument":{"name":"name","value":"x"}}}`, "private-files"},
		{"subscribe to a hidden resource", "admin-token", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///private/keys"}}`, "private-files"},
		{"unsubscribe from it", "dev-token", `{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"uri":"file:///private/keys"}}`, "private-files"},
		{"subscribe to another resource", "dev-token", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///public/news"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := jsonUpstream(http.StatusOK, ok)
			if tc.rule != "" {
				up = noUpstream(t)
			}
			res := callAs(tc.token, tc.body, up)
			switch {
			case tc.rule == "" && string(res.Body) != ok:
				t.Errorf("got %d %s, want the server's answer", res.Status, res.Body)
			case tc.rule != "" && !strings.Contains(string(res.Body), "denied by rule "+tc.rule):
				t.Errorf("got %d %s, want a denial by %s", res.Status, res.Body, tc.rule)
			}
		})
	}
}

// TestReplayedListFilteredForItsCaller: a tools/list answer replayed on a
// GET that resumes its stream (Last-Event-ID) is filtered for the caller
// of that GET, whether the rules read the verified identity or the
// request's headers: an admin's replay is whole, a guest's filtered, also
// after the POST was dropped at its priming event.
func TestReplayedListFilteredForItsCaller(t *testing.T) {
	const headerRules = `plugins: []
extproc:
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && request.headers["x-role"] != "admin"'
    - name: ops-only
      deny: 'mcp.name.startsWith("ops_") && request.headers["x-role"] != "admin"'
`
	headerFront := func(t *testing.T) string { return newHarness(t, headerRules).front(rulesServer(false)) }
	jwtFront := func(t *testing.T) string { endpoint, _ := rulesFront(t, rulesServer(false)); return endpoint }
	for _, tc := range []struct {
		name         string
		front        func(*testing.T) string
		admin, guest []string // request headers of each caller
	}{
		{"request.headers", headerFront, []string{"X-Role", "admin"}, []string{"X-Role", "guest"}},
		{"jwt identity", jwtFront, []string{"Authorization", "Bearer admin-token"}, []string{"Authorization", "Bearer dev-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := tc.front(t)
			s := goSession(t, endpoint)
			for _, dropped := range []bool{false, true} {
				var stop func(event) bool
				if dropped {
					stop = func(event) bool { return true }
				}
				id := 2
				if dropped {
					id = 3
				}
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
				post := rpcDo(t, endpoint, http.MethodPost, with(s, tc.admin...), body, stop)
				if len(post.Events) == 0 || post.Events[0].ID == "" {
					t.Fatalf("POST: %q, want a primed event stream", post.Body)
				}
				if !dropped {
					checkWhole(t, "admin's POST", post, fmt.Sprint(id))
				}
				replay := func(caller []string) answer {
					return resumeAfterDrop(t, endpoint, with(s, append([]string{"Last-Event-ID", post.Events[0].ID}, caller...)...))
				}
				checkWhole(t, fmt.Sprintf("admin's GET replay (dropped %v)", dropped), replay(tc.admin), fmt.Sprint(id))
				checkListed(t, fmt.Sprintf("guest's GET replay (dropped %v)", dropped), replay(tc.guest), fmt.Sprint(id))
			}
		})
	}
}

// checkWhole fails unless the answer with id lists the first page whole:
// delete_file, echo, ops_drain.
func checkWhole(t *testing.T, what string, a answer, id string) {
	t.Helper()
	r, ok := responsesOf(t, a)[id]
	if !ok {
		t.Fatalf("%s: no answer %s in %q", what, id, a.Body)
	}
	for _, name := range []string{"delete_file", "echo", "ops_drain"} {
		if !strings.Contains(string(r.Result), `"name":"`+name+`"`) {
			t.Errorf("%s: %s missing from %s", what, name, r.Result)
		}
	}
}

// TestFilteredListsArePrivate: a list the rules read for a caller says
// "cacheScope":"private", so no shared cache serves one caller's view to
// another: a 2026-07-28 list with hidden items, an admin's whole list the
// rules read, and a real Go SDK server's list (which says "public").
func TestFilteredListsArePrivate(t *testing.T) {
	_, callAs := rulesHarness(t)
	list := `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`
	h26 := []string{"Mcp-Protocol-Version", v26, "Mcp-Method", "tools/list"}
	public := `{"jsonrpc":"2.0","id":5,"result":{"ttlMs":60000,"cacheScope":"public","tools":[{"name":"echo"},{"name":"delete_file"}]}}`
	for _, tc := range []struct {
		name, token string
		kv          []string
		want        string
	}{
		{"2026 list, dev: filtered", "dev-token", h26,
			`{"jsonrpc":"2.0","id":5,"result":{"ttlMs":60000,"cacheScope":"private","tools":[{"name":"echo"}]}}`},
		{"2025 list, admin: read, nothing hidden", "admin-token", nil,
			`{"jsonrpc":"2.0","id":5,"result":{"ttlMs":60000,"cacheScope":"private","tools":[{"name":"echo"},{"name":"delete_file"}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := callAs(tc.token, list, jsonUpstream(http.StatusOK, public), tc.kv...); string(res.Body) != tc.want {
				t.Errorf("client got %s, want %s", res.Body, tc.want)
			}
		})
	}
	t.Run("Go SDK server", func(t *testing.T) {
		endpoint, _ := rulesFront(t, rulesServer(true))
		s := goSession(t, endpoint)
		r := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil))["2"]
		if !strings.Contains(string(r.Result), `"cacheScope":"private"`) || strings.Contains(string(r.Result), `"public"`) {
			t.Errorf("filtered list %s: want cacheScope private", r.Result)
		}
	})
}
