package attribution

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAccepted(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAccepted(3, time.Minute, func() time.Time { return now })
	if a.Has("s1") {
		t.Fatal("empty set has s1")
	}
	a.Add("s1")
	if !a.Has("s1") || a.Has("s2") {
		t.Fatal("s1 added: Has(s1) false or Has(s2) true")
	}
	now = now.Add(59 * time.Second)
	a.Add("s1") // confirmed again: kept another minute
	now = now.Add(59 * time.Second)
	if !a.Has("s1") {
		t.Fatal("s1 forgotten before its ttl since the last Add")
	}
	now = now.Add(time.Second)
	if a.Has("s1") {
		t.Fatal("s1 kept past its ttl")
	}
	a.Add("s1")
	a.Forget("s1")
	if a.Has("s1") {
		t.Fatal("s1 kept after Forget")
	}
	a.Add("")
	a.Add(strings.Repeat("x", 1025))
	if a.Len() != 0 {
		t.Fatalf("empty and oversized session ids kept: Len = %d", a.Len())
	}
}

func TestAcceptedBound(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAccepted(4, time.Minute, func() time.Time { return now })
	for i := range 100 {
		a.Add(fmt.Sprint("s", i))
		if a.Len() > 4 {
			t.Fatalf("after %d adds Len = %d, over the bound 4", i+1, a.Len())
		}
	}
	if !a.Has("s99") {
		t.Fatal("the session just added was evicted")
	}
	// Expired sessions go before a live one is dropped.
	b := NewAccepted(2, time.Minute, func() time.Time { return now })
	b.Add("old")
	now = now.Add(30 * time.Second)
	b.Add("live")
	now = now.Add(45 * time.Second) // old expired, live not
	b.Add("new")
	if !b.Has("live") || !b.Has("new") || b.Has("old") {
		t.Fatalf("eviction dropped a live session: live %v new %v old %v", b.Has("live"), b.Has("new"), b.Has("old"))
	}
}

func TestAcceptedNil(t *testing.T) {
	var a *Accepted
	a.Add("s")
	a.Forget("s")
	if a.Has("s") || a.Len() != 0 {
		t.Fatal("nil set remembered a session")
	}
}
