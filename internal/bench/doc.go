// Package bench measures what mcp-extproc costs on top of Envoy's ext_proc
// round trips and on top of the plugins' own time. `make bench`
// (go run ./cmd/bench) runs every scenario and prints the ratio table;
// docs/benchmarks.md records a run and how to read it.
//
// # What is compared
//
// Every figure is a ratio of two targets measured side by side in the same
// process and the same run: the runs of the two targets alternate (A B, then
// B A, ...) in several rounds, and the reported value is the median over the
// rounds (see [Compare]). Absolute numbers are reported next to the ratios.
//
//   - The sidecar is the production wiring ([StartSidecar] runs
//     internal/sidecar.Run: config, plugin pool, executor, processor, gRPC
//     server with health, admin server) with a cpex YAML config and real
//     plugin servers (pkg/pluginserver) on loopback.
//   - Two baselines. [NewNothing] is the floor: an ExternalProcessor that
//     answers CONTINUE to every message and asks for no body, so Envoy sends
//     request headers and response headers only. [Minimal] answers the same
//     way but asks for the body modes the sidecar asks for (request body
//     BUFFERED), so it isolates the sidecar's own work from the cost of its
//     messages. Each ext_proc message is a gRPC round trip through Envoy,
//     so the message counts (printed per row) explain most of the gap to
//     the floor.
//   - Where plugins run, the baseline adds the plugins' own time: after the
//     exchange with Minimal, the same invoke_hook calls (same payload, same
//     context shape) are made directly with the go-sdk client ([Direct]),
//     one after the other.
//
// The baselines run on grpc-go's default server; the sidecar runs on its
// own (stream workers, see internal/sidecar.Options.StreamWorkers), and the
// transports scenario measures it without them too, in the same rounds.
//
// # Scenarios
//
// One file each: passthrough (traffic no plugin applies to, GET streams
// included), one-plugin, chain, sse, concurrency, allocs (in memory),
// transports (each cpex plugin transport against a direct call over it),
// replicas (1, 2 and 4 plugin replicas behind a per-connection
// round-robin balancer, hook calls per second), builtin (an in-process
// hook of a built-in plugin, and a tool call through three of them), and
// pinning (a 200-tool tools/list with tool pinning vs without).
//
// # The driver
//
// [Driver] plays Envoy's ext_proc filter over a real gRPC stream on
// loopback, leanly: it sends the messages Envoy sends for the configured
// processing mode, honours mode_override exactly as Envoy does (header modes
// left DEFAULT keep the configured ones, both body modes are taken
// literally), checks that each reply carries the matching oneof, applies
// body mutations to what the client receives, and at the end half-closes
// and resets the stream at once, as Envoy does by default. Each message of
// a [Prepared] exchange is encoded once and the same bytes go to every
// target, so Envoy's share of a large message (a JWT payload in
// metadata_context) costs no target anything. It does not validate
// header mutations or run per-message timers the way internal/envoytest
// does; that fake spends a goroutine per send and records every message,
// which would dominate the figures. There is no upstream: the response
// (headers, body chunks) is given, so the figures are the ext_proc cost
// alone, the hardest setting for the ratios.
package bench
