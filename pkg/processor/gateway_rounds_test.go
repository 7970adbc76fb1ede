package processor_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// A round is one way a result reaches the client on another stream than its
// request's. It returns the outcome of that result and whether it reached
// the client through another replica than the request.
type round struct {
	name string
	run  func(g *gateway, n int) (string, bool)
}

// rounds need the endpoints of the gateway's two upstreams.
func rounds(tasks, replay string) []round {
	return []round{
		{"tasks/result (2025-11-25)", func(g *gateway, n int) (string, bool) { return taskResult(g, tasks, n) }},
		{"tasks/get (2026-07-28)", func(g *gateway, n int) (string, bool) { return taskGet(g, tasks, n) }},
		{"GET replay after a dropped POST", func(g *gateway, n int) (string, bool) { return droppedReplay(g, replay, n) }},
	}
}

// created returns the task id of a CreateTaskResult answering id.
func created(t *testing.T, a answer, id string) string {
	t.Helper()
	taskID, ok := attribution.CreatedTaskID(responsesOf(t, a)[id].Result)
	if !ok {
		t.Fatalf("not a CreateTaskResult: %q", a.Body)
	}
	return taskID
}

// taskResult: a session, a task-augmented tools/call, tasks/get until
// completed, then the tool's result as the answer to tasks/result.
func taskResult(g *gateway, endpoint string, n int) (string, bool) {
	t := g.t
	s := goSession(t, endpoint)
	marker := fmt.Sprintf("a secret %d tasks-2025", n) // unique: the exchange is found by it
	call := rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"research","arguments":{"topic":%q},"task":{"ttl":60000}}}`, marker), nil)
	taskID := created(t, call, "2")
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":%q}}`, taskID)
	for range 2 {
		outcomeOrStatus(t, "tasks/get", rpcDo(t, endpoint, http.MethodPost, s, get, nil))
	}
	res := rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, taskID), nil)
	return outcome(t, "tasks/result", res, "4"), g.replicaOf(marker) != g.replicaOf(`"id":4,"method":"tasks/result","params":{"taskId":"`+taskID)
}

// taskGet: MCP 2026-07-28 (no session), the tasks extension; the tool's
// result comes in a completed tasks/get.
func taskGet(g *gateway, endpoint string, n int) (string, bool) {
	t := g.t
	h := map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": mcpecho.TaskTool}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	marker := fmt.Sprintf("a secret %d tasks-2026", n) // unique: the exchange is found by it
	call := rpcDo(t, endpoint, http.MethodPost, h, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"research","arguments":{"topic":%q},%s}}`, marker, meta), nil)
	taskID := created(t, call, "1")
	h["Mcp-Method"] = "tasks/get"
	delete(h, "Mcp-Name")
	get := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q,%s}}`, id, taskID, meta)
	}
	outcomeOrStatus(t, "working tasks/get", rpcDo(t, endpoint, http.MethodPost, h, get(2), nil))
	res := rpcDo(t, endpoint, http.MethodPost, h, get(3), nil)
	completed := fmt.Sprintf(`"id":3,"method":"tasks/get","params":{"taskId":%q`, taskID)
	return outcome(t, "completed tasks/get", res, "3"), g.replicaOf(marker) != g.replicaOf(completed)
}

// droppedReplay: a tools/call whose POST the client drops after the
// priming event, resumed by a GET with Last-Event-ID.
func droppedReplay(g *gateway, endpoint string, n int) (string, bool) {
	t := g.t
	s := goSession(t, endpoint)
	marker := fmt.Sprintf("a secret %d replay", n) // unique: the exchange is found by it
	dropped := rpcDo(t, endpoint, http.MethodPost, s, echoRequest(2, marker), func(event) bool { return true })
	if len(dropped.Events) == 0 || dropped.Events[0].ID == "" {
		t.Fatalf("no priming event: %q", dropped.Body)
	}
	// The Go SDK server refuses a GET that resumes a stream it still
	// serves ("stream ID conflicts with ongoing stream", HTTP 400): the
	// dropped POST's handler may not have ended yet. Ask again then, as a
	// client would.
	first := g.replicaOf(marker)
	var get answer
	for range 100 {
		get = rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", dropped.Events[0].ID), "", nil)
		if !bytes.Contains(get.Body, []byte("conflicts with ongoing stream")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return outcome(t, "GET after a dropped POST", get, "2"), first != g.replicaOf("GET "+dropped.Events[0].ID)
}

// outcomeOrStatus checks an answer that carries no tool result (a task
// status): it must not hold the secret.
func outcomeOrStatus(t *testing.T, what string, a answer) {
	t.Helper()
	if containsSecret(a) {
		t.Fatalf("%s: BYPASS, the secret reached the client: %q", what, a.Body)
	}
}

// TestGatewayReplicas: results that reach the client through another
// replica than their request (tasks/result, a completed tasks/get, a GET
// replay after a dropped POST) get their post hook, whichever replica
// serves them, and none is refused that one replica would have attributed.
func TestGatewayReplicas(t *testing.T) {
	g := newGateway(t, 2*time.Second)
	all := rounds(g.front(&mcpecho.TaskServer{PollsToComplete: 1}), g.front(mcpecho.ResumableHandler()))
	crossed := map[string]int{}
	// Fake Envoy sends each stream to a replica at random: play at least
	// 8 rounds, and more (up to 64) until every kind crossed replicas once.
	uncrossed := func() bool {
		for _, r := range all {
			if crossed[r.name] == 0 {
				return true
			}
		}
		return false
	}
	for n := 0; n < 8 || n < 64 && uncrossed(); n++ {
		for _, r := range all {
			got, across := r.run(g, n)
			if got != hooked {
				t.Fatalf("%s, round %d (across replicas %v): %s, want the post hook", r.name, n, across, got)
			}
			if across {
				crossed[r.name]++
			}
		}
	}
	for _, r := range all {
		if crossed[r.name] == 0 {
			t.Errorf("%s: no round crossed replicas: the test proved nothing", r.name)
		}
	}
	t.Logf("rounds across replicas: %v", crossed)
}

// TestGatewayRedisDown: redis-server killed mid-run. Every request is
// answered (no hang); a result that should get its post hook gets it or is
// refused, never passes un-hooked (no bypass): it gets it when one replica
// served both its request and the result (the fallback is what a single
// sidecar does) and is refused when they were two; the stores count their
// fallbacks. Once redis-server is back on the same port, results across
// replicas get their post hooks again.
func TestGatewayRedisDown(t *testing.T) {
	g := newGateway(t, 500*time.Millisecond)
	all := rounds(g.front(&mcpecho.TaskServer{PollsToComplete: 1}), g.front(mcpecho.ResumableHandler()))
	n := 0
	// play runs every round once; want says which outcome a round must
	// have ("" : hooked or refused).
	play := func(want func(across bool) string) (refusals int) {
		for _, r := range all {
			got, across := r.run(g, n)
			n++
			if w := want(across); w != "" && got != w {
				t.Fatalf("%s, round %d (across replicas %v): %s, want %s", r.name, n, across, got, w)
			}
			if got == refused {
				refusals++
			}
		}
		return refusals
	}
	alwaysHooked := func(bool) string { return hooked }
	play(alwaysHooked)

	g.redis.Kill()
	before := g.obs.count()
	refusals := 0
	for range 4 {
		refusals += play(func(across bool) string {
			if across {
				return refused
			}
			return hooked
		})
	}
	if g.obs.count() == before {
		t.Error("redis-server down: no fallback counted")
	}
	t.Logf("results refused while redis-server was down: %d of %d", refusals, 4*len(all))

	if err := g.redis.Restart(); err != nil {
		t.Fatal(err)
	}
	g.waitStoresUp()
	for range 3 {
		play(alwaysHooked)
	}
}
