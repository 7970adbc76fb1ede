package identity

import (
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// headerSource reads request headers that Envoy sets (set_by_envoy).
type headerSource struct {
	cfg config.HeaderIdentitySource
}

func (s *headerSource) names() []string {
	var out []string
	for _, n := range []string{s.cfg.User, s.cfg.Email, s.cfg.Name, s.cfg.Tenant, s.cfg.Roles, s.cfg.Teams} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (s *headerSource) resolve(r *Request) (Identity, bool) {
	if r.Header == nil {
		return Identity{}, false
	}
	get := func(name string) string {
		if name == "" {
			return ""
		}
		v, ok := r.Header(name)
		if !ok {
			return ""
		}
		v, _ = bounded(v)
		return v
	}
	id := Identity{Source: SourceHeaders, User: get(s.cfg.User), Tenant: get(s.cfg.Tenant)}
	if !id.usable() {
		return Identity{}, false
	}
	id.Email = get(s.cfg.Email)
	id.Name = get(s.cfg.Name)
	id.Roles = boundedList(splitList(get(s.cfg.Roles)))
	id.Teams = boundedList(splitList(get(s.cfg.Teams)))
	return id, true
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
