// Command e2e drives MCP traffic through Envoy and the mcp-extproc sidecar:
// a scripted session whose every step must end as expected, or a sustained
// load that must see no failed call. It exits 1 on any failure.
//
//	e2e --url http://localhost:8080/mcp                       # scripted session
//	e2e --url http://localhost:8080/mcp --load --concurrency 20 --duration 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout))
}

func run(ctx context.Context, args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	url := fs.String("url", "http://localhost:8080/mcp", "MCP endpoint behind Envoy")
	load := fs.Bool("load", false, "run a sustained load instead of the scripted session")
	concurrency := fs.Int("concurrency", 20, "load: concurrent MCP sessions")
	duration := fs.Duration("duration", 30*time.Second, "load: how long to run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *load {
		lctx, cancel := context.WithTimeout(ctx, *duration)
		defer cancel()
		res := e2e.Load(lctx, *url, nil, *concurrency)
		fmt.Fprintf(stdout, "load: %d calls, %d failed\n", res.Calls, res.Failures)
		for _, e := range res.FirstErrors {
			fmt.Fprintf(stdout, "  failure: %s\n", e)
		}
		if res.Failures > 0 || res.Calls == 0 {
			return 1
		}
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	outcomes, err := e2e.Script(sctx, *url, nil)
	if err != nil {
		fmt.Fprintln(stdout, "e2e:", err)
		return 1
	}
	return e2e.Print(stdout, outcomes)
}
