package sse

import (
	"errors"
	"strings"
	"testing"
)

// TestFeedReturnsEventsBeforeOverflow: the events a chunk completed before
// an oversized one come back with ErrEventTooLarge; later calls fail alone.
func TestFeedReturnsEventsBeforeOverflow(t *testing.T) {
	d := NewDecoder(64)
	events, err := d.Feed([]byte("data: a\n\ndata: b\n\ndata: " + strings.Repeat("x", 100)))
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
	if len(events) != 2 || string(events[0].Data) != "a" || string(events[1].Data) != "b" {
		t.Fatalf("events = %+v, want a and b", events)
	}
	if events, err := d.Feed([]byte("\n\n")); !errors.Is(err, ErrEventTooLarge) || len(events) != 0 {
		t.Fatalf("after overflow: %d events, err %v", len(events), err)
	}
}
