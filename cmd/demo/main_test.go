package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
)

// TestKeep: the demo's results and its logs go to different places (the
// log file named first), and -keep keeps the stack serving, its /metrics
// reachable at the printed URL, until the context ends (SIGINT/SIGTERM in
// main); then it stops and exits 0.
func TestKeep(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "demo.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
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
	checkIdentitySteps(t, out)
	checkRulesSteps(t, out)
	checkBuiltinSteps(t, out)
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

// checkIdentitySteps: the demo's step 3 refused the caller without a token
// (403, from the permission check) and the one with a bad token (401, from
// the token check, with its challenge), and let the caller with a good
// token through with its identity and address in what the plugin was sent.
func checkIdentitySteps(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`(?m)^ok +tools/call +a caller without a token +blocked +403 Permission denied: no authenticated caller \(plugin TokenCheck\)$`,
		`(?m)^ok +initialize +a caller with a bad token +blocked +401 Invalid token: .*\(plugin TokenCheck\), WWW-Authenticate: Bearer$`,
		`(?m)^ok +tools/call +a caller with a good token +allowed +echo: who am I; the plugin was sent user_email ` +
			regexp.QuoteMeta(demoUser) + `, global_context.user ` + regexp.QuoteMeta(demoUser) + `, client_host 127\.0\.0\.1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks a line matching %s:\n%s", want, out)
		}
	}
}

// checkBuiltinSteps: the demo's step 5 ran ContextForge's guardrails in
// the sidecar's process: an SSN masked, a secret and a denied word
// refused, the seventh call of the minute limited.
func checkBuiltinSteps(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`(?m)^ok +tools/call +echo an SSN and an e-mail address +modified +echo: SSN \*\*\*-\*\*-6789, mail a\*\*\*a@example\.com$`,
		`(?m)^ok +tools/call +echo an AWS access key +blocked +Potential secrets detected in tool arguments$`,
		`(?m)^ok +tools/call +echo a denied word +blocked +Denied words found in prompt$`,
		`(?m)^ok +tools/call +echo again \(7th: over the limit\) +blocked +Too Many Requests$`,
		`(?m)^   audit  tools/call +echo sha256:[0-9a-f]+ +deny +SecretsDetection$`,
		`(?m)^   audit  tools/call +echo sha256:[0-9a-f]+ +modify +PIIFilterPlugin$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks a line matching %s:\n%s", want, out)
		}
	}
}

// checkRulesSteps: the demo's step 4 hid progress from the guest's
// tools/list, refused the guest's call of it by the rule, and refused an
// echo by the argument rule.
func checkRulesSteps(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`(?m)^ok +tools/list +ada lists the tools +allowed +echo, progress$`,
		`(?m)^ok +tools/list +the guest lists the tools +allowed +echo$`,
		`(?m)^ok +tools/call +the guest calls progress anyway +blocked +refused by rule no-long-jobs-for-guests: guests may not start long jobs$`,
		`(?m)^ok +tools/call +ada echoes "sudo reboot" +blocked +refused by rule no-sudo: echo does not say sudo$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks a line matching %s:\n%s", want, out)
		}
	}
}

// TestRefusedCall: the denied callers' step fails unless the sidecar
// refused with the expected status and a JSON-RPC error: a caller that got
// through, or any other answer, is not a refusal.
func TestRefusedCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   e2e.Verdict
	}{
		{name: "refused", status: http.StatusForbidden, body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Permission denied: x","data":{"plugin":"TokenCheck"}}}`, want: e2e.Blocked},
		{name: "got through", status: http.StatusOK, body: `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, want: e2e.Allowed},
		{name: "other status", status: http.StatusUnauthorized, body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}`, want: e2e.Failed},
		{name: "no JSON-RPC error", status: http.StatusForbidden, body: `forbidden`, want: e2e.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("a caller without a token sent Authorization")
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			o := refusedCall(context.Background(), srv.URL, "step", "", `{}`, "tools/call", http.StatusForbidden)
			if o.Verdict != tc.want || o.OK() != (tc.want == e2e.Blocked) {
				t.Errorf("verdict %s (ok %v), want %s: %s", o.Verdict, o.OK(), tc.want, o.Detail)
			}
		})
	}
}
