package processor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/ruleset"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// listMemoConfig is the 20 rules of the budgets, with the caller's
// user and roles in headers Envoy sets (x-user, x-roles).
const listMemoConfig = "plugins: []\nextproc:\n  mcp_paths: [/mcp]\n" +
	"  identity:\n    sources:\n      - headers: {set_by_envoy: true, user: x-user, roles: x-roles}\n"

// memoNames are the items of the lists the memo tests answer: under the
// 20 rules, an admin sees all but the ops_tool_ ones, an ops caller all
// but the admin_ ones.
var memoNames = func() []string {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("admin_%d", i))
	}
	for i := range 8 {
		names = append(names, fmt.Sprintf("ops_tool_%d", i))
	}
	for i := range 30 {
		names = append(names, fmt.Sprintf("tool_%d", i))
	}
	return names
}()

// without returns names without those starting with prefix.
func without(names []string, prefix string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// listAnswer is the JSON answer to request id 2 of a list result whose
// members (e.g. "tools") hold items of the names given, described so that
// the answer is over minListMemoBody when it has a few dozen; tag changes
// every description.
func listAnswer(t testing.TB, tag string, members map[string][]string) string {
	t.Helper()
	result := map[string]any{}
	for key, names := range members {
		items := make([]map[string]any, len(names))
		for i, n := range names {
			items[i] = map[string]any{"name": n, "description": "Does " + n + " to the target and reports what changed." + tag,
				"inputSchema": map[string]any{"type": "object"}}
		}
		result[key] = items
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "result": result})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// caller is who sends an exchange of the memo tests: x-user and x-roles.
type caller struct{ user, roles string }

var (
	memoAdmin = caller{"alice", "admin"}
	memoOps   = caller{"bob", "ops"}
)

// listExchange is method (a list) sent by c, answered with the chunks of
// answer (one: a JSON answer; more: an SSE answer in those chunks).
func listExchange(c caller, method string, answer ...string) budgetExchange {
	body := `{"jsonrpc":"2.0","id":2,"method":"` + method + `","params":{}}`
	ct := "application/json"
	if len(answer) > 1 {
		ct = "text/event-stream"
	}
	return budgetExchange{
		reqHeaders:  append(mcpHeaders(body), "x-user", c.user, "x-roles", c.roles),
		reqBody:     body,
		respHeaders: []string{":status", "200", "content-type", ct},
		respBody:    answer,
	}
}

// listedNames returns the names of the items of member key of the list
// result in answer (a JSON-RPC response), or of the one SSE event of
// answer that has a result.
func listedNames(t *testing.T, answer []byte, key string) []string {
	t.Helper()
	if bytes.HasPrefix(answer, []byte("event:")) || bytes.HasPrefix(answer, []byte("data:")) {
		var data []byte
		for ev := range bytes.SplitSeq(answer, []byte("\n\n")) {
			for line := range bytes.SplitSeq(ev, []byte("\n")) {
				if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(d, []byte(`"result"`)) {
					data = d
				}
			}
		}
		answer = data
	}
	var m struct {
		Result map[string][]struct {
			Name string `json:"name"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &m); err != nil {
		t.Fatalf("answer %.200q: %v", answer, err)
	}
	var names []string
	for _, it := range m.Result[key] {
		names = append(names, it.Name)
	}
	return names
}

// memoStep is one exchange of TestListMemo and what the client must get.
type memoStep struct {
	x budgetExchange
	// key is the list's member whose names the client must get: want. With
	// refused, the answer must be a JSON-RPC error instead.
	key     string
	want    []string
	refused bool
}

// clientGets returns what the client got of r, an exchange of x: the
// answer as rewritten, or as the server sent it.
func clientGets(r *budgetResult, x budgetExchange) []byte {
	switch {
	case r.streamed != nil:
		return r.streamed
	case r.answer != nil:
		return r.answer
	}
	return []byte(strings.Join(x.respBody, ""))
}

// TestListMemo: each case's exchanges in order through one rig (one
// Server's memo): what each client gets, and how many answers the
// Observer was told came from the memo and were read anew (ListRead). An
// answer served from the memo is the same bytes the parse gave.
func TestListMemo(t *testing.T) {
	a := listAnswer(t, "", map[string][]string{"tools": memoNames})
	b := listAnswer(t, " Also.", map[string][]string{"tools": memoNames})
	both := listAnswer(t, "", map[string][]string{"tools": memoNames, "prompts": memoNames})
	small := listAnswer(t, "", map[string][]string{"tools": {"admin_0", "tool_0"}})
	// Valid JSON but not JSON-RPC: a duplicate member.
	dup := strings.Replace(a, `"jsonrpc":"2.0"`, `"jsonrpc":"2.0","jsonrpc":"2.0"`, 1)
	// An SSE answer whose list event spans two chunks (so its bytes are in
	// the decoder's buffers), followed by notifications that do too: the
	// decoder reuses those buffers for them.
	note := func(c string) string {
		return "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"" +
			strings.Repeat(c, 400) + "\"}}\n\n"
	}
	e1, e2, e3 := "event: message\ndata: "+a+"\n\n", note("x"), note("y")
	sse := []string{e1[:100], e1[100:] + e2[:100], e2[100:] + e3[:100], e3[100:]}
	if len(a) < minListMemoBody || len(small) >= minListMemoBody {
		t.Fatalf("answers of %d and %d bytes: on the wrong sides of %d", len(a), len(small), minListMemoBody)
	}

	adminView, opsView := without(memoNames, "ops_tool_"), without(memoNames, "admin_")
	tools := func(c caller, answer ...string) budgetExchange { return listExchange(c, "tools/list", answer...) }
	for _, tc := range []struct {
		name       string
		steps      []memoStep
		memo, scan int64 // ListRead counts: parses from the memo, and read anew
	}{
		{name: "the same answer twice: the second from the memo", steps: []memoStep{
			{x: tools(memoOps, a), key: "tools", want: opsView},
			{x: tools(memoOps, a), key: "tools", want: opsView},
		}, memo: 1, scan: 1},
		{name: "the same answer to other callers: each its view", steps: []memoStep{
			{x: tools(memoOps, a), key: "tools", want: opsView},
			{x: tools(memoAdmin, a), key: "tools", want: adminView},
			{x: tools(memoOps, a), key: "tools", want: opsView},
		}, memo: 2, scan: 1},
		{name: "two answers: never one entry", steps: []memoStep{
			{x: tools(memoOps, a), key: "tools", want: opsView},
			{x: tools(memoOps, b), key: "tools", want: opsView},
			{x: tools(memoOps, a), key: "tools", want: opsView},
			{x: tools(memoOps, b), key: "tools", want: opsView},
		}, memo: 2, scan: 2},
		{name: "the same bytes awaited as another list: not its parse", steps: []memoStep{
			{x: tools(memoOps, both), key: "tools", want: opsView},
			{x: listExchange(memoOps, "prompts/list", both), key: "prompts", want: opsView},
			{x: listExchange(memoOps, "prompts/list", both), key: "prompts", want: opsView},
		}, memo: 1, scan: 2},
		{name: "an answer that does not parse: refused each time", steps: []memoStep{
			{x: tools(memoOps, dup), refused: true},
			{x: tools(memoOps, dup), refused: true},
		}, scan: 2},
		{name: "a small answer: not remembered", steps: []memoStep{
			{x: tools(memoOps, small), key: "tools", want: []string{"tool_0"}},
			{x: tools(memoOps, small), key: "tools", want: []string{"tool_0"}},
		}},
		{name: "an SSE answer: the second from the memo", steps: []memoStep{
			{x: tools(memoOps, sse...), key: "tools", want: opsView},
			{x: tools(memoOps, sse...), key: "tools", want: opsView},
			{x: tools(memoAdmin, sse...), key: "tools", want: adminView},
		}, memo: 2, scan: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newBudgetRig(t, listMemoConfig+ruleset.Twenty())
			reads := &listReads{}
			rig.opts.Observer = reads
			rig.record = true
			got := map[string][]byte{} // by answer and caller: the first seen
			for i, s := range tc.steps {
				res, err := rig.exchange(rig.prepare(t, s.x))
				if err != nil {
					t.Fatalf("exchange %d: %v", i, err)
				}
				if res.immediate != nil {
					t.Fatalf("exchange %d refused: %s", i, res.immediate.GetBody())
				}
				out := bytes.Clone(clientGets(res, s.x))
				res.sent()
				if s.refused {
					if !bytes.Contains(out, []byte(`"error"`)) || !bytes.Contains(out, []byte("cannot be inspected")) {
						t.Errorf("exchange %d: client got %.300s, want the answer refused", i, out)
					}
					continue
				}
				if names := listedNames(t, out, s.key); !slices.Equal(names, s.want) {
					t.Errorf("exchange %d: client got %v, want %v", i, names, s.want)
				}
				k := strings.Join(s.x.respBody, "") + "\x00" + s.x.reqHeaders[len(s.x.reqHeaders)-1] + s.x.reqBody
				if first, ok := got[k]; ok && !bytes.Equal(out, first) {
					t.Errorf("exchange %d: client got %.300s, the same exchange before got %.300s", i, out, first)
				} else if !ok {
					got[k] = out
				}
			}
			if m, s := reads.memo.Load(), reads.scan.Load(); m != tc.memo || s != tc.scan {
				t.Errorf("%d answers served from the memo, %d read anew; want %d, %d", m, s, tc.memo, tc.scan)
			}
		})
	}
}

// TestListMemoShared: an admin and an ops caller read the same remembered
// list at once (run with -race: neither writes what the other reads),
// each gets its own view, and the remembered parse is unchanged after.
func TestListMemoShared(t *testing.T) {
	answer := listAnswer(t, "", map[string][]string{"tools": memoNames})
	rig := newBudgetRig(t, listMemoConfig+ruleset.Twenty())
	reads := &listReads{}
	rig.opts.Observer = reads
	callers := []struct {
		c    caller
		want []string
	}{{memoAdmin, without(memoNames, "ops_tool_")}, {memoOps, without(memoNames, "admin_")}}
	run := func(t *testing.T, c caller, want []string, n int) {
		x := listExchange(c, "tools/list", answer)
		ex := rig.prepare(t, x)
		for i := range n {
			res, err := rig.exchange(ex)
			if err != nil {
				t.Errorf("%s, exchange %d: %v", c.user, i, err)
				return
			}
			if names := listedNames(t, clientGets(res, x), "tools"); !slices.Equal(names, want) {
				t.Errorf("%s, exchange %d: got %v, want %v", c.user, i, names, want)
			}
			res.sent()
		}
	}
	run(t, memoOps, callers[1].want, 1) // remembers the answer
	keys := mcpmsg.ListKeys{Items: "tools", Name: "name"}
	shared, ok := rig.lists.memo.Get([]byte(answer), nil)
	if !ok || shared.keys != keys {
		t.Fatalf("answer not remembered: %+v, %v", shared, ok)
	}
	const rounds = 50
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() { run(t, c.c, c.want, rounds) })
	}
	wg.Wait()
	if m, s := reads.memo.Load(), reads.scan.Load(); m != 2*rounds || s != 1 {
		t.Errorf("%d answers served from the memo, %d read anew; want %d, 1", m, s, 2*rounds)
	}
	fresh, err := mcpmsg.ParseList([]byte(answer), keys)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared.body, fresh) {
		t.Error("the remembered parse changed while streams read it")
	}
}

// listReads counts what the Observer is told of list answers read
// (ListRead), safe for concurrent streams.
type listReads struct {
	nopObserver
	memo, scan atomic.Int64
}

func (o *listReads) ListRead(from string) {
	switch from {
	case "memo":
		o.memo.Add(1)
	case "scan":
		o.scan.Add(1)
	}
}
