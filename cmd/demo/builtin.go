package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/localstack"
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
)

// builtinPlugins are ContextForge's four most used guardrails as its docs
// write them (class paths, legacy modes), run in the sidecar's process.
const builtinPlugins = `  - name: "RateLimiterPlugin"
    kind: "cpex_rate_limiter.RateLimiterPlugin"
    hooks: ["prompt_pre_fetch", "tool_pre_invoke"]
    mode: "enforce"
    priority: 20
    config:
      backend: "memory"
      by_user: "6/m"
  - name: "PIIFilterPlugin"
    kind: "plugins.pii_filter.pii_filter.PIIFilterPlugin"
    hooks: ["tool_pre_invoke"]
    mode: "enforce"
    priority: 50
    config:
      detect_ssn: true
      detect_email: true
      default_mask_strategy: "partial"
  - name: "SecretsDetection"
    kind: "cpex_secrets_detection.SecretsDetectionPlugin"
    hooks: ["tool_pre_invoke", "tool_post_invoke"]
    mode: "enforce"
    priority: 51
    config:
      block_on_detection: true
  - name: "DenyListPlugin"
    kind: "plugins.deny_filter.deny.DenyListPlugin"
    hooks: ["tool_pre_invoke"]
    mode: "enforce"
    priority: 100
    config:
      words: ["innovative", "groundbreaking", "revolutionary"]
`

// builtinStep starts a second stack whose sidecar runs only built-in
// plugins, with no plugin server, and shows them redact, block and limit.
// It returns 0 when each call ended as expected.
func builtinStep(ctx context.Context, log zerolog.Logger, stdout io.Writer) int {
	fmt.Fprintln(stdout, "\n5. Built-in plugins: ContextForge's pii_filter, secrets_detection, deny_filter and rate_limiter (6 calls a minute)\n   in the sidecar's process, from their ContextForge config, with no plugin server:")
	dir, err := os.MkdirTemp("", "mcp-extproc-demo-audit-")
	if err != nil {
		fmt.Fprintln(stdout, "   audit:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditPath := filepath.Join(dir, "audit.jsonl")
	st, err := localstack.Start(ctx, localstack.Options{Logger: log, Builtins: builtinPlugins, Config: localstack.ConfigTemplate + auditConfig(auditPath)})
	if err != nil {
		fmt.Fprintln(stdout, "   stack:", err)
		return 1
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	if err := st.WaitReady(ctx); err != nil {
		fmt.Fprintln(stdout, "   stack:", err)
		return 1
	}
	cs, err := e2e.Connect(ctx, st.URL, http.DefaultClient)
	if err != nil {
		fmt.Fprintln(stdout, "   connect:", err)
		return 1
	}
	call := func(step, message string, want e2e.Verdict, mark string) e2e.Outcome {
		o := e2e.Outcome{Step: step, Method: "tools/call", Want: want}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": message}})
		switch {
		case err != nil && strings.Contains(err.Error(), mark):
			o.Verdict, o.Detail = e2e.Blocked, lastPart(err.Error())
		case err != nil:
			o.Verdict, o.Detail = e2e.Failed, err.Error()
		case len(res.Content) != 1:
			o.Verdict, o.Detail = e2e.Failed, fmt.Sprintf("%d content blocks", len(res.Content))
		default:
			text := ""
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
			o.Verdict, o.Detail = e2e.Allowed, text
			if mark != "" && strings.Contains(text, mark) {
				o.Verdict = e2e.Modified
			}
		}
		return o
	}
	outcomes := []e2e.Outcome{
		call("echo a harmless message", "hello world", e2e.Allowed, ""),
		call("echo an SSN and an e-mail address", "SSN 123-45-6789, mail ada@example.com", e2e.Modified, "***-**-6789"),
		call("echo an AWS access key", "key AKIAIOSFODNN7EXAMPLE", e2e.Blocked, "Secrets detected"),
		call("echo a denied word", "a revolutionary idea", e2e.Blocked, "Prompt not allowed"),
		call("echo again (5th call this minute)", "five", e2e.Allowed, ""),
		call("echo again (6th)", "six", e2e.Allowed, ""),
		// The refusal carries HTTP 429 (and Retry-After), which MCP
		// clients report as the transport's "Too Many Requests".
		call("echo again (7th: over the limit)", "seven", e2e.Blocked, "Too Many Requests"),
	}
	failed := e2e.Print(stdout, outcomes)
	cs.Close()
	st.Close() // the audit logger writes what it holds before the sidecar ends
	closed = true
	return failed + printAudit(stdout, auditPath, len(outcomes))
}

// auditConfig turns on the audit events of the built-in stack: one JSON
// line per call to path (docs/audit.md).
func auditConfig(path string) string {
	return fmt.Sprintf("  audit:\n    enabled: true\n    sink: file\n    path: %q\n", path)
}

// printAudit shows the audit events of the step's calls, one line each,
// and returns 1 unless there is one per call.
func printAudit(stdout io.Writer, path string, calls int) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stdout, "   audit:", err)
		return 1
	}
	fmt.Fprintf(stdout, "   the audit events of these calls (extproc.audit, JSON lines):\n")
	n := 0
	for line := range strings.Lines(string(b)) {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			fmt.Fprintln(stdout, "   audit:", err)
			return 1
		}
		by := e.DecidedBy.Name
		if by == "" {
			by = e.DecidedBy.Kind
		}
		row := fmt.Sprintf("   audit  %-10s %s %s  %-7s %s", e.Method, e.Target, e.ArgumentsHash[:min(len(e.ArgumentsHash), 19)], e.Decision, by)
		fmt.Fprintln(stdout, strings.TrimRight(row, " "))
		n++
	}
	if n != calls {
		fmt.Fprintf(stdout, "   audit: %d events for %d calls\n", n, calls)
		return 1
	}
	return 0
}
