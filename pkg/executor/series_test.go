package executor

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

// seriesRecorder is a SeriesObserver: it records what reaches each
// series, and what reaches OnInvoke, apart.
type seriesRecorder struct {
	mu       sync.Mutex
	resolved []string // plugin:hook, in the order Series was asked
	bySeries []string // plugin:hook:verdict
	onInvoke []string
}

type recordedSeries struct {
	r    *seriesRecorder
	name string
}

func (s recordedSeries) Observe(v Verdict, _ time.Duration) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.bySeries = append(s.r.bySeries, s.name+":"+v.String())
}

func (r *seriesRecorder) Series(plugin string, hook cpex.HookType) HookObserver {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolved = append(r.resolved, plugin+":"+string(hook))
	return recordedSeries{r, plugin + ":" + string(hook)}
}

func (r *seriesRecorder) OnInvoke(plugin string, hook cpex.HookType, v Verdict, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onInvoke = append(r.onInvoke, plugin+":"+string(hook)+":"+v.String())
}

// A SeriesObserver's series are resolved once per plugin and hook, when
// the hooks are planned, and each invocation goes to its plugin's series
// on its hook (skips and fire_and_forget work included), none to
// OnInvoke.
func TestSeriesObserver(t *testing.T) {
	f := newFake(
		plug("A", config.ModeSequential, 1, cpex.ToolPreInvoke, cpex.ToolPostInvoke),
		plug("B", config.ModeFireAndForget, 1, cpex.ToolPreInvoke),
		plug("C", config.ModeSequential, 2, cpex.ToolPreInvoke),
	)
	f.plugins[2].Conditions = []config.Condition{{Tools: []string{"other"}}}
	rec := &seriesRecorder{}
	e := newExec(t, f, Options{Observer: rec})
	ctx := context.Background()
	tool, _ := hookfamily.ByHook(cpex.ToolPreInvoke)
	fetch := Target{Family: tool, Name: "fetch"}
	for range 2 {
		if out := e.Run(ctx, cpex.ToolPreInvoke, []byte(toolPre), nil, fetch); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	e.Run(ctx, cpex.ToolPostInvoke, []byte(`{"name":"fetch","result":{}}`), nil, fetch)
	closeNow(t, e)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.Sort(rec.resolved)
	if want := []string{"A:tool_post_invoke", "A:tool_pre_invoke", "B:tool_pre_invoke", "C:tool_pre_invoke"}; !slices.Equal(rec.resolved, want) {
		t.Errorf("series resolved %q, want %q (once each)", rec.resolved, want)
	}
	slices.Sort(rec.bySeries)
	want := []string{"A:tool_post_invoke:allow", "A:tool_pre_invoke:allow", "A:tool_pre_invoke:allow", "B:tool_pre_invoke:allow", "B:tool_pre_invoke:allow",
		"C:tool_pre_invoke:skipped", "C:tool_pre_invoke:skipped"}
	if !slices.Equal(rec.bySeries, want) {
		t.Errorf("series got %q, want %q", rec.bySeries, want)
	}
	if len(rec.onInvoke) > 0 {
		t.Errorf("OnInvoke got %q, want nothing: the series take every invocation", rec.onInvoke)
	}
}
