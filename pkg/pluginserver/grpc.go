package pluginserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
)

// RegisterGRPC registers the plugins on r as the cpex gRPC services
// cpex.PluginService and cpex.Health (which answers SERVING). Serve the
// grpc.Server on TCP, or on a Unix socket from [ListenUnix] (clients dial
// unix:///abs/path); stop it with GracefulStop or Stop.
func (s *Server) RegisterGRPC(r grpc.ServiceRegistrar) {
	cpexpb.RegisterPluginServiceServer(r, grpcPlugins{s: s})
	cpexpb.RegisterHealthServer(r, grpcHealth{})
}

type grpcPlugins struct {
	cpexpb.UnimplementedPluginServiceServer
	s *Server
}

func (g grpcPlugins) GetPluginConfig(_ context.Context, req *cpexpb.GetPluginConfigRequest) (*cpexpb.GetPluginConfigResponse, error) {
	return g.s.pbConfig(req.GetName()), nil
}

func (g grpcPlugins) GetPluginConfigs(context.Context, *cpexpb.GetPluginConfigsRequest) (*cpexpb.GetPluginConfigsResponse, error) {
	return g.s.pbConfigs(), nil
}

func (g grpcPlugins) InvokeHook(ctx context.Context, req *cpexpb.InvokeHookRequest) (*cpexpb.InvokeHookResponse, error) {
	resp := g.s.pbInvoke(withCallTrace(ctx, grpcCallTrace(ctx)), req)
	if err := ctx.Err(); err != nil {
		// The call's deadline (carried by gRPC) passed or the client went
		// away while the hook ran: say so in gRPC terms, not as a plugin
		// error, so the client sees a timeout whichever timer fires first.
		return nil, status.FromContextError(err).Err()
	}
	return resp, nil
}

type grpcHealth struct {
	cpexpb.UnimplementedHealthServer
}

func (grpcHealth) Check(_ context.Context, req *cpexpb.HealthCheckRequest) (*cpexpb.HealthCheckResponse, error) {
	switch req.GetService() {
	case "", cpexpb.PluginService_ServiceDesc.ServiceName, cpexpb.Health_ServiceDesc.ServiceName:
		return &cpexpb.HealthCheckResponse{Status: cpexpb.HealthCheckResponse_SERVING}, nil
	}
	return &cpexpb.HealthCheckResponse{Status: cpexpb.HealthCheckResponse_SERVICE_UNKNOWN}, nil
}

// ListenUnix listens on the Unix socket at path. A stale socket file (left
// by a server that died) is replaced, as cpex does; a socket some process
// still listens on, or a file that is no socket, is an error.
func ListenUnix(path string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: a server is listening there", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return l, nil
}
