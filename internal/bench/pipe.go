package bench

import (
	"context"
	"errors"
	"io"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Pipe returns an in-memory client of srv: every Process call runs
// srv.Process in a new goroutine and passes the messages over buffered
// channels (so that, as over gRPC, a send does not wait for the other end
// to receive), without serialization or network. The server side sees exactly the
// pointers the client sent, so what it allocates is its own. Used to
// measure the processor's allocations apart from gRPC's.
func Pipe(srv extprocv3.ExternalProcessorServer) extprocv3.ExternalProcessorClient {
	return &pipeClient{srv: srv}
}

type pipeClient struct {
	srv extprocv3.ExternalProcessorServer
}

// Process implements [extprocv3.ExternalProcessorClient.Process].
func (p *pipeClient) Process(ctx context.Context, _ ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &pipeStream{
		ctx: ctx, cancel: cancel,
		up:       make(chan *extprocv3.ProcessingRequest, pipeBuffer),
		down:     make(chan *extprocv3.ProcessingResponse, pipeBuffer),
		finished: make(chan struct{}),
	}
	go func() { // ends when srv.Process returns, at the latest on ctx
		s.err = p.srv.Process(&pipeServer{s})
		close(s.finished)
	}()
	return &pipeClientStream{s}, nil
}

// pipeBuffer is how many messages a direction holds before a send blocks.
const pipeBuffer = 8

// pipeStream is the state both ends share.
type pipeStream struct {
	ctx       context.Context
	cancel    context.CancelFunc
	up        chan *extprocv3.ProcessingRequest
	down      chan *extprocv3.ProcessingResponse
	closeOnce sync.Once
	finished  chan struct{} // closed when srv.Process returned
	err       error         // srv.Process's result; read after finished
}

var errCanceled = status.Error(codes.Canceled, "context canceled")

// pipeClientStream is the client end.
type pipeClientStream struct{ s *pipeStream }

func (c *pipeClientStream) Send(m *extprocv3.ProcessingRequest) error {
	select {
	case c.s.up <- m:
		return nil
	case <-c.s.finished:
		return io.EOF
	case <-c.s.ctx.Done():
		return errCanceled
	}
}

func (c *pipeClientStream) Recv() (*extprocv3.ProcessingResponse, error) {
	select {
	case m := <-c.s.down:
		return m, nil
	case <-c.s.finished:
		select { // replies sent before the server returned come first
		case m := <-c.s.down:
			return m, nil
		default:
		}
		if c.s.err != nil {
			return nil, c.s.err
		}
		return nil, io.EOF
	case <-c.s.ctx.Done():
		return nil, errCanceled
	}
}

func (c *pipeClientStream) CloseSend() error {
	c.s.closeOnce.Do(func() { close(c.s.up) })
	return nil
}

func (c *pipeClientStream) Header() (metadata.MD, error) { return nil, nil }
func (c *pipeClientStream) Trailer() metadata.MD         { return nil }
func (c *pipeClientStream) Context() context.Context     { return c.s.ctx }
func (c *pipeClientStream) SendMsg(m any) error {
	r, ok := m.(*extprocv3.ProcessingRequest)
	if !ok {
		return errors.New("pipe: not a ProcessingRequest")
	}
	return c.Send(r)
}
func (c *pipeClientStream) RecvMsg(m any) error {
	r, ok := m.(*extprocv3.ProcessingResponse)
	if !ok {
		return errors.New("pipe: not a ProcessingResponse")
	}
	got, err := c.Recv()
	if err == nil {
		proto.Reset(r)
		proto.Merge(r, got)
	}
	return err
}

// pipeServer is the server end.
type pipeServer struct{ s *pipeStream }

func (p *pipeServer) Send(m *extprocv3.ProcessingResponse) error {
	select {
	case p.s.down <- m:
		return nil
	case <-p.s.ctx.Done():
		return errCanceled
	}
}

func (p *pipeServer) Recv() (*extprocv3.ProcessingRequest, error) {
	select {
	case m, ok := <-p.s.up:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-p.s.ctx.Done():
		return nil, errCanceled
	}
}

func (p *pipeServer) SetHeader(metadata.MD) error  { return nil }
func (p *pipeServer) SendHeader(metadata.MD) error { return nil }
func (p *pipeServer) SetTrailer(metadata.MD)       {}
func (p *pipeServer) Context() context.Context     { return p.s.ctx }
func (p *pipeServer) SendMsg(m any) error {
	r, ok := m.(*extprocv3.ProcessingResponse)
	if !ok {
		return errors.New("pipe: not a ProcessingResponse")
	}
	return p.Send(r)
}
func (p *pipeServer) RecvMsg(m any) error {
	r, ok := m.(*extprocv3.ProcessingRequest)
	if !ok {
		return errors.New("pipe: not a ProcessingRequest")
	}
	got, err := p.Recv()
	if err == nil {
		proto.Reset(r)
		proto.Merge(r, got)
	}
	return err
}
