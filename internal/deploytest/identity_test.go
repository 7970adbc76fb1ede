package deploytest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// headerMutationFilter strips client-sent identity headers before ext_proc.
const headerMutationFilter = "envoy.filters.http.header_mutation"

// What extproc.identity reads, Envoy must send (docs/identity.md): the
// metadata namespace of every jwt_metadata source in
// metadata_options.forwarding_namespaces.untyped, the attribute of every
// peer_certificate source in request_attributes, and every header of a
// headers source removed by a header_mutation filter that runs before
// ext_proc (a client's copy would otherwise be believed).

// removedHeaders returns the request headers a header_mutation filter
// removes, or nil when hf is not one.
func removedHeaders(hf *hcmv3.HttpFilter) (map[string]bool, error) {
	hm := &headermutationv3.HeaderMutation{}
	if hf.GetName() != headerMutationFilter || !hf.GetTypedConfig().MessageIs(hm) {
		return nil, nil
	}
	if err := hf.GetTypedConfig().UnmarshalTo(hm); err != nil {
		return nil, fmt.Errorf("%s: %w", headerMutationFilter, err)
	}
	out := map[string]bool{}
	for _, m := range hm.GetMutations().GetRequestMutations() {
		if r := m.GetRemove(); r != "" {
			out[r] = true
		}
	}
	return out, nil
}

// removedBefore returns the headers removed by the header_mutation filters
// that come before ext_proc in an HCM.
func removedBefore(h *hcmv3.HttpConnectionManager) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range h.GetHttpFilters() {
		if f.GetTypedConfig().MessageIs(&extprocv3.ExternalProcessor{}) {
			break
		}
		rm, err := removedHeaders(f)
		if err != nil {
			return nil, err
		}
		for k := range rm {
			out[k] = true
		}
	}
	return out, nil
}

// checkIdentityForwarding checks that Envoy sends what id reads.
func checkIdentityForwarding(ep *extprocv3.ExternalProcessor, removed map[string]bool, id *config.Identity) []error {
	if id == nil {
		return nil
	}
	var errs []error
	namespaces := ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped()
	for i := range id.Sources {
		s := &id.Sources[i]
		where := fmt.Sprintf("extproc.identity.sources[%d]", i)
		switch {
		case s.JWTMetadata != nil:
			if !slices.Contains(namespaces, s.JWTMetadata.Namespace) {
				errs = append(errs, fmt.Errorf("ext_proc: metadata_options.forwarding_namespaces.untyped lacks %q, which %s reads: the processor would never see the JWT", s.JWTMetadata.Namespace, where))
			}
		case s.PeerCertificate != nil:
			if !slices.Contains(ep.GetRequestAttributes(), s.PeerCertificate.Attribute) {
				errs = append(errs, fmt.Errorf("ext_proc: request_attributes lacks %q, which %s reads: the processor would never see the peer", s.PeerCertificate.Attribute, where))
			}
		case s.Headers != nil:
			for _, n := range []string{s.Headers.User, s.Headers.Email, s.Headers.Tenant, s.Headers.Roles, s.Headers.Teams} {
				if n != "" && !removed[n] {
					errs = append(errs, fmt.Errorf("header %q, which %s believes set by Envoy, is not removed by a %s filter before ext_proc: a client's copy would be believed", n, where, headerMutationFilter))
				}
			}
		}
	}
	return errs
}

// istioRemovedHeaders reads an EnvoyFilter HTTP_FILTER patch that adds a
// header_mutation filter first in the chain, returning the headers it
// removes; ok is false when the patch is something else.
func istioRemovedHeaders(cp *envoyConfigPatch) (removed map[string]bool, ok bool, err error) {
	var peek struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(cp.Patch.Value, &peek) != nil || peek.Name != headerMutationFilter {
		return nil, false, nil
	}
	if cp.Patch.Operation != "INSERT_FIRST" {
		return nil, true, fmt.Errorf("operation %s, want INSERT_FIRST: identity headers must be removed before any filter reads or sets them", cp.Patch.Operation)
	}
	hf := &hcmv3.HttpFilter{}
	if err := decodeProtoJSON(cp.Patch.Value, hf); err != nil {
		return nil, true, fmt.Errorf("patch.value: %w", err)
	}
	removed, err = removedHeaders(hf)
	return removed, true, err
}

// withIdentity adds an extproc.identity block to the shipped config.
func withIdentity(sources string) func(s snapshot) snapshot {
	return func(s snapshot) snapshot {
		return s.put(configYAML, append(append([]byte(nil), s.file(configYAML)...), []byte("  identity:\n    sources:\n"+sources)...))
	}
}

// TestIdentityForwarding: a config whose sources Envoy serves passes, and
// each way of not serving them is reported (in envoy.yaml and the Istio
// EnvoyFilter alike).
func TestIdentityForwarding(t *testing.T) {
	s := loadSnapshot(t)
	rd := newRenderer()
	baseline := map[string]bool{}
	for _, err := range checkAll(s, rd) {
		baseline[err.Error()] = true
	}
	served := withIdentity("      - jwt_metadata: {key: jwt_payload}\n      - peer_certificate: {}\n      - headers: {set_by_envoy: true, user: x-user, tenant: x-tenant-id}\n")
	for _, tc := range []struct {
		name  string
		edit  func(s snapshot) snapshot
		wants []string // each must be in a new problem; none: no new problem
	}{
		{name: "served", edit: served},
		{name: "namespace not forwarded", edit: withIdentity("      - jwt_metadata: {key: p, namespace: custom.ns}\n"),
			wants: []string{"manifests/istio: EnvoyFilter mcp-extproc: ext_proc: metadata_options.forwarding_namespaces.untyped lacks \"custom.ns\"",
				"envoy.yaml"}},
		{name: "attribute not requested", edit: withIdentity("      - peer_certificate: {attribute: connection.dns_san_peer_certificate}\n"),
			wants: []string{"request_attributes lacks \"connection.dns_san_peer_certificate\""}},
		{name: "header not removed", edit: withIdentity("      - headers: {set_by_envoy: true, user: x-forwarded-user}\n"),
			wants: []string{"header \"x-forwarded-user\", which extproc.identity.sources[0] believes set by Envoy, is not removed"}},
		{name: "removal dropped from envoy.yaml", edit: func(s snapshot) snapshot {
			return served(s.edit(t, envoyYAML, "                - remove: x-tenant-id\n", ""))
		}, wants: []string{"header \"x-tenant-id\""}},
		{name: "istio removes too late", edit: func(s snapshot) snapshot {
			return s.edit(t, filterYAML, "operation: INSERT_FIRST", "operation: INSERT_BEFORE")
		}, wants: []string{"want INSERT_FIRST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fresh []string
			for _, err := range checkAll(tc.edit(s), rd) {
				if !baseline[err.Error()] {
					fresh = append(fresh, err.Error())
				}
			}
			if len(tc.wants) == 0 && len(fresh) > 0 {
				t.Errorf("new problems:\n%s", strings.Join(fresh, "\n"))
			}
			for _, w := range tc.wants {
				if !slices.ContainsFunc(fresh, func(m string) bool { return strings.Contains(m, w) }) {
					t.Errorf("no new problem mentions %q; new problems:\n%s", w, strings.Join(fresh, "\n"))
				}
			}
		})
	}
}
