package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain lets the cpu scenario start this test binary as a child that
// serves one target (ChildEnv), as it starts cmd/bench outside tests.
func TestMain(m *testing.M) {
	if os.Getenv(ChildEnv) != "" {
		if err := ServeChild(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
