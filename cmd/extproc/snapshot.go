package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// snapshotUsage is the help of `extproc tools snapshot`.
const snapshotUsage = `Usage:
  extproc tools snapshot --url URL [--timeout 30s] > tools.json

Lists every tool, prompt and resource template the MCP server at URL
(Streamable HTTP) advertises and prints their fingerprints as the approved
snapshot of extproc.tool_pinning (mode: approved, snapshot: tools.json).
Take it from the server you reviewed; --check-config validates the file.
`

// runTools runs `extproc tools ...` and returns the exit code.
func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "snapshot" {
		fmt.Fprint(stderr, snapshotUsage)
		return 2
	}
	fs := flag.NewFlagSet("extproc tools snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, snapshotUsage) }
	url := fs.String("url", "", "the MCP server's Streamable HTTP endpoint, e.g. http://mcp-server:8080/mcp")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole snapshot")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *url == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, snapshotUsage)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	snap, err := toolpin.Take(ctx, &http.Client{Timeout: *timeout}, *url)
	if err != nil {
		fmt.Fprintf(stderr, "extproc tools snapshot: %v\n", err)
		return 1
	}
	b, err := snap.Encode()
	if err != nil {
		fmt.Fprintf(stderr, "extproc tools snapshot: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(b); err != nil {
		return 1
	}
	fmt.Fprintf(stderr, "extproc tools snapshot: %d tools, %d prompts, %d resource templates\n", len(snap.Tools), len(snap.Prompts), len(snap.ResourceTemplates))
	return 0
}
