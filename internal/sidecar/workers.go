package sidecar

import (
	"runtime"

	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// DefaultStreamWorkers is Options.StreamWorkers when unset: four per CPU
// the process may use, so that a sidecar's usual concurrent streams find a
// warm worker, while an idle worker costs only its stack.
func DefaultStreamWorkers() int { return 4 * runtime.GOMAXPROCS(0) }

// grpcOptions are the ext_proc gRPC server's options.
//
// Stream workers (grpc-go's NumStreamWorkers, marked experimental there):
// a fixed set of goroutines takes the new streams and is kept for the
// next ones, so a stream starts on a goroutine whose stack has already
// grown to what a processor stream needs; with one fresh goroutine per
// stream, that growth (copying the stack several times) is paid again on
// every stream. A stream that finds every worker busy (a long SSE stream
// holds its worker) gets its own goroutine, as without workers.
//
// The codec (processor.NewCodec) decodes Envoy's forwarded metadata and
// attributes on the request-headers message only, the one that reads them.
func (s *sidecar) grpcOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(processor.NewCodec())}
	n := s.opts.StreamWorkers
	if n == 0 {
		n = DefaultStreamWorkers()
	}
	if n < 0 {
		return opts
	}
	return append(opts, grpc.NumStreamWorkers(uint32(n)))
}
