package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	var buf bytes.Buffer
	l, err := Open(ctx, Config{Format: FormatOCSF, Stdout: &buf, QueueSize: 3}, Product{Version: "v1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cap(l.queue) != 3 {
		t.Errorf("queue size %d, want 3", cap(l.queue))
	}
	l.Emit(fullEvent())
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := validateOCSF(buf.Bytes()); err != nil {
		t.Errorf("stdout sink wrote %s: %v", buf.Bytes(), err)
	}

	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err = Open(ctx, Config{Sink: SinkFile, Path: path}, Product{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Emit(fullEvent())
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"decision":"deny"`) {
		t.Errorf("file sink wrote %q (%v)", b, err)
	}

	l, err = Open(ctx, Config{Sink: SinkOTLP, OTLPEndpoint: "127.0.0.1:1", OTLPInsecure: true}, Product{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []Config{
		{Sink: "kafka"},
		{Sink: SinkFile},
		{Sink: SinkOTLP},
		{Format: "cef"},
		{Sink: SinkFile, Path: filepath.Join(path, "under-a-file")},
	} {
		if _, err := Open(ctx, bad, Product{}, Options{}); err == nil {
			t.Errorf("Open(%+v) succeeded", bad)
		}
	}
}
