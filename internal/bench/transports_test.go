package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestTransportsQuick runs the transports scenario for a handful of
// operations: every transport's plugin is reached through the sidecar
// (called once per tools/call) and directly. It measures nothing.
func TestTransportsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sidecar and a plugin server per transport")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress bytes.Buffer
	r := newRunner(Options{Quick: true, Progress: &progress})
	if err := r.transports(ctx, benchTransports); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(r.rep.Tables) != 1 || len(r.rep.Tables[0].Rows) != len(benchTransports) {
		t.Fatalf("tables %+v", r.rep.Tables)
	}
}

// BenchmarkTransportsInMemory measures tools/call with one plugin on
// tool_pre_invoke reached over each cpex transport, through the processor
// (in memory: no ext_proc gRPC) and as minimal + the same call made
// directly over the same transport: the difference is the sidecar's own
// cost around a plugin call of that transport.
//
//	go test -run '^$' -bench TransportsInMemory -benchmem ./internal/bench
func BenchmarkTransportsInMemory(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := ToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	p := Prepare(x)
	ok := untouched(p)
	d := &Driver{}
	mini := &Endpoint{Name: "minimal", Client: Pipe(NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))}
	for _, name := range benchTransports {
		tp, err := startTransportPlugin(ctx, name, DelayPlugin("Guard", 0, cpex.ToolPreInvoke), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tp.Close() })
		proc, err := NewProcessor(ctx, transportConfig("Guard", tp.section), true)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { proc.Close() })
		ops := []struct {
			name string
			op   Op
		}{
			{"processor", exchangeOp(d, &Endpoint{Name: "processor", Client: Pipe(proc)}, p, ok)},
			{"minimal+direct", directOp(d, mini, p, ok, tp.direct, "Guard")},
		}
		for _, o := range ops {
			b.Run(strings.ReplaceAll(name, " ", "-")+"/"+o.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := o.op(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestReplicaSetBalances checks the replicas scenario's setup: the
// sidecar's plugin sessions reach every replica through the balancer, and
// tools/calls through the sidecar reach the plugin.
func TestReplicaSetBalances(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cl closers
	defer func() {
		if err := cl.close(); err != nil {
			t.Error(err)
		}
	}()
	rs, err := startReplicaSet(ctx, &cl, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range rs.handed() {
		if n == 0 {
			t.Errorf("replica %d was handed no connection: %v", i, rs.handed())
		}
	}
	p, ok, err := preparedToolsCall()
	if err != nil {
		t.Fatal(err)
	}
	op := exchangeOp(&Driver{}, rs.sc, p, ok)
	for range 10 {
		if _, err := op(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, n := range rs.calls() {
		total += n
	}
	if total != 10 {
		t.Errorf("the replicas served %d hook calls for 10 tools/calls: %v", total, rs.calls())
	}
}
