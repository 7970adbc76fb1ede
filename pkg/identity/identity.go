// Package identity resolves who is calling from what Envoy verified before
// ext_proc ran: the payload of a JWT that jwt_authn checked (dynamic
// metadata), the mTLS peer's certificate (request attributes), and request
// headers Envoy sets itself. Which sources apply, in which order, is decided
// once per configuration ([New]); a request only walks the compiled list.
//
// The trust model (docs/identity.md): sources are tried most trusted first
// and the first that yields a user or a tenant is the identity, whole.
// Nothing from a later source is mixed in, so a client-settable value never
// adds to or overrides a verified one. Values over the bounds below make the
// source yield nothing for that field, never a truncated id.
//
// The package knows the shape of Envoy's data (a metadata namespace holds a
// Struct; attributes are a Struct of the ext_proc filter) but not gRPC or
// the processor.
package identity

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// Bounds on what a source may yield.
const (
	// MaxValueBytes bounds one value (a user id, an e-mail, a role).
	MaxValueBytes = 1024
	// MaxListItems bounds roles and teams; items beyond are dropped.
	MaxListItems = 64
)

// The values of [Identity.Source] and of user_context.auth_method.
const (
	SourceJWT     = "jwt"
	SourcePeer    = "mtls"
	SourceHeaders = "envoy_header"
	// SourcePlugin: a plugin's http_auth_resolve_user hook (the processor
	// runs it; the Resolver does not).
	SourcePlugin = "plugin"
)

// AttributesKey is the key of ProcessingRequest.attributes under which
// Envoy puts the attributes the filter's request_attributes asked for: the
// filter's own name.
const AttributesKey = "envoy.filters.http.ext_proc"

// Identity is who is calling.
type Identity struct {
	Source string // SourceJWT, SourcePeer or SourceHeaders
	User   string // the subject: a JWT sub, a SPIFFE id
	Email  string
	Name   string
	Tenant string
	Roles  []string
	Teams  []string
	// IsAdmin is what a resolve hook said (is_admin); no other source sets it.
	IsAdmin bool
	// Claims is the verified JWT payload the identity came from, encoded
	// (SourceJWT only; nil otherwise). Rules read it as identity.claims,
	// decoded when a rule does; it is never copied into the plugin context.
	Claims structwire.Struct
}

// Verified reports whether id comes from what Envoy verified (a JWT, the
// mTLS peer), as opposed to headers or a plugin.
func (id *Identity) Verified() bool { return id.Source == SourceJWT || id.Source == SourcePeer }

// Request is what Envoy sent with the request headers. Any field may be
// nil.
type Request struct {
	// Metadata is metadata_context, encoded and checked (structwire.Parse).
	Metadata structwire.Metadata
	// Attributes is attributes[AttributesKey]: attribute name → value.
	Attributes *structpb.Struct
	// Header returns a request header's value (lower-case name) and
	// whether it was sent exactly once.
	Header func(name string) (string, bool)
}

// Resolver resolves identities for one configuration. Safe for concurrent
// use.
type Resolver struct {
	sources  []source
	headers  []string
	metadata bool // a source reads Request.Metadata
}

type source interface {
	resolve(r *Request) (Identity, bool)
}

// New compiles the sources of id. It returns nil for a nil id: the
// processor then keeps the legacy header settings.
func New(id *config.Identity) (*Resolver, error) {
	if id == nil {
		return nil, nil
	}
	r := &Resolver{}
	for i := range id.Sources {
		s, err := compile(&id.Sources[i])
		if err != nil {
			return nil, fmt.Errorf("extproc.identity.sources[%d]: %w", i, err)
		}
		r.sources = append(r.sources, s)
		switch s := s.(type) {
		case *headerSource:
			r.headers = append(r.headers, s.names()...)
		case *jwtSource:
			r.metadata = true
		}
	}
	return r, nil
}

func compile(s *config.IdentitySource) (source, error) {
	switch {
	case s.JWTMetadata != nil:
		return newJWTSource(s.JWTMetadata)
	case s.PeerCertificate != nil:
		return &peerSource{attr: s.PeerCertificate.Attribute, domains: s.PeerCertificate.TrustDomains}, nil
	case s.Headers != nil:
		if !s.Headers.SetByEnvoy {
			return nil, fmt.Errorf("headers: set_by_envoy is not true")
		}
		return &headerSource{cfg: *s.Headers}, nil
	}
	return nil, fmt.Errorf("no source kind set")
}

// Headers lists the request headers the header sources read, so a caller
// can tell them apart from headers it forwards.
func (r *Resolver) Headers() []string { return r.headers }

// ReadsMetadata reports whether a source reads Envoy's forwarded metadata
// (Request.Metadata); false for a nil r.
func (r *Resolver) ReadsMetadata() bool { return r != nil && r.metadata }

// Resolve returns the identity of the first source that yields one.
func (r *Resolver) Resolve(req *Request) (Identity, bool) {
	for _, s := range r.sources {
		if id, ok := s.resolve(req); ok {
			return id, true
		}
	}
	return Identity{}, false
}

// bounded returns v when it is a usable value: non-empty, within
// MaxValueBytes, without control characters.
func bounded(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > MaxValueBytes {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c == 0x7f {
			return "", false
		}
	}
	return v, true
}

// boundedList keeps the usable values of vs, at most MaxListItems, in
// vs's own array (callers pass a slice made for the call); nil when none
// is usable.
func boundedList(vs []string) []string {
	out := vs[:0]
	for _, v := range vs {
		if len(out) == MaxListItems {
			break
		}
		if v, ok := bounded(v); ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// usable reports whether id identifies anyone.
func (id *Identity) usable() bool { return id.User != "" || id.Tenant != "" }
