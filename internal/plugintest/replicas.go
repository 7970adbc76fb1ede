package plugintest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// ReplicaPlugin is the name of the plugin every replica serves.
const ReplicaPlugin = "Replica"

// maxErrorSamples is how many call errors a ReplicaResult keeps.
const maxErrorSamples = 5

// Invoker is the plugin client under test (pluginclient.Pool has this
// method).
type Invoker interface {
	Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
}

// ReplicaLoad describes a load run: callers invoking a hook of
// ReplicaPlugin, served by replicas behind a [Balancer].
type ReplicaLoad struct {
	// Replicas is the number of plugin servers (default 2).
	Replicas int
	// Callers is the number of concurrent callers (default 20).
	Callers int
	// CallsPerCaller is how many calls each caller makes (default 50),
	// unless Duration is set.
	CallsPerCaller int
	// Duration, if positive, makes callers call until it has elapsed.
	Duration time.Duration
	// Server configures every replica (nil: stateful defaults).
	Server *pluginserver.Options
	// Flavour is how replicas answer unknown sessions.
	Flavour Flavour
	// Client builds the client under test for url (the balancer's), for a
	// plugin named ReplicaPlugin; it closes the client in t.Cleanup.
	Client func(t testing.TB, url string) Invoker
	// ClientFor, if set, builds the client under test instead of Client,
	// from the replicas themselves (to reach them without the balancer, as
	// a client resolving a headless Service does).
	ClientFor func(t testing.TB, r *Replicas) Invoker
	// During, if set, runs beside the load (a rolling restart, say); the
	// run ends when the callers are done and During has returned. ctx ends
	// when the callers are done.
	During func(ctx context.Context, r *Replicas)
}

// Replicas are the servers and the balancer of a run.
type Replicas struct {
	Servers  []*Server
	Balancer *Balancer
	hooks    []*atomic.Int64 // invoke_hook calls served, per replica
}

// HookCalls returns the invoke_hook calls each replica served so far.
func (r *Replicas) HookCalls() []int64 {
	out := make([]int64, len(r.hooks))
	for i, h := range r.hooks {
		out[i] = h.Load()
	}
	return out
}

// ReplicaResult is what a run measured.
type ReplicaResult struct {
	Calls, Failed int64
	// Errors samples the first call errors.
	Errors []string
	// Per replica: initialize requests received, invoke_hook calls served,
	// and TCP connections the balancer handed to it.
	Initializes, HookCalls, Connections []int64
}

// String summarises r for test logs.
func (r ReplicaResult) String() string {
	return fmt.Sprintf("calls %d, failed %d, initializes %v, hook calls %v, connections %v, errors %q",
		r.Calls, r.Failed, r.Initializes, r.HookCalls, r.Connections, r.Errors)
}

// StartReplicas starts n replicas of ReplicaPlugin (each its own
// pluginserver.Server with opts, answering as f) behind a new Balancer.
func StartReplicas(t testing.TB, n int, f Flavour, opts *pluginserver.Options) *Replicas {
	t.Helper()
	r := &Replicas{}
	addrs := make([]string, n)
	for i := range n {
		var hooks atomic.Int64
		p := pluginserver.Func(pluginserver.Config{Name: ReplicaPlugin, Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
			func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				hooks.Add(1)
				return nil, nil
			})
		s := StartPlugins(t, f, opts, p)
		r.Servers = append(r.Servers, s)
		r.hooks = append(r.hooks, &hooks)
		addrs[i] = s.Addr()
	}
	r.Balancer = StartBalancer(t, addrs...)
	return r
}

// RunReplicaLoad runs l and returns what it measured. It asserts nothing:
// the caller states what the client under test must achieve.
func RunReplicaLoad(t testing.TB, l ReplicaLoad) ReplicaResult {
	t.Helper()
	l = l.withDefaults()
	r := StartReplicas(t, l.Replicas, l.Flavour, l.Server)
	var client Invoker
	if l.ClientFor != nil {
		client = l.ClientFor(t, r)
	} else {
		client = l.Client(t, r.Balancer.URL())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var during sync.WaitGroup
	if l.During != nil {
		during.Go(func() { l.During(ctx, r) })
	}
	res := ReplicaResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(l.Duration)
	for i := range l.Callers {
		wg.Go(func() {
			for n := 0; ; n++ {
				if (l.Duration > 0 && !time.Now().Before(deadline)) || (l.Duration <= 0 && n >= l.CallsPerCaller) {
					return
				}
				err := invokeOnce(client, fmt.Sprintf("c%d-%d", i, n))
				mu.Lock()
				res.Calls++
				if err != nil {
					res.Failed++
					if len(res.Errors) < maxErrorSamples {
						res.Errors = append(res.Errors, err.Error())
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cancel()
	during.Wait()

	res.HookCalls = r.HookCalls()
	conns := r.Balancer.Connections()
	for _, s := range r.Servers {
		res.Initializes = append(res.Initializes, s.Initializes())
		res.Connections = append(res.Connections, conns[s.Addr()])
	}
	return res
}

func (l ReplicaLoad) withDefaults() ReplicaLoad {
	if l.Replicas <= 0 {
		l.Replicas = 2
	}
	if l.Callers <= 0 {
		l.Callers = 20
	}
	if l.CallsPerCaller <= 0 {
		l.CallsPerCaller = 50
	}
	return l
}

// replicaCallTimeout bounds one call of a load run.
const replicaCallTimeout = 10 * time.Second

// invokeOnce makes one tool_pre_invoke call; a plugin error reply counts as
// a failure too.
func invokeOnce(c Invoker, requestID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), replicaCallTimeout)
	defer cancel()
	reply, err := c.Invoke(ctx, ReplicaPlugin, cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{}}`),
		cpex.NewContext(cpex.GlobalContext{RequestID: requestID}))
	switch {
	case err != nil:
		return err
	case reply.Error != nil:
		return fmt.Errorf("plugin error reply: %s", reply.Error.Message)
	case reply.Result == nil || !reply.Result.Continue():
		return fmt.Errorf("unexpected reply %+v", reply)
	}
	return nil
}
