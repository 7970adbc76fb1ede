package config

import (
	"fmt"
	"strings"
)

// Identity is extproc.identity: where the caller's identity (the plugin
// context's user, user_context and tenant_id) comes from. See
// docs/identity.md.
//
// Sources are tried in order, most trusted first. The first source that
// yields a user or a tenant is the request's identity, whole: fields are
// never mixed from two sources, so a client-settable source can never add
// a tenant to a verified user, and a later source is not consulted at all
// once an earlier one answered. A request no source answers has no
// identity.
type Identity struct {
	Sources []IdentitySource `yaml:"sources" json:"sources" default:"required: at least one source"`
}

// IdentitySource is one entry of extproc.identity.sources: exactly one of
// its fields is set.
type IdentitySource struct {
	// JWTMetadata reads the payload Envoy's jwt_authn filter verified and
	// put in dynamic metadata (payload_in_metadata).
	JWTMetadata *JWTMetadataSource `yaml:"jwt_metadata,omitempty" json:"jwt_metadata,omitempty" default:"none; one source kind per entry"`
	// PeerCertificate reads the mTLS peer from an ext_proc request
	// attribute (the SPIFFE id of the client certificate).
	PeerCertificate *PeerCertificateSource `yaml:"peer_certificate,omitempty" json:"peer_certificate,omitempty" default:"none; one source kind per entry"`
	// Headers reads request headers that Envoy itself sets after removing
	// the client's copies (set_by_envoy must be true).
	Headers *HeaderIdentitySource `yaml:"headers,omitempty" json:"headers,omitempty" default:"none; one source kind per entry"`
}

// Defaults of the identity sources.
const (
	DefaultJWTNamespace  = "envoy.filters.http.jwt_authn"
	DefaultUserClaim     = "sub"
	DefaultEmailClaim    = "email"
	DefaultPeerAttribute = "connection.uri_san_peer_certificate"
)

// JWTMetadataSource is a verified JWT payload in Envoy's dynamic metadata.
type JWTMetadataSource struct {
	// Namespace is the metadata namespace (default
	// envoy.filters.http.jwt_authn). Envoy forwards it to ext_proc only
	// when the filter lists it in metadata_options.forwarding_namespaces.untyped.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty" default:"envoy.filters.http.jwt_authn"`
	// Key is the jwt_authn provider's payload_in_metadata (required; Istio
	// uses the issuer).
	Key string `yaml:"key" json:"key" default:"required"`
	// Claims names the claims, as claim paths (docs/identity.md).
	Claims Claims `yaml:"claims,omitempty" json:"claims,omitempty" default:"each claim's default"`
}

// Claims are the claim paths of a JWT payload: dot-separated names, a name
// with dots or brackets written as ["..."] (["https://acme.example/tenant"],
// realm_access.roles).
type Claims struct {
	User   string `yaml:"user,omitempty" json:"user,omitempty" default:"sub"`      // default "sub"
	Email  string `yaml:"email,omitempty" json:"email,omitempty" default:"email"`  // default "email"
	Name   string `yaml:"name,omitempty" json:"name,omitempty" default:"none"`     // full name, none by default
	Tenant string `yaml:"tenant,omitempty" json:"tenant,omitempty" default:"none"` // none by default
	Roles  string `yaml:"roles,omitempty" json:"roles,omitempty" default:"none"`   // a string array (or one string)
	Teams  string `yaml:"teams,omitempty" json:"teams,omitempty" default:"none"`   // a string array (or one string)
}

// PeerCertificateSource is the client certificate of an mTLS connection,
// as an ext_proc request attribute.
type PeerCertificateSource struct {
	// Attribute is the request attribute holding the peer's id (default
	// connection.uri_san_peer_certificate, the SPIFFE id). Envoy sends it
	// only when the filter lists it in request_attributes.
	Attribute string `yaml:"attribute,omitempty" json:"attribute,omitempty" default:"connection.uri_san_peer_certificate"`
	// TrustDomains, when set, accepts only spiffe://<domain>/... ids of
	// these trust domains; any other peer yields no identity.
	TrustDomains []string `yaml:"trust_domains,omitempty" json:"trust_domains,omitempty" default:"none: any peer"`
}

// HeaderIdentitySource is identity in request headers that Envoy sets.
type HeaderIdentitySource struct {
	// SetByEnvoy declares that Envoy removes client-sent copies of these
	// headers before ext_proc and sets them itself (jwt_authn
	// claim_to_headers after a header_mutation that removes them). Required
	// true: a header a client can send proves nothing.
	SetByEnvoy bool   `yaml:"set_by_envoy" json:"set_by_envoy" default:"false, refused: must be true"`
	User       string `yaml:"user,omitempty" json:"user,omitempty" default:"none"`
	Email      string `yaml:"email,omitempty" json:"email,omitempty" default:"none"`
	Name       string `yaml:"name,omitempty" json:"name,omitempty" default:"none"` // display name: user_context.full_name
	Tenant     string `yaml:"tenant,omitempty" json:"tenant,omitempty" default:"none"`
	Roles      string `yaml:"roles,omitempty" json:"roles,omitempty" default:"none"` // comma-separated
	Teams      string `yaml:"teams,omitempty" json:"teams,omitempty" default:"none"` // comma-separated
}

// Kind names the source's kind as in the file ("jwt_metadata", ...), or
// "" when no kind or several are set.
func (s *IdentitySource) Kind() string {
	kinds := s.kinds()
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

func (s *IdentitySource) kinds() []string {
	var out []string
	if s.JWTMetadata != nil {
		out = append(out, "jwt_metadata")
	}
	if s.PeerCertificate != nil {
		out = append(out, "peer_certificate")
	}
	if s.Headers != nil {
		out = append(out, "headers")
	}
	return out
}

// setDefaults fills in namespaces, claims and attributes, and lower-cases
// header names.
func (id *Identity) setDefaults(*Config) {
	for i := range id.Sources {
		s := &id.Sources[i]
		if j := s.JWTMetadata; j != nil {
			if j.Namespace = strings.TrimSpace(j.Namespace); j.Namespace == "" {
				j.Namespace = DefaultJWTNamespace
			}
			if j.Claims.User == "" {
				j.Claims.User = DefaultUserClaim
			}
			if j.Claims.Email == "" {
				j.Claims.Email = DefaultEmailClaim
			}
		}
		if p := s.PeerCertificate; p != nil && strings.TrimSpace(p.Attribute) == "" {
			p.Attribute = DefaultPeerAttribute
		}
		if h := s.Headers; h != nil {
			for _, f := range h.fields() {
				*f.name = lowerHeader(*f.name)
			}
		}
	}
}

type headerField struct {
	key  string
	name *string
}

func (h *HeaderIdentitySource) fields() []headerField {
	return []headerField{{"user", &h.User}, {"email", &h.Email}, {"name", &h.Name}, {"tenant", &h.Tenant}, {"roles", &h.Roles}, {"teams", &h.Teams}}
}

// PeerAttributes are the request attributes a peer_certificate source may
// read: the peer certificate's ids.
var PeerAttributes = []string{
	"connection.uri_san_peer_certificate",
	"connection.dns_san_peer_certificate",
	"connection.subject_peer_certificate",
}

// check validates extproc.identity's sources. (The legacy user_header and
// tenant_header it replaces are the extproc section's keys: extproc.go.)
func (id *Identity) check(v *validator, _ *Config, at string) {
	if len(id.Sources) == 0 {
		v.problem("", joinPath(at, "sources"), "required: at least one source (jwt_metadata, peer_certificate, headers)")
	}
	for i := range id.Sources {
		v.identitySource(&id.Sources[i], fmt.Sprintf("%s[%d]", joinPath(at, "sources"), i))
	}
}

func (v *validator) identitySource(s *IdentitySource, f string) {
	switch kinds := s.kinds(); len(kinds) {
	case 0:
		v.problem("", f, "set one of jwt_metadata, peer_certificate, headers")
		return
	case 1:
	default:
		v.problem("", f, "set only one of %s (one source per entry)", strings.Join(kinds, ", "))
		return
	}
	switch {
	case s.JWTMetadata != nil:
		v.jwtSource(s.JWTMetadata, f+".jwt_metadata")
	case s.PeerCertificate != nil:
		v.peerSource(s.PeerCertificate, f+".peer_certificate")
	default:
		v.headerSource(s.Headers, f+".headers")
	}
}

func (v *validator) jwtSource(j *JWTMetadataSource, f string) {
	if strings.TrimSpace(j.Key) == "" {
		v.problem("", f+".key", "required: the jwt_authn provider's payload_in_metadata")
	}
	c := &j.Claims
	for _, cl := range []struct{ key, path string }{
		{"user", c.User}, {"email", c.Email}, {"name", c.Name}, {"tenant", c.Tenant}, {"roles", c.Roles}, {"teams", c.Teams},
	} {
		if cl.path == "" {
			continue
		}
		if _, err := ParseClaimPath(cl.path); err != nil {
			v.problem("", f+".claims."+cl.key, "%v", err)
		}
	}
}

func (v *validator) peerSource(p *PeerCertificateSource, f string) {
	known := false
	for _, a := range PeerAttributes {
		known = known || p.Attribute == a
	}
	if !known {
		v.problem("", f+".attribute", "must be %s, got %q", quotedOr(PeerAttributes), p.Attribute)
	}
	for i, td := range p.TrustDomains {
		if td == "" || strings.ContainsAny(td, "/:@ ") || strings.ToLower(td) != td {
			v.problem("", fmt.Sprintf("%s.trust_domains[%d]", f, i), "%q is not a SPIFFE trust domain (lower case, no scheme or path)", td)
		}
	}
	if len(p.TrustDomains) > 0 && p.Attribute != DefaultPeerAttribute {
		v.problem("", f+".trust_domains", "needs attribute %s: SPIFFE ids are URI SANs", DefaultPeerAttribute)
	}
}

func (v *validator) headerSource(h *HeaderIdentitySource, f string) {
	if !h.SetByEnvoy {
		v.problem("", f+".set_by_envoy", "must be true: identity headers are believed only when Envoy removes the client's copies before ext_proc and sets them itself (docs/identity.md)")
	}
	if h.User == "" && h.Tenant == "" {
		v.problem("", f, "set user or tenant (a header name)")
	}
	for _, hf := range h.fields() {
		name := *hf.name
		switch {
		case name == "":
		case !validHeaderName(name) || strings.HasPrefix(name, ":"):
			v.problem("", f+"."+hf.key, "%q is not a valid header name", name)
		case IsCredentialHeader(name):
			v.problem("", f+"."+hf.key, "%q carries credentials, not a verified identity", name)
		}
	}
}
