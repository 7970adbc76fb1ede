package sse

import (
	"bytes"
	"testing"
)

// TestAppendEvent: an event written by AppendEvent has the exact framing
// documented and decodes back to its type and data.
func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name, typ string
		data      string
		want      string
	}{
		{"message", "message", `{"jsonrpc":"2.0"}`, "event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n"},
		{"no type", "", "x", "data: x\n\n"},
		{"multi-line data", "message", "a\nb\r\nc", "event: message\ndata: a\ndata: b\ndata: c\n\n"},
		{"empty data", "", "", "data: \n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendEvent([]byte("prefix"), tt.typ, []byte(tt.data))
			if string(got) != "prefix"+tt.want {
				t.Fatalf("AppendEvent = %q, want %q", got, "prefix"+tt.want)
			}
			var d Decoder
			evs, err := d.Feed(got[len("prefix"):])
			if err != nil || len(evs) != 1 {
				t.Fatalf("Feed = %d events, %v; want 1", len(evs), err)
			}
			wantData := bytes.ReplaceAll([]byte(tt.data), []byte("\r\n"), []byte("\n"))
			if !bytes.Equal(evs[0].Data, wantData) || string(evs[0].Type) != tt.typ {
				t.Errorf("decoded type %q data %q, want %q %q", evs[0].Type, evs[0].Data, tt.typ, wantData)
			}
		})
	}
}
