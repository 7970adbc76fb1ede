package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestKeep: the demo's results and its logs go to different places (the
// log file named first), and -keep keeps the stack serving, its /metrics
// reachable at the printed URL, until the context ends (SIGINT/SIGTERM in
// main); then it stops and exits 0.
func TestKeep(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "demo.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-keep", "-load=0", "-log", logPath}, &stdout, &stderr) }()

	deadline := time.After(90 * time.Second)
	metrics := regexp.MustCompile(`sidecar metrics: +(http://\S+/metrics)`)
	var url string
	for url == "" {
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before staying up:\n%s\n%s", code, stdout.String(), stderr.String())
		case <-deadline:
			t.Fatalf("demo did not stay up:\n%s\n%s", stdout.String(), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if m := metrics.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
	}
	reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
	defer reqCancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s while kept up: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("mcp_extproc_build_info")) {
		t.Errorf("GET %s: %d, build_info present: %v", url, resp.StatusCode, bytes.Contains(body, []byte("mcp_extproc_build_info")))
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the stop, want 0:\n%s\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop after its context ended")
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "sidecar and plugin logs: "+logPath+"\n") {
		t.Errorf("stdout does not start by naming the log file:\n%s", out)
	}
	for _, want := range []string{"every step ended as expected", "stays up until Ctrl-C", "stopping the stack"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	const logLine = "mcp-extproc started"
	if !bytes.Contains(logs, []byte(logLine)) {
		t.Errorf("log file lacks %q:\n%s", logLine, logs)
	}
	if strings.Contains(out, logLine) || strings.Contains(stderr.String(), logLine) {
		t.Errorf("sidecar logs reached stdout or stderr:\n%s\n%s", out, stderr.String())
	}
}
