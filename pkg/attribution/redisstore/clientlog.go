package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// RouteClientLogs sends the go-redis client's own log lines (a failed
// dial, a pool error) to l at warn level, instead of the standard logger
// on stderr. go-redis keeps its logger per process: call this once, from
// main, before any Store is made.
func RouteClientLogs(l zerolog.Logger) {
	redis.SetLogger(clientLog{l.With().Str("component", "redis-client").Logger()})
}

// clientLog adapts a zerolog.Logger to go-redis's logger interface.
type clientLog struct{ l zerolog.Logger }

func (c clientLog) Printf(_ context.Context, format string, v ...any) {
	c.l.Warn().Msg(fmt.Sprintf(format, v...))
}
