package plugintest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// NodeOptions configures a [NodeServer].
type NodeOptions struct {
	// Policy is the plugins the server serves, as the server's POLICY
	// JSON ({"plugins":[{name, deny, redact, hooks, mode, priority}]});
	// empty: one plugin "TSGuard" that allows everything.
	Policy string
	// KeepAlive is the server's idle keep-alive timeout; 0: Node's own
	// default (5 s).
	KeepAlive time.Duration
}

// NodeStats is what the Node server counted over its current process's
// life.
type NodeStats struct {
	Initializes int `json:"initializes"`
	Invokes     int `json:"invokes"`
	Connections int `json:"connections"`
	Sessions    int `json:"sessions"`
}

// NodeServer is the plugin server of testdata/tsplugin, written on the
// official MCP TypeScript SDK, run as a real Node.js process on loopback. A
// restart is the process killed and started again on the same port, with
// an empty session store.
type NodeServer struct {
	t    testing.TB
	dir  string
	opts NodeOptions
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	// Totals of processes that ended (Stats counts the current one).
	ended NodeStats
}

// nodeStartTimeout bounds how long a Node process may take to listen.
const nodeStartTimeout = 20 * time.Second

// NodeDir returns the folder of the TypeScript SDK plugin server.
func NodeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "tsplugin")
}

// NeedNode skips t, with one line saying why, unless node is on the PATH
// and the server's npm dependencies are installed (make test installs
// them with npm ci). When node is there but the dependencies are not, it
// fails under CI instead: a skipped suite must not pass for a run.
func NeedNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not on PATH: skipping the TypeScript SDK plugin server")
	}
	if _, err := os.Stat(filepath.Join(NodeDir(), "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		msg := "TypeScript SDK plugin server not installed (make test runs npm ci in " + NodeDir() + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// StartNode starts the Node.js plugin server on a free loopback port and
// kills it in t.Cleanup. It skips t when node is not available (NeedNode).
func StartNode(t testing.TB, opts NodeOptions) *NodeServer {
	t.Helper()
	NeedNode(t)
	ln := listenLoopback(t, "node port")
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	n := &NodeServer{t: t, dir: NodeDir(), opts: opts, port: port}
	if err := n.start(); err != nil {
		t.Fatalf("plugintest: node server: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// URL returns the endpoint URL, http://127.0.0.1:PORT/mcp.
func (n *NodeServer) URL() string { return "http://" + n.Addr() + Path }

// Addr returns 127.0.0.1:PORT.
func (n *NodeServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// start runs a new process and waits until it listens.
func (n *NodeServer) start() error {
	cmd := exec.Command("node", "server.mjs")
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(n.port), "POLICY="+n.opts.Policy)
	if n.opts.Policy == "" {
		cmd.Env = cmd.Env[:len(cmd.Env)-1]
	}
	if n.opts.KeepAlive > 0 {
		cmd.Env = append(cmd.Env, "KEEPALIVE_MS="+strconv.FormatInt(n.opts.KeepAlive.Milliseconds(), 10))
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	done := make(chan struct{})
	listening := make(chan bool, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "listening ") {
				ok = true
				listening <- true
			}
		}
		_ = cmd.Wait()
		if !ok {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			<-done
			return fmt.Errorf("node exited before listening: %s", stderr.String())
		}
	case <-time.After(nodeStartTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("node did not listen within %v: %s", nodeStartTimeout, stderr.String())
	}
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// Stop kills the process, as a pod killed; its connections reset. Stopping
// a stopped server does nothing.
func (n *NodeServer) Stop() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	if st, err := n.Stats(); err == nil {
		n.mu.Lock()
		n.ended.add(st)
		n.mu.Unlock()
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	n.mu.Lock()
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
}

// Restart kills the process and starts a new one on the same port, with
// an empty session store. A failure is reported with t.Errorf.
func (n *NodeServer) Restart() {
	n.Stop()
	deadline := time.Now().Add(rebindTimeout)
	for {
		err := n.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Errorf("plugintest: node restart on %s: %v", n.Addr(), err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stats returns what the current process counted.
func (n *NodeServer) Stats() (NodeStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Addr()+"/stats", nil)
	if err != nil {
		return NodeStats{}, err
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return NodeStats{}, fmt.Errorf("node stats: %w", err)
	}
	defer resp.Body.Close()
	var st NodeStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return NodeStats{}, fmt.Errorf("node stats: %w", err)
	}
	return st, nil
}

// Totals returns the counts over every process so far, the current one
// included (it must be running).
func (n *NodeServer) Totals() NodeStats {
	n.t.Helper()
	st, err := n.Stats()
	if err != nil {
		n.t.Fatalf("plugintest: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	st.add(n.ended)
	return st
}

func (s *NodeStats) add(o NodeStats) {
	s.Initializes += o.Initializes
	s.Invokes += o.Invokes
	s.Connections += o.Connections
}
