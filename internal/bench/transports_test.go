package bench

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestTransportsQuick runs the transports scenario for a handful of
// operations: every transport's plugin is reached through the sidecar
// (called once per tools/call) and directly. It measures nothing.
func TestTransportsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sidecar and a plugin server per transport")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress bytes.Buffer
	r := newRunner(Options{Quick: true, Progress: &progress})
	if err := r.transports(ctx, benchTransports); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(r.rep.Tables) != 1 || len(r.rep.Tables[0].Rows) != len(benchTransports) {
		t.Fatalf("tables %+v", r.rep.Tables)
	}
}
