package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ev is the comparable part of an Event; "-" stands for nil.
type ev struct {
	Raw, Data, Type, ID string
	Terminated          bool
}

func nilOr(b []byte) string {
	if b == nil {
		return "-"
	}
	return string(b)
}

func toEv(e Event) ev {
	return ev{Raw: string(e.Raw), Data: nilOr(e.Data), Type: nilOr(e.Type), ID: nilOr(e.ID), Terminated: e.Terminated()}
}

// decodeChunks feeds chunks to a new decoder and returns every event,
// including the one from Flush, and the bytes pending before the Flush.
func decodeChunks(t testing.TB, chunks [][]byte) (evs []ev, pending string) {
	t.Helper()
	var d Decoder
	for _, c := range chunks {
		events, err := d.Feed(c)
		if err != nil {
			t.Fatalf("Feed: %v", err)
		}
		for _, e := range events {
			evs = append(evs, toEv(e))
		}
	}
	pending = string(d.Pending())
	if e, ok := d.Flush(); ok {
		evs = append(evs, toEv(e))
	}
	return evs, pending
}

// splitAt cuts s at the given offsets.
func splitAt(s []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:c])
		prev = c
	}
	return append(out, s[prev:])
}

// semantic drops the events that carry nothing (only line endings or
// comments): splitting a CRLF between chunks may add one of those.
func semantic(evs []ev) []ev {
	var out []ev
	for _, e := range evs {
		if e.Data == "-" && e.Type == "-" && e.ID == "-" {
			continue
		}
		e.Raw = ""
		out = append(out, e)
	}
	return out
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []ev
		pending string
	}{
		{
			name: "fixture shape",
			in:   "event: message\nid: 1\ndata: {\"a\":1}\n\n",
			want: []ev{{Raw: "event: message\nid: 1\ndata: {\"a\":1}\n\n", Data: `{"a":1}`, Type: "message", ID: "1", Terminated: true}},
		},
		{
			name: "multi-line data joined with LF",
			in:   "data: a\ndata:b\ndata:  c\ndata\ndata:\n\n",
			want: []ev{{Raw: "data: a\ndata:b\ndata:  c\ndata\ndata:\n\n", Data: "a\nb\n c\n\n", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "CRLF",
			in:   "id: 7\r\ndata: x\r\n\r\ndata: y\r\n\r\n",
			want: []ev{
				{Raw: "id: 7\r\ndata: x\r\n\r\n", Data: "x", Type: "-", ID: "7", Terminated: true},
				{Raw: "data: y\r\n\r\n", Data: "y", Type: "-", ID: "-", Terminated: true},
			},
		},
		{
			name: "CR only",
			in:   "data: x\rdata: y\r\r",
			want: []ev{{Raw: "data: x\rdata: y\r\r", Data: "x\ny", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "mixed endings",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []ev{{Raw: "data: a\r\ndata: b\rdata: c\n\r\n", Data: "a\nb\nc", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "comments and retry kept, not data",
			in:   ": ping\nretry: 1000\n\n:keepalive\n\n",
			want: []ev{
				{Raw: ": ping\nretry: 1000\n\n", Data: "-", Type: "-", ID: "-", Terminated: true},
				{Raw: ":keepalive\n\n", Data: "-", Type: "-", ID: "-", Terminated: true},
			},
		},
		{
			name: "BOM at stream start",
			in:   "\xef\xbb\xbfdata: x\n\n",
			want: []ev{{Raw: "\xef\xbb\xbfdata: x\n\n", Data: "x", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "BOM later is part of a field name",
			in:   "data: x\n\n\xef\xbb\xbfdata: y\n\n",
			want: []ev{
				{Raw: "data: x\n\n", Data: "x", Type: "-", ID: "-", Terminated: true},
				{Raw: "\xef\xbb\xbfdata: y\n\n", Data: "-", Type: "-", ID: "-", Terminated: true},
			},
		},
		{
			name: "field names are case-sensitive",
			in:   "Data: x\nDATA: y\n\n",
			want: []ev{{Raw: "Data: x\nDATA: y\n\n", Data: "-", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "data prefix only",
			in:   "dataX: x\ndata : y\n\n",
			want: []ev{{Raw: "dataX: x\ndata : y\n\n", Data: "-", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "empty data is not nil",
			in:   "data:\n\n",
			want: []ev{{Raw: "data:\n\n", Data: "", Type: "-", ID: "-", Terminated: true}},
		},
		{
			name: "last event and id fields win, id with NUL ignored",
			in:   "event: a\nevent: b\nid: 1\nid: 2\x00\ndata: x\n\n",
			want: []ev{{Raw: "event: a\nevent: b\nid: 1\nid: 2\x00\ndata: x\n\n", Data: "x", Type: "b", ID: "1", Terminated: true}},
		},
		{
			name: "blank lines are empty events",
			in:   "\n\ndata: x\n\n",
			want: []ev{
				{Raw: "\n", Data: "-", Type: "-", ID: "-", Terminated: true},
				{Raw: "\n", Data: "-", Type: "-", ID: "-", Terminated: true},
				{Raw: "data: x\n\n", Data: "x", Type: "-", ID: "-", Terminated: true},
			},
		},
		{
			name:    "incomplete event is held, then flushed",
			in:      "data: x\n\ndata: y\nid: 3",
			pending: "data: y\nid: 3",
			want: []ev{
				{Raw: "data: x\n\n", Data: "x", Type: "-", ID: "-", Terminated: true},
				{Raw: "data: y\nid: 3", Data: "y", Type: "-", ID: "3", Terminated: false},
			},
		},
		{
			name:    "BOM prefix alone is held",
			in:      "\xef\xbb",
			pending: "\xef\xbb",
			want:    []ev{{Raw: "\xef\xbb", Data: "-", Type: "-", ID: "-", Terminated: false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			evs, pending := decodeChunks(t, [][]byte{in})
			if diff := cmp.Diff(tt.want, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if pending != tt.pending {
				t.Errorf("pending = %q, want %q", pending, tt.pending)
			}
			// Every split into two and three chunks gives the same events
			// (up to empty events from a split CRLF) and the same bytes.
			for i := 0; i <= len(in); i++ {
				for j := i; j <= len(in); j++ {
					chunks := splitAt(in, i, j)
					got, _ := decodeChunks(t, chunks)
					if diff := cmp.Diff(semantic(tt.want), semantic(got)); diff != "" {
						t.Fatalf("split at %d,%d (-want +got):\n%s", i, j, diff)
					}
					var all []byte
					for _, e := range got {
						all = append(all, e.Raw...)
					}
					if !bytes.Equal(all, in) {
						t.Fatalf("split at %d,%d: concatenated Raw = %q", i, j, all)
					}
				}
			}
		})
	}
}

func readFixtures(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/fixtures/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".sse")] = b
	}
	return out
}

func TestFixtures(t *testing.T) {
	for name, body := range readFixtures(t) {
		t.Run(name, func(t *testing.T) {
			evs, pending := decodeChunks(t, [][]byte{body})
			if pending != "" {
				t.Errorf("pending %q", pending)
			}
			if n := bytes.Count(body, []byte("\ndata: ")); len(evs) != n {
				t.Fatalf("%d events, want %d", len(evs), n)
			}
			for i, e := range evs {
				if e.Type != "message" || e.ID == "-" || !e.Terminated {
					t.Errorf("event %d: %+v", i, e)
				}
				if !json.Valid([]byte(e.Data)) {
					t.Errorf("event %d data is not JSON: %q", i, e.Data)
				}
			}
		})
	}
}

// TestProgressEveryOffset splits the recorded progress stream at every byte
// offset, and also feeds it byte by byte.
func TestProgressEveryOffset(t *testing.T) {
	body := readFixtures(t)["tools-call-progress"]
	want, _ := decodeChunks(t, [][]byte{body})
	if len(want) != 5 {
		t.Fatalf("%d events, want 5", len(want))
	}
	check := func(name string, chunks [][]byte) {
		t.Helper()
		var d Decoder
		var got []ev
		var out []byte
		for _, c := range chunks {
			events, err := d.Feed(c)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, e := range events {
				got = append(got, toEv(e))
				out = append(out, e.Raw...)
			}
			// What was emitted plus what is held is exactly what was fed.
			if fed := bytes.Join(chunks, nil); !bytes.HasPrefix(fed, append(append([]byte(nil), out...), d.Pending()...)) {
				t.Fatalf("%s: emitted+pending is not a prefix of the input", name)
			}
		}
		if len(d.Pending()) != 0 {
			t.Fatalf("%s: pending %q at end", name, d.Pending())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", name, diff)
		}
		if !bytes.Equal(out, body) {
			t.Fatalf("%s: output differs from input", name)
		}
	}
	for i := 0; i <= len(body); i++ {
		check("split", splitAt(body, i))
	}
	var bytewise [][]byte
	for i := range body {
		bytewise = append(bytewise, body[i:i+1])
	}
	check("bytewise", bytewise)
}

func TestHeldEventKeptAcrossFeeds(t *testing.T) {
	// The Raw of an event completed from held bytes must not be overwritten
	// by the bytes held next in the same Feed.
	var d Decoder
	if _, err := d.Feed([]byte("data: first-event-")); err != nil {
		t.Fatal(err)
	}
	events, err := d.Feed([]byte("tail\n\ndata: second-held"))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || string(events[0].Raw) != "data: first-event-tail\n\n" || string(events[0].Data) != "first-event-tail" {
		t.Fatalf("got %+v", events)
	}
	if string(d.Pending()) != "data: second-held" {
		t.Fatalf("pending %q", d.Pending())
	}
}

func TestNoCopyForWholeEvents(t *testing.T) {
	chunk := []byte("data: a\n\ndata: b\n\n")
	var d Decoder
	events, err := d.Feed(chunk)
	if err != nil || len(events) != 2 {
		t.Fatalf("%v %v", events, err)
	}
	if &events[0].Raw[0] != &chunk[0] || &events[1].Raw[0] != &chunk[9] {
		t.Error("events do not alias the chunk")
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := d.Feed(chunk); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Feed of whole events allocates %v times", allocs)
	}
}

func TestEventTooLarge(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
	}{
		{"held", []string{"data: 0123456789", "0123456789"}},
		{"completed from held", []string{"data: 01234567", "89012\n\n"}},
		{"whole in one chunk", []string{"data: 01234567890123456789\n\n"}},
		{"tail of a chunk", []string{"data: a\n\ndata: 01234567890123456789"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(20)
			var err error
			for _, c := range tt.chunks {
				if _, err = d.Feed([]byte(c)); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("err = %v, want ErrEventTooLarge", err)
			}
			if _, err := d.Feed([]byte("data: x\n\n")); !errors.Is(err, ErrEventTooLarge) {
				t.Errorf("decoder did not stay failed: %v", err)
			}
		})
	}
	d := NewDecoder(20)
	if evs, err := d.Feed([]byte("data: 0123456789\n\n")); err != nil || len(evs) != 1 {
		t.Errorf("event within the limit: %v %v", evs, err)
	}
}

func TestWithData(t *testing.T) {
	tests := []struct {
		name string
		in   string
		data *string // nil: WithData(nil)
		want string
	}{
		{"fixture shape", "event: message\nid: 1\ndata: {\"a\":1}\n\n", ptr(`{"a":2}`), "event: message\nid: 1\ndata: {\"a\":2}\n\n"},
		{"CRLF kept", "id: 1\r\ndata: x\r\n\r\n", ptr("y"), "id: 1\r\ndata: y\r\n\r\n"},
		{"CR kept", "data: x\rid: 2\r\r", ptr("y"), "data: y\rid: 2\r\r"},
		{"multi-line to one, other lines in place", "data: a\nid: 1\ndata: b\n\n", ptr("z"), "data: z\nid: 1\n\n"},
		{"one to multi-line", "data:x\n\n", ptr("a\n b\r\nc\rd"), "data:a\ndata:  b\ndata:c\ndata:d\n\n"},
		{"no-space style kept", "data:x\n\n", ptr("y"), "data:y\n\n"},
		{"event without data gets data before the blank line", "event: e\r\n\r\n", ptr("x"), "event: e\r\ndata: x\r\n\r\n"},
		{"nil removes data lines", ": c\ndata: a\ndata: b\nid: 1\n\n", nil, ": c\nid: 1\n\n"},
		{"BOM kept", "\xef\xbb\xbfdata: a\n\n", ptr("b"), "\xef\xbb\xbfdata: b\n\n"},
		{"empty data", "data: a\n\n", ptr(""), "data: \n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decoder
			events, err := d.Feed([]byte(tt.in))
			if err != nil || len(events) != 1 {
				t.Fatalf("Feed: %v %v", events, err)
			}
			var data []byte
			if tt.data != nil {
				data = []byte(*tt.data)
			}
			got := events[0].WithData(data)
			if string(got) != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if string(events[0].Raw) != tt.in {
				t.Error("WithData modified Raw")
			}
		})
	}
	t.Run("unterminated", func(t *testing.T) {
		var d Decoder
		if _, err := d.Feed([]byte("event: e\nid: 1")); err != nil {
			t.Fatal(err)
		}
		e, ok := d.Flush()
		if !ok || e.Terminated() {
			t.Fatalf("Flush = %+v, %v", e, ok)
		}
		if got, want := string(e.WithData([]byte("x"))), "event: e\nid: 1\ndata: x\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func ptr(s string) *string { return &s }

func TestFlushEmpty(t *testing.T) {
	var d Decoder
	if _, ok := d.Flush(); ok {
		t.Error("Flush of an empty decoder returned an event")
	}
	if _, err := d.Feed([]byte("data: x\n\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Flush(); ok {
		t.Error("Flush with nothing held returned an event")
	}
}
