// Command mcp-echo is a small MCP server (tools echo and progress, a prompt,
// a resource) over Streamable HTTP, used as the upstream behind Envoy in the
// demo and the kind deployment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
)

func main() {
	addr := flag.String("addr", ":3000", "listen address; MCP is served at /mcp")
	jsonResp := flag.Bool("json", false, "answer with application/json instead of SSE")
	flag.Parse()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpecho.Handler(*jsonResp))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "mcp-echo:", err)
		os.Exit(1)
	}
}
