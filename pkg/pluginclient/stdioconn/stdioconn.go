// Package stdioconn is the STDIO transport of the plugin client: the
// sidecar starts the plugin server as a child process (mcp: {proto: STDIO,
// script or cmd, env, cwd}, as cpex defines them) and speaks MCP to it over
// its stdin and stdout, newline-delimited JSON-RPC, beside the Streamable
// HTTP (mcpconn), gRPC (grpcconn) and Unix-socket (unixconn) transports.
//
// One [Conn] is one child: dialling starts it, closing stops it. The child
// is the session: when it exits, every call in flight and every later call
// fails with an error wrapping wireconn.ErrConnLost, and the client starts
// a new child through the slot's supervisor (backoff, circuit), exactly as
// it rebuilds a lost HTTP session. Like every transport, it never retries.
//
// A child runs in a process group of its own. Stopping it closes its stdin
// (the MCP way to ask a stdio server to exit), then after a grace signals
// the group with SIGTERM, then SIGKILL, and kills whatever is left of the
// group once the child is gone, so nothing it started outlives it. On
// Linux the kernel also kills the child if the sidecar dies without
// stopping it. Its stderr goes to the sidecar's log, a line at a time,
// each line capped and the lines rate-limited (see DefaultStderrLineBytes).
//
// The child gets a small environment, not the sidecar's: PATH, HOME, USER,
// LOGNAME, SHELL, TERM, LANG, TZ and TMPDIR as the sidecar has them,
// PLUGINS_TRANSPORT=stdio (the cpex plugin server runtime then serves
// stdio), and then the config's env, which overrides them.
package stdioconn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/mcpconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// DefaultStopGrace is how long a child gets to exit after its stdin is
// closed, and again after SIGTERM, before it is killed.
const DefaultStopGrace = 2 * time.Second

// groupWait bounds how long Close waits for the processes of the child's
// group to be gone once they were killed.
const groupWait = time.Second

// ErrExited is wrapped by the error of a call to a child that exited.
var ErrExited = errors.New("plugin process exited")

// inherited are the variables a child takes from the sidecar's environment.
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TZ", "TMPDIR"}

// Config says how to start a plugin server and talk to it.
type Config struct {
	// Path is the program; Args its arguments (without the program).
	Path string
	Args []string
	// Env is added to the child's small environment (see the package doc).
	Env map[string]string
	// Dir is the child's working directory ("" : the sidecar's).
	Dir string
	// Client is the go-sdk client the session is made with.
	Client *mcp.Client
	// Logger receives the child's stderr and its start and exit.
	Logger zerolog.Logger
	// StopGrace overrides DefaultStopGrace.
	StopGrace time.Duration
	// StderrLineBytes and StderrLinesPerSecond override the defaults of
	// the stderr log.
	StderrLineBytes      int
	StderrLinesPerSecond int
}

// FromConfig returns the Config of an mcp section with proto STDIO: cmd is
// the program and its arguments; a script ending in .py runs with python3,
// one ending in .sh with sh (as cpex runs them); a relative script is
// taken from cwd.
func FromConfig(m *config.MCP) (Config, error) {
	c := Config{Env: m.Env, Dir: m.Cwd}
	switch {
	case len(m.Cmd) > 0:
		if strings.TrimSpace(m.Cmd[0]) == "" {
			return c, errors.New("mcp.cmd: the program is empty")
		}
		c.Path, c.Args = m.Cmd[0], m.Cmd[1:]
	case m.Script != "":
		switch strings.ToLower(filepath.Ext(m.Script)) {
		case ".py":
			c.Path = "python3"
		case ".sh":
			c.Path = "sh"
		default:
			return c, fmt.Errorf("mcp.script %q: want a .py or .sh file", m.Script)
		}
		c.Args = []string{m.Script}
	default:
		return c, errors.New("mcp: STDIO needs script or cmd")
	}
	return c, nil
}

// Conn is one plugin server child process and the MCP session over its
// stdin and stdout: a [wireconn.Conn].
type Conn struct {
	*mcpconn.Stream
	cmd    *exec.Cmd
	grace  time.Duration
	log    zerolog.Logger
	exited chan struct{} // closed once the child was reaped
	exit   error         // why it exited; set before exited is closed
	stderr chan struct{} // closed once its stderr was read to the end
	errR   *os.File      // the read end of its stderr

	closeOnce sync.Once
	closeErr  error
}

// The child is a Conn.
var _ wireconn.Conn = (*Conn)(nil)

// Dial starts the child and connects the MCP session to it, bounded by ctx
// (which bounds the start, not the child's life). A child that does not
// answer in time is stopped.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Client == nil {
		return nil, errors.New("stdioconn: no MCP client")
	}
	c := &Conn{
		grace:  cfg.StopGrace,
		log:    cfg.Logger,
		exited: make(chan struct{}),
		stderr: make(chan struct{}),
	}
	if c.grace <= 0 {
		c.grace = DefaultStopGrace
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("plugin process stdin: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, fmt.Errorf("plugin process stdout: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("plugin process stderr: %w", err)
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = environ(cfg.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	closeAll(stdinR, stdoutW, stderrW) // the child's ends
	if err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		return nil, fmt.Errorf("start plugin process %s: %w", cfg.Path, err)
	}
	c.cmd, c.errR = cmd, stderrR
	c.log = c.log.With().Int("pid", cmd.Process.Pid).Logger()
	c.log.Info().Str("path", cfg.Path).Msg("plugin process started")
	go func() { // ends when the child exits; Close makes sure it does
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		c.exit = fmt.Errorf("%w: %w", ErrExited, err)
		close(c.exited)
	}()
	go func() { // ends when every writer of the pipe is gone or Close closes it
		defer close(c.stderr)
		defer stderrR.Close()
		stderrLog{
			log:       c.log,
			maxLine:   orInt(cfg.StderrLineBytes, DefaultStderrLineBytes),
			perSecond: float64(orInt(cfg.StderrLinesPerSecond, DefaultStderrLinesPerSecond)),
			burst:     DefaultStderrBurst,
			now:       time.Now,
		}.run(stderrR)
	}()
	t := &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}
	s, err := mcpconn.DialStream(ctx, cfg.Client, t, c.gone)
	if err != nil {
		closeAll(stdinW, stdoutR)
		c.stop()
		if why := c.gone(); why != nil {
			err = fmt.Errorf("%w (%w)", why, err)
		}
		return nil, fmt.Errorf("connect to plugin process %s: %w", cfg.Path, err)
	}
	c.Stream = s
	return c, nil
}

// gone returns why the child exited, or nil while it runs.
func (c *Conn) gone() error {
	select {
	case <-c.exited:
		return c.exit
	default:
		return nil
	}
}

// Done is closed once the child exited (whoever stopped it).
func (c *Conn) Done() <-chan struct{} { return c.exited }

// Pid returns the child's process id (its process group's too).
func (c *Conn) Pid() int { return c.cmd.Process.Pid }

// Close ends the session and stops the child (see the package doc); it
// returns once the child and its process group are gone, within about
// three times the stop grace.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		closed := make(chan error, 1)
		go func() { closed <- c.Stream.Close() }() // closes the child's stdin
		c.stop()
		select {
		case err := <-closed:
			c.closeErr = err
		case <-time.After(c.grace):
			c.closeErr = errors.New("plugin process session did not close")
		}
	})
	return c.closeErr
}

// stop waits for the child to exit after its stdin was closed, signals its
// group SIGTERM and then SIGKILL when it does not, and kills what is left
// of the group once it exited.
func (c *Conn) stop() {
	pid := c.cmd.Process.Pid
	wait := func() bool {
		t := time.NewTimer(c.grace)
		defer t.Stop()
		select {
		case <-c.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if !wait() {
		c.log.Info().Msg("plugin process still running after its stdin closed: SIGTERM")
		if err := signalGroup(pid, syscall.SIGTERM); err != nil {
			c.log.Warn().Err(err).Msg("signal plugin process group")
		}
		if !wait() {
			c.log.Warn().Msg("plugin process still running after SIGTERM: SIGKILL")
			if err := signalGroup(pid, syscall.SIGKILL); err != nil {
				c.log.Warn().Err(err).Msg("kill plugin process group")
			}
			if !wait() {
				c.log.Error().Msg("plugin process survived SIGKILL")
			}
		}
	}
	_ = signalGroup(pid, syscall.SIGKILL) // whatever it started
	for deadline := time.Now().Add(groupWait); groupExists(pid) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-c.stderr:
	case <-time.After(c.grace):
		c.log.Warn().Msg("plugin process stderr still open; closing it")
		_ = c.errR.Close()
		<-c.stderr
	}
	c.log.Info().AnErr("exit", c.gone()).Msg("plugin process stopped")
}

// environ is the child's environment: the inherited variables, then
// PLUGINS_TRANSPORT=stdio, then extra.
func environ(extra map[string]string) []string {
	env := make([]string, 0, len(inherited)+1+len(extra))
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := extra["PLUGINS_TRANSPORT"]; !ok {
		env = append(env, "PLUGINS_TRANSPORT=stdio")
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
