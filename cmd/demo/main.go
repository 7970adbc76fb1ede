// Command demo runs the whole product on loopback — the example plugin, the
// mcp-extproc sidecar, an MCP server and an Envoy stand-in — pushes a scripted
// MCP session through it, restarts the plugin, and prints what happened.
// `make demo` runs it.
//
//	go run ./cmd/demo [-transports mcp|mcp-node|grpc|grpc-uds|unix_socket[,second]]
//
// -transports picks how the example policy is served: one transport serves
// the whole policy as one plugin; two split it into a deny plugin over the
// first and a redaction plugin over the second, in one sidecar config.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/localstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// parseTransports reads the -transports flag.
func parseTransports(list string) ([]localstack.Transport, error) {
	var out []localstack.Transport
	for _, name := range strings.Split(list, ",") {
		t, err := localstack.ParseTransport(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.String("transports", "mcp", "how the example policy is served: one or two (deny, redact) of mcp, mcp-node (the TypeScript SDK server on Node.js), grpc, grpc-uds, unix_socket, comma-separated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	transports, err := parseTransports(*list)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 2
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	st, err := localstack.Start(ctx, localstack.Options{Logger: log, Transports: transports})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer st.Close()
	if err := st.WaitReady(ctx); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nmcp-extproc demo\n  MCP endpoint (Envoy stand-in): %s\n  sidecar admin: %s\n  plugin config: %s\n  policy: deny %q, redact e-mail addresses\n  plugins: %s\n\n",
		st.URL, st.AdminURL, st.ConfigPath, localstack.Policy.Deny[0], strings.Join(st.Plugins(), "; "))

	fmt.Fprintln(stdout, "1. A scripted MCP session through Envoy, the sidecar and the plugin:")
	outcomes, err := e2e.Script(ctx, st.URL, nil)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	code := e2e.Print(stdout, outcomes)

	fmt.Fprintln(stdout, "\n2. The plugin restarts (new process state, empty session store); the next calls:")
	if err := st.RestartPlugin(); err != nil {
		fmt.Fprintln(stderr, "demo: restart plugin:", err)
		return 1
	}
	outcomes, err = e2e.Script(ctx, st.URL, nil)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	if e2e.Print(stdout, outcomes) != 0 {
		code = 1
	}

	fmt.Fprintln(stdout, "\n3. 20 concurrent sessions for 3 s while the plugin restarts once more:")
	lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
	go func() {
		time.Sleep(time.Second)
		if err := st.RestartPlugin(); err != nil {
			fmt.Fprintln(stderr, "demo: restart plugin:", err)
		}
	}()
	res := e2e.Load(lctx, st.URL, nil, 20)
	lcancel()
	fmt.Fprintf(stdout, "   %d calls, %d failed\n", res.Calls, res.Failures)
	for _, e := range res.FirstErrors {
		fmt.Fprintln(stdout, "   failure:", e)
	}
	if res.Failures > 0 {
		code = 1
	}
	if code == 0 {
		fmt.Fprintln(stdout, "\nevery step ended as expected")
	} else {
		fmt.Fprintln(stdout, "\nSOME STEPS DID NOT END AS EXPECTED")
	}
	return code
}
