package bytesmemo

import (
	"fmt"
	"sync"
	"testing"
)

// step is one call on a Memo[int]: a Put of v counted for cost, or (get)
// a Get that must find want (hit) or nothing.
type step struct {
	get  bool
	key  string
	v    int // Put: the value; Get: the value wanted when hit
	cost int // Put only
	hit  bool
	// only, when not zero, is the one value Get's ok accepts.
	only int
}

func put(key string, v, cost int) step { return step{key: key, v: v, cost: cost} }
func hit(key string, v int) step       { return step{get: true, key: key, v: v, hit: true} }
func miss(key string) step             { return step{get: true, key: key} }

// TestMemo: each case's calls in order, then what the Memo holds.
func TestMemo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound int
		steps []step
		want  Stats
	}{
		{name: "hit", bound: 100, steps: []step{put("a", 1, 10), hit("a", 1)},
			want: Stats{Current: 1, CurrentBytes: 10}},
		{name: "miss", bound: 100, steps: []step{put("a", 1, 10), miss("b"), miss(""), miss("aa")},
			want: Stats{Current: 1, CurrentBytes: 10}},
		{name: "ok refuses", bound: 100, steps: []step{put("a", 1, 10), {get: true, key: "a", only: 2},
			{get: true, key: "a", only: 1, v: 1, hit: true}},
			want: Stats{Current: 1, CurrentBytes: 10}},
		{name: "put again replaces", bound: 100, steps: []step{put("a", 1, 10), put("a", 2, 20), hit("a", 2)},
			want: Stats{Current: 1, CurrentBytes: 20}},
		{name: "counted for its key at least", bound: 100, steps: []step{put("abcdef", 1, 0), put("", 2, -5), hit("", 2)},
			want: Stats{Current: 2, CurrentBytes: 7}},
		{name: "a full generation becomes the previous", bound: 100,
			steps: []step{put("a", 1, 30), put("b", 2, 30), hit("b", 2)},
			want:  Stats{Current: 1, Previous: 1, CurrentBytes: 30}},
		{name: "a hit in the previous generation moves to the current", bound: 100,
			steps: []step{put("a", 1, 20), put("b", 2, 20), put("c", 3, 20), hit("a", 1)},
			// c started a generation (a, b are the previous); a moved in.
			want: Stats{Current: 2, Previous: 2, CurrentBytes: 40}},
		{name: "what is not asked for ages out", bound: 100,
			steps: []step{put("a", 1, 30), put("b", 2, 30), hit("a", 1), put("c", 3, 30), miss("b"), hit("a", 1), hit("c", 3)},
			// b: current, a: previous; a's hit: a current, b previous; c: c
			// current, a previous, b dropped; then a and c, each found in
			// the previous generation, take turns in the current one.
			want: Stats{Current: 1, Previous: 1, CurrentBytes: 30}},
		{name: "larger than a generation is not stored", bound: 100,
			steps: []step{put("a", 1, 10), put("big", 2, 51), miss("big"), hit("a", 1), put("half", 3, 50), hit("half", 3)},
			want:  Stats{Current: 1, Previous: 1, CurrentBytes: 50}},
		{name: "a bound under 2 remembers nothing", bound: 1, steps: []step{put("a", 1, 0), miss("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New[int](tc.bound)
			for i, s := range tc.steps {
				if !s.get {
					m.Put([]byte(s.key), s.v, s.cost)
					continue
				}
				var ok func(int) bool
				if s.only != 0 {
					ok = func(v int) bool { return v == s.only }
				}
				v, found := m.Get([]byte(s.key), ok)
				if found != s.hit || (found && v != s.v) {
					t.Errorf("step %d: Get(%q) = %d, %v; want %d, %v", i, s.key, v, found, s.v, s.hit)
				}
			}
			if got := m.Stats(); got != tc.want {
				t.Errorf("Stats() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestZeroMemo: the zero Memo remembers nothing and does not panic.
func TestZeroMemo(t *testing.T) {
	var m Memo[string]
	m.Put([]byte("a"), "x", 1)
	if v, ok := m.Get([]byte("a"), nil); ok {
		t.Errorf("zero Memo remembered %q", v)
	}
	if s := m.Stats(); s != (Stats{}) {
		t.Errorf("zero Memo holds %+v", s)
	}
}

// TestKeyCopied: Put copies the key, so the caller may reuse its buffer.
func TestKeyCopied(t *testing.T) {
	m := New[int](100)
	key := []byte("abc")
	m.Put(key, 1, 10)
	copy(key, "xyz")
	if v, ok := m.Get([]byte("abc"), nil); !ok || v != 1 {
		t.Errorf("Get(abc) = %d, %v after the caller reused the key's buffer", v, ok)
	}
	if _, ok := m.Get(key, nil); ok {
		t.Error("Get(xyz) found what was put under abc")
	}
}

// TestConcurrent: goroutines put and get the keys of a small set at once
// (run with -race): every hit is the value of its key, and the bound
// holds throughout.
func TestConcurrent(t *testing.T) {
	const bound, keys = 1 << 10, 64
	m := New[string](bound)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprintf("key %d", (i*7+g)%keys)
				if v, ok := m.Get([]byte(k), func(v string) bool { return v != "" }); ok && v != k {
					t.Errorf("Get(%q) = %q", k, v)
					return
				}
				if i%3 == g%3 {
					m.Put([]byte(k), k, 40)
				}
				if s := m.Stats(); s.CurrentBytes > bound/2 {
					t.Errorf("%d bytes in the current generation, bound %d", s.CurrentBytes, bound/2)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := m.Stats(); s.Current == 0 {
		t.Errorf("nothing remembered: %+v", s)
	}
}
