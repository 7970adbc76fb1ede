package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// transports are the gRPC and Unix-socket servers started beside HTTP.
type transports struct {
	grpc *grpc.Server
	sock *pluginserver.SocketServer
	errc chan error // the first serve error of either
	done []chan struct{}
}

// startTransports starts the servers the flags ask for (possibly none).
func startTransports(o *options, ps *pluginserver.Server, log zerolog.Logger) (*transports, error) {
	t := &transports{errc: make(chan error, 2)}
	if o.grpcAddr != "" {
		network, addr := "tcp", o.grpcAddr
		if path, ok := strings.CutPrefix(o.grpcAddr, "unix://"); ok {
			network, addr = "unix", path
		}
		ln, err := listen(network, addr)
		if err != nil {
			return nil, fmt.Errorf("--grpc-addr: %w", err)
		}
		t.grpc = grpc.NewServer()
		ps.RegisterGRPC(t.grpc)
		t.serve(func() error { return t.grpc.Serve(ln) }, "grpc")
		log.Info().Str("network", network).Str("addr", ln.Addr().String()).Msg("serving gRPC")
	}
	if o.unixSocket != "" {
		ln, err := pluginserver.ListenUnix(o.unixSocket)
		if err != nil {
			t.stop()
			return nil, fmt.Errorf("--unix-socket: %w", err)
		}
		t.sock = ps.NewSocketServer(0)
		t.serve(func() error { return t.sock.Serve(ln) }, "unix socket")
		log.Info().Str("path", o.unixSocket).Msg("serving the Unix-socket transport")
	}
	return t, nil
}

func listen(network, addr string) (net.Listener, error) {
	if network == "unix" {
		return pluginserver.ListenUnix(addr)
	}
	return net.Listen(network, addr)
}

func (t *transports) serve(f func() error, what string) {
	done := make(chan struct{})
	t.done = append(t.done, done)
	go func() {
		defer close(done)
		if err := f(); err != nil {
			t.errc <- fmt.Errorf("serve %s: %w", what, err)
		}
	}()
}

// stop ends both servers gracefully (running calls finish) and waits.
func (t *transports) stop() {
	if t.grpc != nil {
		t.grpc.GracefulStop()
	}
	if t.sock != nil {
		_ = t.sock.Close()
	}
	for _, d := range t.done {
		<-d
	}
}
