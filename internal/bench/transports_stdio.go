package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/stdioconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The STDIO row of the transports scenario: the plugin server is a child
// process, this binary again (cmd/bench, or the test binary) started with
// ChildEnv set to stdioPluginChild, speaking MCP on its stdin and stdout.
// Each sidecar starts one from its config (mcp: {proto: STDIO}), the
// direct client one with stdioconn. A child counts its calls and answers
// the count on a Unix socket of its own, so that the calls cost nothing
// more than over the other transports.

const (
	// stdioPluginChild is the ChildEnv value of a STDIO plugin server.
	stdioPluginChild = "stdio-plugin"
	// stdioNameEnv names the plugin the child serves (transportPolicy).
	stdioNameEnv = "MCP_EXTPROC_BENCH_STDIO_PLUGIN"
	// stdioCountsEnv is the folder the child's count socket is made in
	// (PID.sock); unset: no socket.
	stdioCountsEnv = "MCP_EXTPROC_BENCH_STDIO_COUNTS"
)

// stdioTimeout bounds the start of the direct client's child and each
// count query.
const stdioTimeout = 30 * time.Second

// startStdioPlugin fills tp in for the STDIO transport: the sidecar's
// config section, the direct client (a child of its own) and the count
// over every child, of the sidecars and of the direct client.
func startStdioPlugin(ctx context.Context, tp *transportPlugin, name, dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("this binary: %w", err)
	}
	counts, err := os.MkdirTemp(dir, "stdio-")
	if err != nil {
		return err
	}
	env := map[string]string{ChildEnv: stdioPluginChild, stdioNameEnv: name, stdioCountsEnv: counts}
	tp.section = fmt.Sprintf("mcp: {proto: STDIO, cmd: [%q], env: {%s: %q, %s: %q, %s: %q}}",
		self, ChildEnv, stdioPluginChild, stdioNameEnv, name, stdioCountsEnv, counts)
	tp.count = func() int64 { return stdioCalls(counts) }
	dctx, cancel := context.WithTimeout(ctx, stdioTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc-bench", Version: "0.1.0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	c, err := stdioconn.Dial(dctx, stdioconn.Config{Path: self, Env: env, Client: client, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	tp.closers.add(c)
	tp.direct = c
	return nil
}

// stdioCalls sums the counts the STDIO children answer on their sockets in
// dir. A child that is gone (its socket refuses) counts nothing: callsOnce
// then sees the calls it expects missing.
func stdioCalls(dir string) int64 {
	socks, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		return 0
	}
	var n int64
	for _, s := range socks {
		v, err := askCount(s)
		if err == nil {
			n += v
		}
	}
	return n
}

// askCount reads the count a child answers on the socket at path.
func askCount(path string) (int64, error) {
	c, err := net.DialTimeout("unix", path, stdioTimeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(stdioTimeout)); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return 0, fmt.Errorf("count of %s: %w", path, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// serveStdioPlugin is a STDIO plugin server child: it serves
// transportPolicy named by stdioNameEnv on stdin and stdout until stdin
// ends or ctx is done, and answers its count of calls on a socket in
// stdioCountsEnv's folder.
func serveStdioPlugin(ctx context.Context, stdin io.Reader, stdout io.Writer) (err error) {
	pol, err := transportPolicy(os.Getenv(stdioNameEnv))
	if err != nil {
		return err
	}
	calls := new(atomic.Int64)
	if dir := os.Getenv(stdioCountsEnv); dir != "" {
		stop, err := serveCount(filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock"), calls.Load)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	ps := pluginserver.New(&counting{Plugin: pol, calls: calls})
	defer func() { err = errors.Join(err, ps.Close()) }()
	return ps.Serve(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
}

// serveCount answers count() to every connection to a Unix socket at path
// until stop.
func serveCount(path string, count func() int64) (stop func() error, err error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("count socket: %w", err)
	}
	done := make(chan struct{})
	go func() { // ends when stop closes ln
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = fmt.Fprintf(c, "%d\n", count())
			_ = c.Close()
		}
	}()
	return func() error {
		err := ln.Close()
		<-done
		return err
	}, nil
}

// nopWriteCloser is a Writer whose Close does nothing: the child's stdout
// is the process's, closed when it exits.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
