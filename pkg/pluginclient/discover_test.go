package pluginclient

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// legacyDiscover answers a sessionless server/discover the way a plugin
// server that predates MCP 2026-07-28 may, and passes everything else on.
func legacyDiscover(next http.Handler, refused *atomic.Int64, status int, contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			data, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			if bytes.Contains(data, []byte(`"server/discover"`)) {
				refused.Add(1)
				w.Header().Set("Content-Type", contentType)
				w.WriteHeader(status)
				_, _ = io.WriteString(w, body)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// The client asks server/discover first (so a stateless 2026-07-28 plugin
// needs no initialize); a server that does not know it must still get the
// classic initialize, whatever its refusal looks like — an existing plugin
// keeps working unchanged, one initialize per session.
func TestLegacyServerRefusesDiscover(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"JSON-RPC error, 200", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid request parameters"}}`, http.StatusOK},
		{"method not found, 200", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, http.StatusOK},
		{"missing session, 400", "application/json", `{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: Missing session ID"}}`, http.StatusBadRequest},
		{"not initialized, 400", "application/json", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`, http.StatusBadRequest},
		{"plain 404", "text/plain", "404 page not found\n", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plug := plugintest.NewScripted("guard")
			ps := pluginserver.NewWithOptions(nil, plug)
			var refused atomic.Int64
			srv := plugintest.Start(t, func() http.Handler {
				return legacyDiscover(ps.Handler(), &refused, tc.status, tc.contentType, tc.body)
			}, plugintest.GoSDK)
			const slots = 2
			pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{Slots: slots})
			eventually(t, "every session ready", func() bool { return pool.Stats("guard").Sessions.Ready == slots })
			for range 4 {
				mustInvoke(t, pool, "guard")
			}
			if n := refused.Load(); n != slots {
				t.Errorf("%d server/discover refused, want one per session (%d)", n, slots)
			}
			if n := srv.Initializes(); n != slots {
				t.Errorf("%d initializes, want one per session (%d)", n, slots)
			}
			if st := pool.Stats("guard"); st.Rebuilds != 0 {
				t.Errorf("stats %+v, want no rebuild", st)
			}
		})
	}
}
