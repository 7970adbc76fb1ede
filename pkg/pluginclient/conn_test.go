package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// fakeConn is a Conn of a custom transport: it runs the hook by calling
// run, counting the calls it served.
type fakeConn struct {
	id     int
	served atomic.Int64
	run    func(c *fakeConn) error // nil: answer at once
	closed atomic.Bool
}

func (f *fakeConn) PluginConfig(context.Context, string) (json.RawMessage, bool, error) {
	return json.RawMessage(`{"name":"fake","priority":3}`), true, nil
}

func (f *fakeConn) InvokeHook(ctx context.Context, _ cpex.HookType, _ string, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if f.closed.Load() {
		return nil, fmt.Errorf("%w: closed", ErrConnLost)
	}
	if f.run != nil {
		if err := f.run(f); err != nil {
			return nil, err
		}
	}
	f.served.Add(1)
	return &cpex.InvokeHookReply{PluginName: "fake", Result: &cpex.PluginResult{}}, nil
}

func (f *fakeConn) Health(context.Context) error { return nil }

func (f *fakeConn) Close() error {
	f.closed.Store(true)
	return nil
}

// fakeDialer makes fakeConns; dial, if set, decides whether dial n fails.
type fakeDialer struct {
	mu    sync.Mutex
	conns []*fakeConn
	run   func(c *fakeConn) error
	fail  func(n int) error
}

func (d *fakeDialer) Dial(context.Context) (Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.conns)
	if d.fail != nil {
		if err := d.fail(n); err != nil {
			d.conns = append(d.conns, nil)
			return nil, err
		}
	}
	c := &fakeConn{id: n, run: d.run}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *fakeDialer) live() []*fakeConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*fakeConn
	for _, c := range d.conns {
		if c != nil && !c.closed.Load() {
			out = append(out, c)
		}
	}
	return out
}

// newDialerClient starts a client of a custom transport with slots slots.
func newDialerClient(t *testing.T, d *fakeDialer, slots int, obs Observer) *Client {
	t.Helper()
	pl := config.Plugin{Name: "fake", Kind: "grpc"} // not an MCP plugin: only the name is checked
	c, err := New(pl, config.PluginSettings{}, Options{
		Dialer: d.Dial, Slots: slots, HealthCheckInterval: -1, Observer: obs,
		MaxReconnectDelay: 20 * time.Millisecond,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	eventually(t, "ready", func() bool { return c.Stats().Sessions.Ready == slots })
	return c
}

func invokeClient(c *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Invoke(ctx, cpex.ToolPreInvoke, testPayload, nil)
	return err
}

// Calls in flight spread over the slots: with as many blocked calls as
// slots, each slot carries one (the least loaded is picked).
func TestDialerSlotsLeastInFlight(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	d := &fakeDialer{run: func(*fakeConn) error { entered.Done(); <-release; return nil }}
	const slots = 4
	c := newDialerClient(t, d, slots, nil)
	if c.Effective().Priority == nil || *c.Effective().Priority != 3 {
		t.Errorf("effective config not merged from the custom Conn: %+v", c.Effective())
	}
	entered.Add(slots)
	errs := make(chan error, slots)
	for range slots {
		go func() { errs <- invokeClient(c) }()
	}
	entered.Wait()
	close(release)
	for range slots {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, fc := range d.live() {
		if n := fc.served.Load(); n != 1 {
			t.Errorf("conn %d served %d of %d concurrent calls, want 1", fc.id, n, slots)
		}
	}
}

// ErrConnLost is retried once, on the rebuilt connection of its slot; any
// other error is the call's answer, never retried.
func TestDialerConnLostRetriedOnce(t *testing.T) {
	var lose, refuse atomic.Bool
	var calls atomic.Int64
	d := &fakeDialer{run: func(f *fakeConn) error {
		calls.Add(1)
		if f.id == 0 && lose.CompareAndSwap(true, false) {
			return fmt.Errorf("%w: reset", ErrConnLost)
		}
		if refuse.Load() {
			return errors.New("plugin said no")
		}
		return nil
	}}
	rec := &recorder{}
	c := newDialerClient(t, d, 2, rec)

	// Call until conn 0 is hit.
	lose.Store(true)
	for lose.Load() {
		if err := invokeClient(c); err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	eventually(t, "slot rebuilt", func() bool { return c.Stats().Connects == 3 })
	st := c.Stats()
	if st.Rebuilds != 1 || st.Retries != 1 || st.RetryFailures != 0 || rec.rebuilds.Load() != 1 {
		t.Errorf("stats = %+v, want 1 rebuild, 1 good retry", st)
	}
	eventually(t, "the lost connection closed", func() bool { return d.conns[0].closed.Load() })

	// An answer is not retried: the plugin ran once.
	refuse.Store(true)
	before := calls.Load()
	answerErr := invokeClient(c)
	refuse.Store(false)
	if answerErr == nil || errors.Is(answerErr, ErrConnLost) {
		t.Fatalf("answer error = %v", answerErr)
	}
	if got := c.Stats().Retries; got != 1 || calls.Load()-before != 1 {
		t.Errorf("Retries = %d, runs = %d after an answer error, want 1, 1 (not retried)", got, calls.Load()-before)
	}
}

// The plugin is Ready while any slot is; the circuit opens only when every
// slot is down, and closes when one comes back.
func TestDialerCircuitOnlyWhenAllSlotsDown(t *testing.T) {
	var down atomic.Bool
	d := &fakeDialer{fail: func(int) error {
		if down.Load() {
			return errors.New("refused")
		}
		return nil
	}}
	rec := &recorder{}
	c := newDialerClient(t, d, 3, rec)

	down.Store(true)
	live := d.live()
	live[0].Close() // one slot loses its connection: the others serve
	for range 5 {
		if err := invokeClient(c); err != nil {
			t.Fatalf("call with one slot lost: %v", err)
		}
	}
	eventually(t, "one slot down", func() bool { return c.Stats().Sessions.Down == 1 })
	if c.State() != Ready {
		t.Fatalf("State = %v with 2 of 3 slots up", c.State())
	}
	for _, fc := range live[1:] {
		fc.Close()
	}
	for c.State() != Down {
		// A call may meet two lost connections (one retry) on the way.
		if err := invokeClient(c); err != nil && !errors.Is(err, ErrPluginDown) && !errors.Is(err, ErrConnLost) {
			t.Fatalf("call while slots go down: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := invokeClient(c); !errors.Is(err, ErrPluginDown) {
		t.Fatalf("call with every slot down = %v, want ErrPluginDown", err)
	}
	down.Store(false)
	eventually(t, "back", func() bool { return c.State() == Ready })
	if st := c.Stats(); st.CircuitOpens != 1 {
		t.Errorf("CircuitOpens = %d, want 1", st.CircuitOpens)
	}
	if tr := rec.transitions(); len(tr) != 3 || tr[1] != [2]State{Ready, Down} || tr[2] != [2]State{Down, Ready} {
		t.Errorf("transitions = %v, want connecting→ready→down→ready", tr)
	}
}

// A dying server fails every connection it holds (a plugin that answers
// 503 while it shuts down): the retry of a lost call goes to the rebuilt
// connection, which reaches a live server, not to another slot that holds a
// connection to the same dying one.
func TestDialerRetryOnRebuiltConnection(t *testing.T) {
	var dyingBelow atomic.Int64 // connections made before the server began dying
	d := &fakeDialer{run: func(f *fakeConn) error {
		if int64(f.id) < dyingBelow.Load() {
			return fmt.Errorf("%w: 503 while shutting down", ErrConnLost)
		}
		return nil
	}}
	c := newDialerClient(t, d, 4, nil)
	d.mu.Lock()
	dyingBelow.Store(int64(len(d.conns)))
	d.mu.Unlock()
	for i := range 4 {
		if err := invokeClient(c); err != nil {
			t.Fatalf("call %d failed: %v", i, err)
		}
	}
	if st := c.Stats(); st.RetryFailures != 0 {
		t.Errorf("stats = %+v, want no failed retry", st)
	}
}
