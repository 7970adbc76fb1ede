package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-extproc/mcp-extproc/internal/localstack"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
)

// Endpoint is an ExternalProcessor reached over gRPC on loopback.
type Endpoint struct {
	// Name labels the target in reports.
	Name   string
	Client extprocv3.ExternalProcessorClient
	// Addr is the target's gRPC address.
	Addr  string
	close func() error
}

// Close closes the client connection and stops what the endpoint started.
func (e *Endpoint) Close() error {
	if e == nil || e.close == nil {
		return nil
	}
	return e.close()
}

// dial returns a plain-text gRPC client of addr.
func dial(addr string) (extprocv3.ExternalProcessorClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return extprocv3.NewExternalProcessorClient(conn), conn, nil
}

// Serve runs srv on a gRPC server on 127.0.0.1 (a free port) with
// grpc-go's default options, and returns an Endpoint dialled to it.
func Serve(name string, srv extprocv3.ExternalProcessorServer) (*Endpoint, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis) // returns when gs stops
	}()
	client, conn, err := dial(lis.Addr().String())
	if err != nil {
		gs.Stop()
		<-served
		return nil, err
	}
	return &Endpoint{Name: name, Client: client, Addr: lis.Addr().String(), close: func() error {
		err := conn.Close()
		gs.Stop()
		<-served
		return err
	}}, nil
}

// PluginSpec is one plugin in a sidecar config.
type PluginSpec struct {
	Name string
	URL  string
	// Hooks are set in the local config, so they override the server's.
	Hooks []cpex.HookType
	// Tools, if set, becomes conditions: [{tools: Tools}].
	Tools []string
	// Priority orders the chain (lower first).
	Priority int
}

// SidecarConfig renders the cpex YAML for plugins: sequential mode,
// on_error fail, plugin_timeout 5 s, hook_timeout 6 s (as in envoy/envoy.yaml
// and manifests/), and extproc.max_body_bytes maxBody (0: the default, 1 MiB).
func SidecarConfig(maxBody int, plugins ...PluginSpec) string {
	var b strings.Builder
	b.WriteString("plugins:\n")
	for _, p := range plugins {
		fmt.Fprintf(&b, "  - name: %s\n    kind: external\n    mode: sequential\n    on_error: fail\n    priority: %d\n", p.Name, p.Priority)
		hooks := make([]string, len(p.Hooks))
		for i, h := range p.Hooks {
			hooks[i] = string(h)
		}
		fmt.Fprintf(&b, "    hooks: [%s]\n", strings.Join(hooks, ", "))
		if len(p.Tools) > 0 {
			fmt.Fprintf(&b, "    conditions: [{tools: [%s]}]\n", strings.Join(p.Tools, ", "))
		}
		fmt.Fprintf(&b, "    mcp: {proto: STREAMABLEHTTP, url: %q}\n", p.URL)
	}
	b.WriteString("plugin_settings:\n  plugin_timeout: 5\n  plugin_health_check_interval: 60\n")
	b.WriteString("extproc:\n  mcp_paths: [\"/mcp\"]\n  hook_timeout: 6\n")
	if maxBody > 0 {
		fmt.Fprintf(&b, "  max_body_bytes: %d\n", maxBody)
	}
	return b.String()
}

// Logger is the logger the sidecar runs with in benchmarks: what
// cmd/extproc builds for --log-level info, writing to io.Discard.
func Logger() zerolog.Logger {
	return zerolog.New(logsafe.NewWriter(io.Discard)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// StartSidecar runs the production sidecar (internal/sidecar.Run) with the
// cpex YAML configYAML on loopback and waits until it reports ready (every
// plugin connected). Each of mods may change the sidecar's options before
// it starts. Close stops it.
func StartSidecar(ctx context.Context, name, configYAML string, mods ...func(*sidecar.Options)) (*Endpoint, error) {
	cfg, err := config.Parse([]byte(configYAML), nil)
	if err != nil {
		return nil, fmt.Errorf("sidecar config: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	started := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	opts := sidecar.Options{
		Config: cfg, GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Logger: Logger(), GracePeriod: 2 * time.Second, ReloadInterval: -1,
		Started: func(g, a net.Addr) { started <- [2]net.Addr{g, a} },
	}
	for _, mod := range mods {
		mod(&opts)
	}
	go func() { done <- sidecar.Run(runCtx, opts) }()
	stop := func() error {
		cancel()
		return <-done
	}
	var addrs [2]net.Addr
	select {
	case addrs = <-started:
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("sidecar: %w", err)
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), stop())
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, 30*time.Second)
	defer cancelReady()
	if err := localstack.WaitReady(readyCtx, "http://"+addrs[1].String()); err != nil {
		return nil, errors.Join(err, stop())
	}
	client, conn, err := dial(addrs[0].String())
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	return &Endpoint{Name: name, Client: client, Addr: addrs[0].String(), close: func() error {
		return errors.Join(conn.Close(), stop())
	}}, nil
}
