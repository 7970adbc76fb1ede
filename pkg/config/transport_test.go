package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTransportSections(t *testing.T) {
	const head = "plugins:\n  - name: P\n    kind: external\n"
	for _, tc := range []struct {
		name, yaml string
		field, msg string // "" field: valid
	}{
		{"grpc target", "    grpc: {target: 'plugin:50051'}\n", "", ""},
		{"grpc uds", "    grpc: {uds: /run/p.sock}\n", "", ""},
		{"grpc tls", "    grpc: {target: 'plugin:50051', tls: {verify: true}}\n", "", ""},
		{"unix socket", "    unix_socket: {path: /run/p.sock, timeout: 2.5}\n", "", ""},
		{"none", "    description: x\n", "mcp", "one of mcp"},
		{"mcp and grpc", "    mcp: {proto: STREAMABLEHTTP, url: 'http://p/mcp'}\n    grpc: {target: 'p:1'}\n", "grpc", "only one transport per plugin: mcp, grpc"},
		{"grpc empty", "    grpc: {}\n", "grpc", "one of target"},
		{"grpc both", "    grpc: {target: 'p:1', uds: /run/p.sock}\n", "grpc.uds", "exclusive"},
		{"grpc relative uds", "    grpc: {uds: p.sock}\n", "grpc.uds", "absolute"},
		{"grpc uds tls", "    grpc: {uds: /run/p.sock, tls: {verify: true}}\n", "grpc.tls", "not supported"},
		{"grpc no port", "    grpc: {target: plugin}\n", "grpc.target", "host:port"},
		{"grpc tls file", "    grpc: {target: 'p:1', tls: {ca_bundle: /nonexistent/ca.pem}}\n", "grpc.tls.ca_bundle", "cannot read"},
		{"unix no path", "    unix_socket: {timeout: 1}\n", "unix_socket.path", "required"},
		{"unix relative", "    unix_socket: {path: p.sock}\n", "unix_socket.path", "absolute"},
		{"unix timeout", "    unix_socket: {path: /p.sock, timeout: 0}\n", "unix_socket.timeout", "positive"},
		{"unix attempts", "    unix_socket: {path: /p.sock, reconnect_attempts: -1}\n", "unix_socket.reconnect_attempts", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head+tc.yaml), func(string) (string, bool) { return "", false })
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError, got %v (%+v)", err, c)
			}
			msg, ok := wheres(ve.Problems)[where{"P", tc.field}]
			if !ok || !strings.Contains(msg, tc.msg) {
				t.Errorf("problems %v; want %s: ...%s...", ve.Problems, tc.field, tc.msg)
			}
		})
	}
}

func TestUnixSocketDefaults(t *testing.T) {
	c, err := Parse([]byte("plugins:\n  - name: P\n    kind: external\n    unix_socket: {path: /p.sock}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	u := c.Plugins[0].UnixSocket
	if *u.ReconnectAttempts != 3 || u.ReconnectDelay.Duration != 100*time.Millisecond || u.Timeout.Duration != 30*time.Second {
		t.Errorf("defaults: %d %v %v", *u.ReconnectAttempts, u.ReconnectDelay, u.Timeout)
	}
}
