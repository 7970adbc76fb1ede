package mcpmsg

import (
	"errors"
	"testing"
)

// TestInvalidParamsCarryID: an invalid-params error about a single request
// whose id was readable carries that id, so the client can match the error.
func TestInvalidParamsCarryID(t *testing.T) {
	tests := []struct {
		body   string
		wantID string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":null}}`, "7"},
		{`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{}}`, `"a"`},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","name":"y"}}`, ""},          // duplicate: not params-level
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":1}}]`, ""},                     // batch: no single id
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}},"x":}`, ""}, // parse error
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.body))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: err = %v, want *Error", tt.body, err)
		}
		if string(e.ID) != tt.wantID {
			t.Errorf("%s: ID = %q, want %q (%v)", tt.body, e.ID, tt.wantID, e)
		}
	}
}
