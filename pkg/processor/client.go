package processor

import (
	"net"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
)

// The HTTP hooks' payloads carry the caller's address as client_host and
// client_port, as ContextForge fills them from the connection. Here they
// come from what Envoy says of the downstream connection: the request
// attributes source.address ("ip:port") and source.port, which Envoy sends
// on the request-headers message when the ext_proc filter lists them in
// request_attributes. Never from a header a client can write, such as
// x-forwarded-for: without the attributes, the fields are left out.

// Attribute names of the downstream peer's address.
const (
	attrSourceAddress = "source.address"
	attrSourcePort    = "source.port"
)

// maxClientHost bounds the client_host taken from source.address.
const maxClientHost = 256

// clientAddress is the downstream peer as Envoy saw it.
type clientAddress struct {
	host string
	port int
}

// readClient keeps the downstream peer's address from the attributes of
// the request-headers message being answered.
func (st *stream) readClient() {
	fields := st.envoyContext.GetAttributes()[identity.AttributesKey].GetFields()
	if len(fields) == 0 {
		return
	}
	st.client = clientOf(fields[attrSourceAddress], fields[attrSourcePort])
}

// clientOf reads source.address and source.port; the port is taken from
// the address when source.port is absent. A value that is not usable
// (empty, over-long, with a control character, a port out of range) is
// left out.
func clientOf(addr, port *structpb.Value) clientAddress {
	var c clientAddress
	a := addr.GetStringValue()
	host, p, err := net.SplitHostPort(a)
	if err != nil {
		host, p = a, ""
	}
	if host != "" && len(host) <= maxClientHost && !strings.ContainsFunc(host, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		c.host = host
	}
	switch v := port.GetKind().(type) {
	case *structpb.Value_NumberValue:
		c.port = validPort(v.NumberValue)
	case *structpb.Value_StringValue:
		n, _ := strconv.Atoi(v.StringValue)
		c.port = validPort(float64(n))
	default:
		n, _ := strconv.Atoi(p)
		c.port = validPort(float64(n))
	}
	return c
}

// validPort returns n as a port, or 0 when it is not one.
func validPort(n float64) int {
	if n < 1 || n > 65535 || n != float64(int(n)) {
		return 0
	}
	return int(n)
}
