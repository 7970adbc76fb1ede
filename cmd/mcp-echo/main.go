// Command mcp-echo is a small MCP server (tools echo and progress, a prompt,
// a resource) over Streamable HTTP, used as the upstream behind Envoy in the
// demo and the kind deployment. -mode picks a variant:
//
//	default    stateful, no resumption (-json for application/json answers)
//	resumable  stateful 2025-11-25 with an event store: priming events, and
//	           GET + Last-Event-ID replays a stream
//	stateless  2026-07-28 without sessions; tool transfer mirrors its
//	           account argument into Mcp-Param-Account, checked by the server
//	tasks      hand-written server whose tool research runs as a task
//	           (2025-11-25 tasks/result, 2026-07-28 tasks/get result)
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
	jsonResp := flag.Bool("json", false, "answer with application/json instead of SSE (mode default)")
	mode := flag.String("mode", "default", "server variant: default, resumable, stateless or tasks")
	flag.Parse()
	var h http.Handler
	switch *mode {
	case "default":
		h = mcpecho.Handler(*jsonResp)
	case "resumable":
		h = mcpecho.ResumableHandler()
	case "stateless":
		h = mcpecho.StatelessHandler()
	case "tasks":
		h = &mcpecho.TaskServer{}
	default:
		fmt.Fprintf(os.Stderr, "mcp-echo: unknown -mode %q\n", *mode)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
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
