// Package cpexpb is the protobuf side of the cpex external plugin protocol:
// the generated types and gRPC stubs of proto/cpex.proto (package cpex, the
// wire contract of cpex's gRPC and Unix-socket transports; see
// docs/plugin-transports.md), the Unix-socket framing, and the conversions
// between the JSON the rest of the project speaks (pkg/cpex) and
// google.protobuf.Struct.
//
// Conversions stream JSON tokens straight into structpb values and back
// (no intermediate map[string]any). Struct has no integer type: numbers
// travel as doubles, and are written back as JSON integers when they are
// whole (3.0 → 3), as encoding/json writes float64.
//
// Regenerate the code with `make proto` (needs protoc); the generated files
// are committed.
package cpexpb
