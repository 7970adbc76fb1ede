package secrets

import (
	"testing"
)

// allDetectors is every detector on, the opt-in ones too.
func allDetectors() []detector {
	ds := detectors()
	for i := range ds {
		ds[i].on = true
	}
	return ds
}

// TestGatesOneByOne: the one-pass gate of a detector set is open exactly
// when one of its detectors' own gates is, marker by marker.
func TestGatesOneByOne(t *testing.T) {
	for _, s := range []string{
		"", "hello", `{"name":"echo","args":{"message":"hello"}}`,
		"AKIA", "akia", "AIza", "aws", "AWS", "Aws", "aWs", "gho_", "github_pat_", "_live_", "_TEST_", "xox", "XOX",
		"-----BEGIN ", "eyJ", "API", "Access", "bearer", "AUTH",
		"0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcde",
		"QUJDREVGR0hJSktMTU5PUFFSU1Q=", "QUJDREVGR0hJSktMTU5PUF",
	} {
		gatesAgree(t, s)
	}
}

// FuzzGates: the same, for any text.
func FuzzGates(f *testing.F) {
	for _, s := range []string{"hello", "AKIAIOSFODNN7EXAMPLE", "the aws secret", "ghp_x", "-----BEGIN RSA"} {
		f.Add(s)
	}
	f.Fuzz(gatesAgree)
}

func gatesAgree(t *testing.T, s string) {
	for _, set := range [][]detector{detectors(), allDetectors()} {
		var on []detector
		for _, d := range set {
			if d.on {
				on = append(on, d)
			}
		}
		want := false
		for i := range on {
			want = want || on[i].gate.open(s)
		}
		if got := newGates(on).open(s); got != want {
			t.Errorf("%d detectors, %q: the one-pass gate is %v, the detectors' own %v", len(on), s, got, want)
		}
	}
}
