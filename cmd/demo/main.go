// Command demo runs the whole product on loopback — the example plugin, the
// mcp-extproc sidecar, an MCP server and an Envoy stand-in — pushes a scripted
// MCP session through it, restarts the plugin, shows a refused and an
// allowed caller, and prints what happened.
// `make demo` runs it.
//
//	go run ./cmd/demo [-transports mcp|mcp-node|grpc|grpc-uds|unix_socket[,second]] [-keep] [-log FILE]
//
// -transports picks how the example policy is served: one transport serves
// the whole policy as one plugin; two split it into a deny plugin over the
// first and a redaction plugin over the second, in one sidecar config.
//
// The sidecar's logs go to a file, named at the start (-log, default a new
// file in the temporary directory), so they never interleave with the
// results. With -keep the stack stays up after the script, its endpoints
// printed, until SIGINT (Ctrl-C) or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
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

// scriptTimeout bounds the scripted part (not the time -keep stays up).
const scriptTimeout = 2 * time.Minute

// options are the demo's command line.
type options struct {
	transports []localstack.Transport
	keep       bool
	logPath    string
	load       time.Duration
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

// parseFlags reads args; ok is false when they are unusable (said on stderr).
func parseFlags(args []string, stderr io.Writer) (o options, ok bool) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.String("transports", "mcp", "how the example policy is served: one or two (deny, redact) of mcp, mcp-node (the TypeScript SDK server on Node.js), grpc, grpc-uds, unix_socket, comma-separated")
	fs.BoolVar(&o.keep, "keep", false, "keep the stack up after the script, until SIGINT (Ctrl-C) or SIGTERM")
	fs.StringVar(&o.logPath, "log", "", "file for the sidecar's and the plugins' logs (default: a new file in the temporary directory)")
	fs.DurationVar(&o.load, "load", 3*time.Second, "how long step 4 runs 20 concurrent sessions (0 skips it)")
	if err := fs.Parse(args); err != nil {
		return o, false
	}
	t, err := parseTransports(*list)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return o, false
	}
	o.transports = t
	return o, true
}

// openLog creates the log file: path, or a new temporary file.
func openLog(path string) (*os.File, error) {
	if path == "" {
		return os.CreateTemp("", "mcp-extproc-demo-*.log")
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	logFile, err := openLog(o.logPath)
	if err != nil {
		fmt.Fprintln(stderr, "demo: log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintf(stdout, "sidecar and plugin logs: %s\n", logFile.Name())
	log := zerolog.New(zerolog.ConsoleWriter{Out: logFile, NoColor: true, TimeFormat: time.TimeOnly}).
		Level(zerolog.InfoLevel).With().Timestamp().Logger()

	sctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	st, err := localstack.Start(sctx, localstack.Options{Logger: log, Transports: o.transports,
		Tokens: map[string]string{demoToken: demoUser, guestToken: guestUser}})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer st.Close()
	if err := st.WaitReady(sctx); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	code := script(sctx, st, log, o.load, stdout, stderr)
	cancel()
	if o.keep && ctx.Err() == nil {
		keepUp(ctx, st, logFile.Name(), stdout)
	}
	return code
}

// script runs the six steps of the demo and prints their results; it
// returns 0 when every step ended as expected, else 1.
func script(ctx context.Context, st *localstack.Stack, log zerolog.Logger, load time.Duration, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "\nmcp-extproc demo\n  MCP endpoint (Envoy stand-in): %s\n  sidecar admin: %s\n  plugin config: %s\n  policy: deny %q, redact e-mail addresses; callers need a bearer token\n  plugins: %s\n\n",
		st.URL, st.AdminURL, st.ConfigPath, localstack.Policy.Deny[0], strings.Join(st.Plugins(), "; "))

	hc := callerClient(demoToken) // identity.go
	fmt.Fprintf(stdout, "1. A scripted MCP session through Envoy, the sidecar and the plugin, as %s (bearer token):\n", demoUser)
	outcomes, err := e2e.Script(ctx, st.URL, hc)
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
	outcomes, err = e2e.Script(ctx, st.URL, hc)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	if e2e.Print(stdout, outcomes) != 0 {
		code = 1
	}
	if identityStep(ctx, st, stdout) != 0 {
		code = 1
	}
	if rulesStep(ctx, st, stdout) != 0 { // rules.go
		code = 1
	}
	if builtinStep(ctx, log, stdout) != 0 { // builtin.go
		code = 1
	}
	if load > 0 && loadStep(ctx, st, load, hc, stdout, stderr) != 0 {
		code = 1
	}
	if code == 0 {
		fmt.Fprintln(stdout, "\nevery step ended as expected")
	} else {
		fmt.Fprintln(stdout, "\nSOME STEPS DID NOT END AS EXPECTED")
	}
	return code
}

// loadStep runs 20 concurrent sessions of hc's caller for d while the
// plugin restarts once, one second in (or half-way, for a shorter d).
func loadStep(ctx context.Context, st *localstack.Stack, d time.Duration, hc *http.Client, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "\n6. 20 concurrent sessions for %v while the plugin restarts once more:\n", d)
	lctx, lcancel := context.WithTimeout(ctx, d)
	defer lcancel()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		select {
		case <-time.After(min(time.Second, d/2)):
		case <-lctx.Done():
			return
		}
		if err := st.RestartPlugin(); err != nil {
			fmt.Fprintln(stderr, "demo: restart plugin:", err)
		}
	}()
	res := e2e.Load(lctx, st.URL, hc, 20)
	lcancel()
	<-restarted
	fmt.Fprintf(stdout, "   %d calls, %d failed\n", res.Calls, res.Failures)
	for _, e := range res.FirstErrors {
		fmt.Fprintln(stdout, "   failure:", e)
	}
	if res.Failures > 0 {
		return 1
	}
	return 0
}

// keepUp prints where the running stack can be reached and waits for ctx
// (SIGINT or SIGTERM); the caller then closes the stack.
func keepUp(ctx context.Context, st *localstack.Stack, logPath string, stdout io.Writer) {
	fmt.Fprintf(stdout, `
The stack stays up until Ctrl-C (SIGINT) or SIGTERM:
  MCP endpoint (Envoy stand-in): %s
  sidecar admin:                 %s  (/readyz, /healthz)
  sidecar metrics:               %s/metrics
  plugin config:                 %s  (edit it: the sidecar reloads it)
  logs:                          %s
Try: curl -s %s/metrics | grep mcp_extproc_plugin_invocations_total
`, st.URL, st.AdminURL, st.AdminURL, st.ConfigPath, logPath, st.AdminURL)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping the stack")
}
