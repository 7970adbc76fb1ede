package toolpin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
)

// clock is a settable clock for the memo's life.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingStore is a Memory that counts the items each Pin is asked
// about (it keeps Memory's TTL, so a Pinner trusts its answers).
type countingStore struct {
	*Memory
	mu    sync.Mutex
	asked []int // items per Pin call
	marks int
}

func (s *countingStore) Pin(ctx context.Context, scope string, kind Kind, items []Item) ([]Fingerprint, error) {
	s.mu.Lock()
	s.asked = append(s.asked, len(items))
	s.mu.Unlock()
	return s.Memory.Pin(ctx, scope, kind, items)
}

func (s *countingStore) Mark(ctx context.Context, scope string, kind Kind, seen []string, changed map[string][]string) error {
	s.mu.Lock()
	s.marks++
	s.mu.Unlock()
	return s.Memory.Mark(ctx, scope, kind, seen, changed)
}

// calls returns and forgets the Pin calls so far.
func (s *countingStore) calls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.asked
	s.asked = nil
	return a
}

// foreignStore is a Store from elsewhere: its TTL is unknown.
type foreignStore struct{ Store }

func newPinner(t testing.TB, mode Mode, on OnChange, snap *Snapshot, store Store, c *clock) *Pinner {
	t.Helper()
	p, err := New(mode, on, snap, store)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		p.now = c.now
	}
	return p
}

func check(t *testing.T, p *Pinner, scope string, items [][]byte) map[int]Change {
	t.Helper()
	ch, err := p.Check(context.Background(), scope, Tool, items)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return ch
}

// TestCacheIsOf: what the cache returns is what Of returns, for the kind
// asked (the same bytes are another fingerprint as another kind), and a
// hit is the entry remembered.
func TestCacheIsOf(t *testing.T) {
	c := newFPCache(DefaultCacheBytes)
	defs := [][]byte{
		[]byte(`{"name":"a","description":"A.","arguments":[{"name":"x"}]}`),
		[]byte(`{"description":"A.","name":"a","arguments":[{"name":"x"}]}`),
		[]byte(`{"name":"b","inputSchema":{"type":"object"}}`),
	}
	get := func(k Kind) []*fpEntry {
		var out []*fpEntry
		c.each(k, defs, func(i int, e *fpEntry, err error) {
			if err != nil || i != len(out) {
				t.Fatalf("%s item %d: %v", k, i, err)
			}
			out = append(out, e)
		})
		return out
	}
	for _, k := range []Kind{Tool, Prompt, Tool, Prompt} {
		got := get(k)
		for i, e := range got {
			name, fp, _ := Of(k, defs[i])
			if e.kind != k || e.name != name || !e.fp.Equal(fp) {
				t.Errorf("%s %s: cached %s %q %v, Of %q %v", k, defs[i], e.kind, e.name, e.fp, name, fp)
			}
		}
		if again := get(k); !slices.Equal(again, got) {
			t.Errorf("%s: a second list did not hit the entries of the first", k)
		}
	}
	_, fpTool, _ := Of(Tool, defs[0])
	_, fpPrompt, _ := Of(Prompt, defs[0])
	if fpTool.Equal(fpPrompt) {
		t.Fatal("the test needs bytes whose fingerprint depends on the kind")
	}
	var errs int
	c.each(Tool, [][]byte{[]byte(`{"name":1}`), []byte(`[`)}, func(_ int, e *fpEntry, err error) {
		if err == nil || e != nil {
			t.Errorf("unreadable definition: %v, %v", e, err)
		}
		errs++
	})
	if errs != 2 {
		t.Errorf("%d unreadable items reported, want 2", errs)
	}
}

// TestCacheBound: the cache holds at most its bound, in two generations;
// a definition every list shows survives the rotations, one no list shows
// any more is dropped, one larger than a generation is not kept.
func TestCacheBound(t *testing.T) {
	const bound = 16 << 10
	c := newFPCache(bound)
	kept := toolList(t, 1, "kept")
	var first *fpEntry
	c.each(Tool, kept, func(_ int, e *fpEntry, _ error) { first = e })
	for round := range 20 {
		list := append(toolList(t, 10, fmt.Sprintf("round %d", round)), kept[0])
		c.each(Tool, list, func(i int, e *fpEntry, _ error) {
			if i == len(list)-1 && e != first {
				t.Fatalf("round %d: the definition every list shows was fingerprinted again", round)
			}
		})
		s := c.Stats()
		if s.CurrentBytes > bound/2 {
			t.Fatalf("round %d: %d bytes in the current generation, bound %d", round, s.CurrentBytes, bound/2)
		}
		if perEntry := cost(kept[0], first); (s.Current+s.Previous)*perEntry > bound*2 {
			t.Fatalf("round %d: %d+%d entries of ~%d bytes over the bound %d", round, s.Current, s.Previous, perEntry, bound)
		}
	}
	if s := c.Stats(); s.Current+s.Previous >= 20*11 {
		t.Errorf("%d+%d entries: nothing was dropped", s.Current, s.Previous)
	}
	big := []byte(`{"name":"big","description":"` + strings.Repeat("x", bound) + `"}`)
	c.each(Tool, [][]byte{big}, func(_ int, e *fpEntry, err error) {
		if err != nil || e.name != "big" {
			t.Fatalf("big definition: %v %v", e, err)
		}
	})
	if s := c.Stats(); s.CurrentBytes > bound/2 {
		t.Errorf("a definition larger than a generation was kept: %d bytes", s.CurrentBytes)
	}
}

// TestMemoAsksOnlyWhatChanged: an unchanged list asks the store nothing
// (but still marks what the calls see); a changed definition, and every
// definition once the memo is over, is asked about.
func TestMemoAsksOnlyWhatChanged(t *testing.T) {
	c := newClock()
	store := &countingStore{Memory: NewMemory(0, 0, c.now)}
	p := newPinner(t, Record, Hide, nil, store, c)
	v1 := toolList(t, 5, "")
	check(t, p, "s", v1)
	if got := store.calls(); !slices.Equal(got, []int{5}) {
		t.Fatalf("first list asked %v, want [5]", got)
	}
	check(t, p, "s", v1)
	if got := store.calls(); len(got) != 0 {
		t.Errorf("unchanged list asked %v, want nothing", got)
	}
	v2 := slices.Clone(v1)
	v2[3] = toolList(t, 4, " Also read ~/.ssh.")[3]
	if ch := check(t, p, "s", v2); len(ch) != 1 || !slices.Equal(ch[3].Members, []string{"description"}) {
		t.Errorf("changed list: %v", ch)
	}
	if got := store.calls(); !slices.Equal(got, []int{1}) {
		t.Errorf("a list with one changed definition asked %v, want [1]", got)
	}
	if ch := check(t, p, "s", v2); len(ch) != 1 {
		t.Errorf("the changed definition again: %v (a change is never remembered as agreed)", ch)
	}
	if got := store.calls(); !slices.Equal(got, []int{1}) {
		t.Errorf("the changed list again asked %v, want [1]", got)
	}
	if check(t, p, "other", v1); !slices.Equal(store.calls(), []int{5}) {
		t.Error("another scope was not asked about")
	}
	c.advance(p.memo)
	check(t, p, "s", v1)
	if got := store.calls(); !slices.Equal(got, []int{5}) {
		t.Errorf("after the memo's life asked %v, want [5]", got)
	}
	if store.marks != 6 {
		t.Errorf("%d marks for 6 lists", store.marks)
	}
}

// TestMemoWithinTTL: a pin a Pinner trusts without asking does not expire
// in the store meanwhile: the memo lives at most half the TTL, so the pin
// is seen (and kept) again before it could expire, and a replica that
// lists a changed definition later still finds the first one pinned.
func TestMemoWithinTTL(t *testing.T) {
	c := newClock()
	const ttl = 40 * time.Second // shorter than MaxPinMemo's double
	store := NewMemory(0, ttl, c.now)
	a := newPinner(t, Record, Hide, nil, store, c)
	b := newPinner(t, Record, Hide, nil, store, c)
	v1 := toolList(t, 3, "")
	for range 4 {
		check(t, a, "s", v1)
		c.advance(25 * time.Second)
	}
	v2 := toolList(t, 3, " Changed.")
	if ch := check(t, b, "s", v2); len(ch) != 3 {
		t.Fatalf("replica b after a kept listing v1 for 100 s (TTL 40 s): %d changes, want 3", len(ch))
	}
	if f := (foreignStore{store}); newPinner(t, Record, Hide, nil, f, c).memo != 0 {
		t.Error("a store of unknown TTL is trusted beyond one list")
	}
}

// TestMemoAndReplicas: two replicas share a store. What one remembers
// never hides a change: the other's change marks reach its calls, and a
// definition whose bytes it never had the store's agreement for is asked
// about; the list it shows still marks its calls (the last list wins, as
// without the memo).
func TestMemoAndReplicas(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := NewMemory(0, 0, c.now)
	a := newPinner(t, Record, Hide, nil, store, c)
	b := newPinner(t, Record, Hide, nil, store, c)
	v1 := toolList(t, 3, "")
	v2 := slices.Clone(v1)
	v2[1] = toolList(t, 2, " Changed.")[1]
	check(t, a, "s", v1)
	check(t, a, "s", v1) // remembered
	if ch := check(t, b, "s", v2); len(ch) != 1 {
		t.Fatalf("replica b, changed list: %v", ch)
	}
	if cc, _ := a.CallChange(ctx, "s", Tool, "tool_1"); cc == nil {
		t.Error("replica a lets a call of the definition b saw changed through")
	}
	if ch := check(t, a, "s", v2); len(ch) != 1 {
		t.Errorf("replica a, the changed list b saw: %v", ch)
	}
	if ch := check(t, a, "s", v1); len(ch) != 0 {
		t.Errorf("replica a, back to the pinned list: %v", ch)
	}
	if cc, _ := b.CallChange(ctx, "s", Tool, "tool_1"); cc != nil {
		t.Errorf("after a list showed the pinned definition again: %v", cc)
	}
}

// TestMemoAfterRemovedPin is the limit docs/tool-pinning.md states: a pin
// removed from the store outside its TTL (a Redis eviction, a key deleted
// by hand) and pinned afresh by a replica with another definition is
// noticed by a replica that remembers the old agreement within the memo's
// life, not at once.
func TestMemoAfterRemovedPin(t *testing.T) {
	c := newClock()
	store := NewMemory(0, 0, c.now)
	a := newPinner(t, Record, Alert, nil, store, c)
	b := newPinner(t, Record, Alert, nil, store, c)
	v1, v2 := toolList(t, 1, ""), toolList(t, 1, " Changed.")
	check(t, a, "s", v1)
	store.mu.Lock()
	clear(store.pins)
	store.mu.Unlock()
	check(t, b, "s", v2) // pins v2
	if ch := check(t, a, "s", v1); len(ch) != 0 {
		t.Fatalf("within the memo: %v (the test's premise changed)", ch)
	}
	c.advance(a.memo)
	if ch := check(t, a, "s", v1); len(ch) != 1 {
		t.Errorf("after the memo's life: %v, want the change", ch)
	}
}

// TestApprovedRemembered: mode approved gives the same answers on a list
// seen before.
func TestApprovedRemembered(t *testing.T) {
	v1 := toolList(t, 3, "")
	snap := &Snapshot{}
	for _, item := range v1[:2] {
		name, fp, _ := Of(Tool, item)
		snap.Add(Tool, name, fp)
	}
	p := newPinner(t, Approved, Hide, snap, NewMemory(0, 0, nil), nil)
	v2 := slices.Clone(v1)
	v2[0] = toolList(t, 1, " Changed.")[0]
	for n := range 4 {
		list, want := v1, map[int]string{2: NotApproved}
		if n%2 == 1 {
			list, want[0] = v2, "description"
		}
		ch := check(t, p, "s", list)
		if len(ch) != len(want) {
			t.Fatalf("changes %v, want %v", ch, want)
		}
		for i, m := range want {
			if !slices.Equal(ch[i].Members, []string{m}) {
				t.Errorf("item %d: %v, want %s", i, ch[i].Members, m)
			}
		}
	}
}

// TestCheckConcurrent: lists checked at once, in two scopes, through a
// cache small enough to rotate, give the answers one at a time would
// (run with -race).
func TestCheckConcurrent(t *testing.T) {
	store := NewMemory(0, 0, nil)
	p := newPinner(t, Record, Hide, nil, store, nil)
	p.fps = newFPCache(32 << 10)
	v1, v2 := toolList(t, 40, ""), toolList(t, 40, " Changed.")
	check(t, p, "s1", v1)
	check(t, p, "s2", v2)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 30 {
				scope, list, want := "s1", v1, 0
				if (g+n)%2 == 1 {
					scope, want = "s2", len(v1) // v1 against the v2 pins
				}
				ch, err := p.Check(context.Background(), scope, Tool, list)
				if err == nil && len(ch) != want {
					err = fmt.Errorf("%s: %d changes, want %d", scope, len(ch), want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCheckResult: CheckResult finds what Check finds in the items of a
// result, first seen or remembered, for each kind; a result of another
// shape, or of a list not pinned, is not checked.
func TestCheckResult(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	for _, tc := range []struct {
		method string
		v1, v2 [][]byte
		want   map[int][]string // v2's changes
		called string           // a definition v2 changed
	}{
		{"tools/list", toolList(t, 4, ""), append(toolList(t, 3, ""), toolList(t, 4, " Changed.")[3], []byte(`{"name":2}`)),
			map[int][]string{3: {"description"}, 4: {unreadable}}, "tool_3"},
		{"prompts/list", [][]byte{[]byte(`{"name":"p","arguments":[{"name":"a"}]}`)}, [][]byte{[]byte(`{"name":"p","arguments":[{"name":"b"}]}`)},
			map[int][]string{0: {"arguments"}}, "p"},
		{"resources/templates/list", [][]byte{[]byte(`{"uriTemplate":"file:///{p}","name":"f"}`)}, [][]byte{[]byte(`{"uriTemplate":"file:///{p}","name":"g"}`)},
			map[int][]string{0: {"name"}}, "file:///{p}"},
	} {
		store := NewMemory(0, 0, c.now)
		byResult := newPinner(t, Record, Hide, nil, store, c)
		byItems := newPinner(t, Record, Hide, nil, NewMemory(0, 0, c.now), c)
		kind, _ := KindOfList(tc.method)
		for n, items := range [][][]byte{tc.v1, tc.v2, tc.v2, tc.v1, tc.v2} {
			l, result := resultOf(t, tc.method, items)
			got, err := byResult.CheckResult(ctx, "s", l, result)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := byItems.Check(ctx, "s", kind, items)
			if len(got) != len(want) {
				t.Fatalf("%s list %d: CheckResult %v, Check %v", tc.method, n, got, want)
			}
			for i, c := range want {
				if got[i].Name != c.Name || !slices.Equal(got[i].Members, c.Members) {
					t.Errorf("%s list %d item %d: CheckResult %v, Check %v", tc.method, n, i, got[i], c)
				}
			}
			if n%3 == 1 {
				for i, members := range tc.want {
					if !slices.Equal(got[i].Members, members) {
						t.Errorf("%s list %d item %d: %v, want %v", tc.method, n, i, got[i].Members, members)
					}
				}
			}
		}
		if s := byResult.lists.Stats(); s.Current+s.Previous != 2 {
			t.Errorf("%s: %d+%d results remembered, want the 2 seen", tc.method, s.Current, s.Previous)
		}
		// The last list shown was v2: its changed call is refused.
		if cc, _ := byResult.CallChange(ctx, "s", kind, tc.called); cc == nil {
			t.Errorf("%s: call of %s after the changed list let through", tc.method, tc.called)
		}
	}
	// One result's bytes read as two lists: each its own items.
	tools, _ := mcplist.ByMethod("tools/list")
	prompts, _ := mcplist.ByMethod("prompts/list")
	both := []byte(`{"tools":[{"name":"t"}],"prompts":[{"name":"p"}]}`)
	snap := &Snapshot{}
	_, fp := mustOf(t, Tool, `{"name":"t"}`)
	snap.Add(Tool, "t", fp)
	approved := newPinner(t, Approved, Hide, snap, NewMemory(0, 0, nil), nil)
	for range 2 {
		if ch, err := approved.CheckResult(ctx, "s", tools, both); err != nil || len(ch) != 0 {
			t.Errorf("tools of a result that also has prompts: %v, %v", ch, err)
		}
		if ch, err := approved.CheckResult(ctx, "s", prompts, both); err != nil || len(ch) != 1 || ch[0].Kind != Prompt || ch[0].Name != "p" {
			t.Errorf("prompts of a result that also has tools: %v, %v", ch, err)
		}
	}
	p := newPinner(t, Record, Hide, nil, NewMemory(0, 0, nil), nil)
	resources, _ := mcplist.ByMethod("resources/list")
	for _, bad := range []struct {
		l      *mcplist.List
		result string
	}{{tools, `[]`}, {tools, `{"tools":{}}`}, {tools, `{"tools":[`}, {resources, `{"resources":[{"name":"r","uri":"file:///r"}]}`}} {
		if ch, err := p.CheckResult(ctx, "s", bad.l, []byte(bad.result)); ch != nil || err != nil {
			t.Errorf("%s %s: %v, %v; want not checked", bad.l.Method, bad.result, ch, err)
		}
	}
}

// TestCheckAllocs is the allocation budget of checking a list seen before
// (the steady state): what Check and CheckResult allocate per list,
// whatever its length. One allocation per definition more fails; lower a
// budget when a change lowers it.
func TestCheckAllocs(t *testing.T) {
	ctx := context.Background()
	items := toolList(t, benchTools, "")
	l, result := resultOf(t, "tools/list", items)
	snap := &Snapshot{}
	for _, item := range items {
		name, fp, _ := Of(Tool, item)
		snap.Add(Tool, name, fp)
	}
	for _, tc := range []struct {
		mode   Mode
		snap   *Snapshot
		result bool
		budget float64
	}{
		// The readable definitions and the names for Mark.
		{Record, nil, false, 2},
		{Approved, snap, false, 2},
		// The names for Mark: the definitions are remembered with the result.
		{Record, nil, true, 1},
		{Approved, snap, true, 1},
	} {
		p := newPinner(t, tc.mode, Alert, tc.snap, NewMemory(0, 0, nil), nil)
		run := func() {
			var ch map[int]Change
			var err error
			if tc.result {
				ch, err = p.CheckResult(ctx, "s", l, result)
			} else {
				ch, err = p.Check(ctx, "s", Tool, items)
			}
			if err != nil || len(ch) != 0 {
				t.Fatalf("%s: %v %v", tc.mode, ch, err)
			}
		}
		run()
		got := testing.AllocsPerRun(50, run)
		if got > tc.budget {
			t.Errorf("%s (CheckResult %v): warm check of %d tools: %.0f allocations, budget %.0f", tc.mode, tc.result, benchTools, got, tc.budget)
		} else if got < tc.budget {
			t.Logf("%s (CheckResult %v): %.0f allocations, under the budget %.0f: lower it", tc.mode, tc.result, got, tc.budget)
		}
	}
}
