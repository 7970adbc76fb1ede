package envoytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Serve runs srv on a loopback gRPC server (with opts, such as the
// sidecar's codec) for the duration of the test and returns a client of it.
// Cleanup stops the server, cancelling open streams, and waits for its
// handlers to return.
func Serve(t testing.TB, srv extprocv3.ExternalProcessorServer, opts ...grpc.ServerOption) extprocv3.ExternalProcessorClient {
	t.Helper()
	client, stop, err := Listen(context.Background(), srv, opts...)
	if err != nil {
		t.Fatalf("envoytest.Serve: %v", err)
	}
	t.Cleanup(stop)
	return client
}

// Listen runs srv on a gRPC server with opts listening on 127.0.0.1 (a free
// port) and returns a client of it. stop closes the client, stops the server (cancelling
// open streams) and waits for its goroutines and handlers; it may be called
// more than once.
func Listen(ctx context.Context, srv extprocv3.ExternalProcessorServer, opts ...grpc.ServerOption) (client extprocv3.ExternalProcessorClient, stop func(), err error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts...)...)
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis) // returns when gs stops
	}()
	client, conn, err := Dial(lis.Addr().String())
	if err != nil {
		gs.Stop()
		<-served
		return nil, nil, err
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = conn.Close()
			gs.Stop()
			<-served
		})
	}
	return client, stop, nil
}

// Dial returns a client of the ExternalProcessor at addr (host:port, plain
// text), for a processor running elsewhere. Close the returned closer when done.
func Dial(addr string) (extprocv3.ExternalProcessorClient, io.Closer, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return extprocv3.NewExternalProcessorClient(conn), conn, nil
}
