package processor_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// gateway is the gateway shape in one test: two processors (two sidecar
// replicas, two gRPC listeners), each with its own Redis-backed store on one
// real redis-server, behind the strict fake Envoy, which sends each ext_proc
// stream to one of them at random. One plugin server (the words plugin) and
// one executor serve both.
type gateway struct {
	t      *testing.T
	h      *harness
	redis  *redistest.Server
	stores []*redisstore.Store
	obs    *fallbacks

	mu     sync.Mutex
	served []exchange // in the order they ended
}

// exchange is what reached the upstream through one replica.
type exchange struct {
	replica int
	text    string // method, Last-Event-ID and body of the upstream request
}

// fallbacks counts the stores' fallbacks.
type fallbacks struct {
	mu sync.Mutex
	n  int
}

func (f *fallbacks) StoreOp(string, time.Duration, error) {}
func (f *fallbacks) StoreFallback(string, string) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *fallbacks) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func newGateway(t *testing.T, opTimeout time.Duration) *gateway {
	t.Helper()
	g := &gateway{t: t, redis: redistest.Start(t), obs: &fallbacks{}}
	for range 2 {
		st, err := redisstore.New(redisstore.Options{Addrs: []string{g.redis.Addr()}, OpTimeout: opTimeout,
			Backoff: 20 * time.Millisecond, Observer: g.obs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		g.stores = append(g.stores, st)
	}
	words := plugintest.NewScripted("words")
	words.SetFunc(rewriteWords(secret))
	var snapshot func() *processor.Snapshot
	g.h = newHarnessWith(t, wordsConfig, harnessOptions{proc: func(o *processor.Options) {
		o.Attribution = g.stores[0]
		snapshot = o.Snapshot
	}}, words)
	second := processor.New(processor.Options{Snapshot: snapshot, WithHeaders: pluginclient.WithHeaders, Attribution: g.stores[1]})
	g.h.filter.Clients = []extprocv3.ExternalProcessorClient{g.h.filter.Client, serve(t, second)}
	return g
}

// front serves upstream behind the fake Envoy and returns the MCP endpoint.
func (g *gateway) front(upstream http.Handler) string {
	up := httptest.NewServer(upstream)
	u, err := url.Parse(up.URL)
	if err != nil {
		g.t.Fatal(err)
	}
	p := &envoytest.Proxy{Filter: g.h.filter, Upstream: u, Observe: func(r *envoytest.Result, _ error) {
		if r == nil || r.UpstreamRequest == nil {
			return
		}
		ur := r.UpstreamRequest
		g.mu.Lock()
		g.served = append(g.served, exchange{r.Server, ur.Method + " " + ur.Headers.Get("Last-Event-Id") + " " + string(ur.Body)})
		g.mu.Unlock()
	}}
	fr := httptest.NewServer(p)
	g.t.Cleanup(func() {
		fr.Close()
		p.CloseIdleConnections()
		up.Close()
	})
	return fr.URL + "/mcp"
}

// waitStoresUp returns once every store reached Redis again: a lookup of
// an unknown id on it adds no fallback. Recovery is not at once: a store
// leaves Redis alone for its Backoff, and go-redis, after PoolSize failed
// dials, answers its last dial error until its own probe (once a second)
// connects.
func (g *gateway) waitStoresUp() {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i, st := range g.stores {
		for {
			before := g.obs.count()
			_, err := st.Lookup(g.t.Context(), "probe", []byte(`"probe"`))
			if !errors.Is(err, attribution.ErrUnknown) {
				g.t.Fatalf("store %d: probe lookup: %v, want ErrUnknown", i, err)
			}
			if g.obs.count() == before {
				break
			}
			if time.Now().After(deadline) {
				g.t.Fatalf("store %d: Redis not reached 10 s after redis-server came back", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// replicaOf returns the replica that served the last exchange whose
// upstream request holds marker (waiting a little: an exchange is noted
// when its handler ends, which may be after the client read the answer).
func (g *gateway) replicaOf(marker string) int {
	g.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		for i := len(g.served) - 1; i >= 0; i-- {
			if ex := g.served[i]; strings.Contains(ex.text, marker) {
				g.mu.Unlock()
				return ex.replica
			}
		}
		g.mu.Unlock()
	}
	g.t.Fatalf("no exchange carried %q", marker)
	return -1
}

// Outcomes of a result that should get its post hook.
const (
	hooked  = "hooked"  // rewritten by the post hook
	refused = "refused" // unattributable, refused (unattributed_responses: refuse)
)

// outcome classifies the response with id: hooked, refused, or it fails the
// test (a bypass: the secret reached the client; or anything else).
func outcome(t *testing.T, what string, a answer, id string) string {
	t.Helper()
	if containsSecret(a) {
		t.Fatalf("%s: BYPASS, the secret reached the client: %q", what, a.Body)
	}
	r, ok := responsesOf(t, a)[id]
	switch {
	case ok && r.Error != nil && bytes.Contains([]byte(r.Error.Message), []byte("cannot be matched")):
		return refused
	case ok && bytes.Contains(r.Result, []byte(rewritten)):
		return hooked
	}
	t.Fatalf("%s: response %s = %+v, want a rewritten result or a refusal; body %q", what, id, r, a.Body)
	return ""
}

// containsSecret reports whether the client got the secret unrewritten.
func containsSecret(a answer) bool { return bytes.Contains(a.Body, []byte(secret)) }
