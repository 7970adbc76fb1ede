package mcpmsg

import "testing"

// TestMayBeResponse: the pre-check never rules out a message Parse reads as
// a response, escaped member names included.
func TestMayBeResponse(t *testing.T) {
	tests := []struct {
		data string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{`{"jsonrpc":"2.0","\u0069d":1,"result":{}}`, true},
		{`[{"jsonrpc":"2.0","method":"notifications/progress"},{"jsonrpc":"2.0","id":2,"result":{}}]`, true},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`, false},
		{`ping`, false},
	}
	for _, tt := range tests {
		if got := MayBeResponse([]byte(tt.data)); got != tt.want {
			t.Errorf("MayBeResponse(%s) = %v, want %v", tt.data, got, tt.want)
		}
		if b, err := Parse([]byte(tt.data)); err == nil && !tt.want {
			for _, m := range b.Messages {
				if m.Kind == KindResponse || m.Kind == KindError {
					t.Errorf("%s: pre-check rules out a message Parse reads as a response", tt.data)
				}
			}
		}
	}
}
