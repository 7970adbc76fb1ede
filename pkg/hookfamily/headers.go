package hookfamily

import (
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// The one header policy: which HTTP headers a plugin's answer may set, per
// hook. Every place that applies headers a plugin asked for (the pre hooks'
// modified headers, http_pre_request, http_post_request, token_delegate)
// asks MaySetHeader, so a header one hook may not set no other hook sets
// either.

// HeaderSetter says how a hook's answer may set headers.
type HeaderSetter uint8

const (
	// SetsNoHeaders: the hook's answer sets no header.
	SetsNoHeaders HeaderSetter = iota
	// SetsHeaders: the hook may set ordinary headers, and a credential
	// header only where the client did not send one (unless
	// extproc.allow_credential_headers).
	SetsHeaders
	// SetsCredentials: the hook's job is the credential (token_delegate):
	// it may set ordinary and credential headers.
	SetsCredentials
)

// headerSetters are the hooks whose answers set headers.
var headerSetters = map[cpex.HookType]HeaderSetter{
	cpex.ToolPreInvoke:    SetsHeaders, // modified payload headers
	cpex.PromptPreFetch:   SetsHeaders,
	cpex.ResourcePreFetch: SetsHeaders,
	cpex.HTTPPreRequest:   SetsHeaders, // request headers
	cpex.HTTPPostRequest:  SetsHeaders, // response headers
	cpex.TokenDelegate:    SetsCredentials,
}

// HeadersOf returns how hook's answer may set headers.
func HeadersOf(hook cpex.HookType) HeaderSetter { return headerSetters[hook] }

// reservedHeaders no plugin may set: framing and hop-by-hop headers (the
// proxy owns them), the body's encoding (the sidecar decides it), and the
// MCP protocol's own (a session, a version or a standard header that
// disagrees with the body would let a request be read two ways).
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "content-encoding": true,
	"connection": true, "te": true, "upgrade": true, "keep-alive": true, "proxy-connection": true,
	"mcp-session-id": true, "mcp-protocol-version": true, "mcp-method": true, "mcp-name": true,
	"last-event-id": true,
}

// Reserved reports whether name (lower case) is a header no plugin may
// set: pseudo-headers, Envoy's own (x-envoy-*), framing and hop-by-hop
// headers, content-encoding, and the MCP protocol's headers (mcp-*
// standard headers, the session and version, Last-Event-ID).
func Reserved(name string) bool {
	return name == "" || name[0] == ':' || strings.HasPrefix(name, "x-envoy") ||
		strings.HasPrefix(name, "mcp-param-") || reservedHeaders[name]
}

// MaySetHeader reports whether a plugin answering hook may set header name
// (lower case) to value. clientSent: the client's request (or the server's
// answer, for http_post_request) already has the header;
// allowCredentials: extproc.allow_credential_headers. A name that is not
// an HTTP token or a value with CR, LF or NUL is never set.
func MaySetHeader(hook cpex.HookType, name, value string, clientSent, allowCredentials bool) bool {
	setter := headerSetters[hook]
	switch {
	case setter == SetsNoHeaders, Reserved(name), !validHeader(name, value):
		return false
	case setter == SetsCredentials:
		return true
	case (config.IsCredentialHeader(name) || name == "set-cookie") && clientSent && !allowCredentials:
		return false
	}
	return true
}

// validHeader reports whether name is an HTTP token and value has no CR,
// LF or NUL.
func validHeader(name, value string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return !strings.ContainsAny(value, "\r\n\x00")
}
