package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/localstack"
)

// The demo's second caller, a guest, whom the rule no-long-jobs-for-guests
// of localstack.ConfigTemplate keeps from the progress tool.
const (
	guestToken = "demo-token-guest"
	guestUser  = "guest@example.com"
)

// rulesStep shows extproc.rules at work: the guest's tools/list lacks the
// tool a rule denies it, calling that tool anyway is refused by the rule,
// an argument rule refuses one echo; the demo's caller still sees every
// tool. It returns 0 when each ended as expected.
func rulesStep(ctx context.Context, st *localstack.Stack, stdout io.Writer) int {
	fmt.Fprintln(stdout, "\n4. Rules in the sidecar config (extproc.rules, CEL), no plugin involved:")
	guest, err := e2e.Connect(ctx, st.URL, callerClient(guestToken))
	if err != nil {
		fmt.Fprintln(stdout, "   guest:", err)
		return 1
	}
	defer guest.Close()
	ada, err := e2e.Connect(ctx, st.URL, callerClient(demoToken))
	if err != nil {
		fmt.Fprintln(stdout, "   "+demoUser+":", err)
		return 1
	}
	defer ada.Close()
	outcomes := []e2e.Outcome{
		listed(ctx, ada, "ada lists the tools", []string{"echo", "progress"}),
		listed(ctx, guest, "the guest lists the tools", []string{"echo"}),
		refusedByRule(ctx, guest, "the guest calls progress anyway", "progress", map[string]any{"steps": 1}, "no-long-jobs-for-guests"),
		refusedByRule(ctx, ada, "ada echoes \"sudo reboot\"", "echo", map[string]any{"message": "sudo reboot"}, "no-sudo"),
	}
	return e2e.Print(stdout, outcomes)
}

// listed lists cs's tools and expects exactly want.
func listed(ctx context.Context, cs *mcp.ClientSession, step string, want []string) e2e.Outcome {
	o := e2e.Outcome{Step: step, Method: "tools/list", Want: e2e.Allowed}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		o.Verdict, o.Detail = e2e.Failed, err.Error()
		return o
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	o.Detail = strings.Join(names, ", ")
	if o.Verdict = e2e.Allowed; !slices.Equal(names, want) {
		o.Verdict, o.Detail = e2e.Failed, fmt.Sprintf("listed [%s], want [%s]", o.Detail, strings.Join(want, ", "))
	}
	return o
}

// refusedByRule calls tool and expects a refusal naming rule.
func refusedByRule(ctx context.Context, cs *mcp.ClientSession, step, tool string, args map[string]any, rule string) e2e.Outcome {
	o := e2e.Outcome{Step: step, Method: "tools/call", Want: e2e.Blocked}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
		o.Verdict, o.Detail = e2e.Allowed, fmt.Sprintf("not refused: %+v", res.Content)
	case strings.Contains(err.Error(), rule) || strings.Contains(err.Error(), "guests may not") || strings.Contains(err.Error(), "does not say sudo"):
		o.Verdict, o.Detail = e2e.Blocked, "refused by rule "+rule+": "+lastPart(err.Error())
	default:
		o.Verdict, o.Detail = e2e.Failed, err.Error()
	}
	return o
}

// lastPart is the end of a wrapped error: the server's message.
func lastPart(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
