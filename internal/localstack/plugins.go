package localstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// Transport is how the stack serves a plugin (and the plugin config section
// the sidecar reaches it with).
type Transport string

// The transports of a plugin server.
const (
	MCP        Transport = "mcp"         // MCP Streamable HTTP: mcp: {url}
	GRPC       Transport = "grpc"        // gRPC over TCP: grpc: {target}
	GRPCUDS    Transport = "grpc-uds"    // gRPC over a Unix socket: grpc: {uds}
	UnixSocket Transport = "unix_socket" // framed protobuf on a Unix socket: unix_socket: {path}
	// MCPNode is MCP Streamable HTTP served by the plugin server written
	// on the official TypeScript SDK, a Node.js process (nodeplugin).
	MCPNode Transport = "mcp-node"
)

// Transports lists every transport, for flags and tests.
func Transports() []Transport { return []Transport{MCP, GRPC, GRPCUDS, UnixSocket, MCPNode} }

// ParseTransport accepts the name of a transport.
func ParseTransport(s string) (Transport, error) {
	for _, t := range Transports() {
		if strings.EqualFold(s, string(t)) {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown plugin transport %q (want one of %v)", s, Transports())
}

// policies splits the demo policy over n plugin servers: one serves all of
// it; two serve the deny list and the redaction as two plugins.
func policies(n int) ([]policy.Config, error) {
	switch n {
	case 1:
		return []policy.Config{Policy}, nil
	case 2:
		return []policy.Config{
			{Name: "DenyPolicy", Deny: Policy.Deny},
			{Name: "RedactPolicy", Redact: Policy.Redact},
		}, nil
	}
	return nil, fmt.Errorf("%d plugin transports: the demo policy splits over one or two", n)
}

// pluginServer is one plugin server on loopback that can go away and come
// back on the same address (TCP port or socket path) with a fresh state.
type pluginServer struct {
	name      string
	transport Transport
	cfg       policy.Config
	addr      string             // host:port, or the socket path
	node      *nodeplugin.Server // the Node.js process of MCPNode

	mu   sync.Mutex
	stop func() // nil while stopped
}

// startPluginServer serves cfg over t; dir holds its socket, if any.
func startPluginServer(cfg policy.Config, t Transport, dir string) (*pluginServer, error) {
	p := &pluginServer{name: cfg.Name, transport: t, cfg: cfg, addr: "127.0.0.1:0"}
	if t == GRPCUDS || t == UnixSocket {
		p.addr = filepath.Join(dir, strings.ToLower(cfg.Name)+".sock")
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// section is the plugin's transport section of the sidecar config (YAML,
// indented for a plugins: entry).
func (p *pluginServer) section() string {
	switch p.transport {
	case GRPC:
		return fmt.Sprintf("    grpc:\n      target: %s\n", p.addr)
	case GRPCUDS:
		return fmt.Sprintf("    grpc:\n      uds: %s\n", p.addr)
	case UnixSocket:
		return fmt.Sprintf("    unix_socket:\n      path: %s\n      reconnect_attempts: 3\n      reconnect_delay: 0.05\n", p.addr)
	case MCPNode:
		// A Node.js process takes most of a second to listen again.
		return fmt.Sprintf("    mcp:\n      proto: STREAMABLEHTTP\n      url: http://%s/mcp\n      reconnect_attempts: 10\n      reconnect_delay: 0.1\n", p.addr)
	}
	return fmt.Sprintf("    mcp:\n      proto: STREAMABLEHTTP\n      url: http://%s/mcp\n      reconnect_attempts: 3\n      reconnect_delay: 0.05\n", p.addr)
}

func (p *pluginServer) start() error {
	if p.transport == MCPNode {
		return p.startNode()
	}
	ps, err := policy.NewServer([]policy.Config{p.cfg}, nil)
	if err != nil {
		return err
	}
	lis, err := p.listen()
	if err != nil {
		ps.Close()
		return err
	}
	p.addr = lis.Addr().String()
	var stop func()
	done := make(chan struct{})
	switch p.transport {
	case GRPC, GRPCUDS:
		g := grpc.NewServer()
		ps.RegisterGRPC(g)
		go func() { defer close(done); _ = g.Serve(lis) }()
		stop = g.Stop
	case UnixSocket:
		u := ps.NewSocketServer(0)
		go func() { defer close(done); _ = u.Serve(lis) }()
		stop = func() { _ = u.Close() }
	default:
		mux := http.NewServeMux()
		mux.Handle("/mcp", ps.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { defer close(done); _ = srv.Serve(lis) }()
		stop = func() { _ = srv.Close() }
	}
	p.mu.Lock()
	p.stop = func() {
		ps.Close() // MCP sessions and running hooks end: for a moment the live listener answers 503
		stop()     // then connections cut, no drain: a crash as the client sees it
		<-done
	}
	p.mu.Unlock()
	return nil
}

// startNode runs the policy on the TypeScript SDK plugin server (a Node.js
// process) on the server's port; stop kills the process.
func (p *pluginServer) startNode() error {
	pol, err := json.Marshal(map[string]any{"plugins": []policy.Config{p.cfg}})
	if err != nil {
		return err
	}
	if p.node == nil {
		p.node, err = nodeplugin.Start(nodeplugin.Options{Policy: string(pol)})
	} else {
		err = p.node.Restart()
	}
	if err != nil {
		return err
	}
	p.addr = p.node.Addr()
	p.mu.Lock()
	p.stop = p.node.Stop
	p.mu.Unlock()
	return nil
}

// listen binds the server's address, waiting a little for a TCP port its
// previous incarnation just released.
func (p *pluginServer) listen() (net.Listener, error) {
	if p.transport == GRPCUDS || p.transport == UnixSocket {
		return pluginserver.ListenUnix(p.addr)
	}
	var err error
	for range 50 {
		var lis net.Listener
		if lis, err = net.Listen("tcp", p.addr); err == nil {
			return lis, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("listen %s: %w", p.addr, err)
}

// halt stops the server until the next start.
func (p *pluginServer) halt() {
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (p *pluginServer) restart() error {
	p.halt()
	if err := p.start(); err != nil {
		return fmt.Errorf("plugin %s over %s: %w", p.name, p.transport, err)
	}
	return nil
}

// pluginServers are the stack's plugin servers, restarted together.
type pluginServers []*pluginServer

func (ps pluginServers) restart() error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.restart())
	}
	return errors.Join(errs...)
}

func (ps pluginServers) halt() {
	for _, p := range ps {
		p.halt()
	}
}

// nodeInitializes sums the initialize requests the Node.js plugin servers
// received over their whole life; ok is false unless every server is one.
func (ps pluginServers) nodeInitializes() (n int, ok bool) {
	for _, p := range ps {
		if p.node == nil {
			return 0, false
		}
		st, err := p.node.Totals()
		if err != nil {
			return 0, false
		}
		n += st.Initializes
	}
	return n, len(ps) > 0
}

// entries renders the plugins: entries of the sidecar config.
func (ps pluginServers) entries() string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  - name: %s\n    kind: external\n    on_error: fail\n%s", p.name, p.section())
	}
	return b.String()
}
