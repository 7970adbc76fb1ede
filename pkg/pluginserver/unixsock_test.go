package pluginserver

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
)

// TestSocketFrames sends raw frames and checks the reply kind chosen from
// the fields set, as cpex's server chooses it.
func TestSocketFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(path); err == nil {
		t.Fatal("ListenUnix replaced a regular file")
	}
	os.Remove(path)
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	if _, err := ListenUnix(path); err == nil {
		t.Fatal("ListenUnix took a socket a server listens on")
	}
	stale.Close() // the file stays: a stale socket
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	srv := New(Func(Config{Name: "Allow"}, nil), Func(Config{Name: "other"}, nil))
	u := srv.NewSocketServer(0)
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Serve(l) }()
	defer func() { u.Close(); <-done }()

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ask := func(frame []byte, resp proto.Message) {
		t.Helper()
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		msg, err := cpexpb.ReadFrame(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(msg, resp); err != nil {
			t.Fatalf("reply %x: %v", msg, err)
		}
	}
	frame := func(m proto.Message) []byte {
		b, err := cpexpb.AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	var all cpexpb.GetPluginConfigsResponse
	ask([]byte{0, 0, 0, 0}, &all)
	if len(all.Configs) != 2 {
		t.Errorf("empty frame: %d configs, want 2", len(all.Configs))
	}
	var one cpexpb.GetPluginConfigResponse
	ask(frame(&cpexpb.GetPluginConfigRequest{Name: "allow"}), &one)
	if !one.Found || one.Config.Fields["name"].GetStringValue() != "Allow" {
		t.Errorf("config lookup: %v", &one)
	}
	one.Reset()
	ask(frame(&cpexpb.InvokeHookRequest{HookType: "ghost"}), &one)
	if one.Found {
		t.Errorf("invoke without plugin_name is a config lookup of hook_type's bytes: %v", &one)
	}
	var inv cpexpb.InvokeHookResponse
	ask(frame(&cpexpb.InvokeHookRequest{HookType: "tool_pre_invoke", PluginName: "Allow"}), &inv)
	if inv.PluginName != "Allow" || inv.Result.Fields["continue_processing"].GetBoolValue() != true || inv.Error != nil {
		t.Errorf("invoke: %v", &inv)
	}
	inv.Reset()
	ask(append([]byte{0, 0, 0, 4}, bytes.Repeat([]byte{0xff}, 4)...), &inv)
	if inv.Error.GetCode() != CodeUnknownMessage {
		t.Errorf("garbage: %v, want UNKNOWN_MESSAGE", &inv)
	}
}

// TestSocketIdleClose: the server closes a connection without requests.
func TestSocketIdleClose(t *testing.T) {
	l, err := ListenUnix(filepath.Join(t.TempDir(), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	u := New().NewSocketServer(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Serve(l) }()
	defer func() { u.Close(); <-done }()
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("idle connection not closed")
	}
}
