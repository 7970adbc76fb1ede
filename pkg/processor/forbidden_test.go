package processor

import "testing"

// TestForbiddenHeader: a header a plugin returns is never set upstream when
// Envoy reserves it: pseudo-headers, every name starting with "x-envoy"
// (Envoy's rule is the prefix, with or without a dash after it), and the
// framing headers.
func TestForbiddenHeader(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{":path", true},
		{":authority", true},
		{"x-envoy-original-path", true},
		{"x-envoyfoo", true},
		{"x-envoy", true},
		{"host", true},
		{"content-length", true},
		{"transfer-encoding", true},
		{"x-guard", false},
		{"x-envo", false},
		{"authorization", false},
	}
	for _, tt := range tests {
		if got := forbiddenHeader(tt.name); got != tt.want {
			t.Errorf("forbiddenHeader(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
