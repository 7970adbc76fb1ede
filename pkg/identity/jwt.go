package identity

import (
	"strconv"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// jwtSource reads a verified JWT payload from dynamic metadata.
type jwtSource struct {
	namespace, key                          string
	user, email, name, tenant, roles, teams []string // claim paths; nil: not mapped
}

func newJWTSource(j *config.JWTMetadataSource) (*jwtSource, error) {
	s := &jwtSource{namespace: j.Namespace, key: j.Key}
	for _, c := range []struct {
		path string
		dst  *[]string
	}{
		{j.Claims.User, &s.user}, {j.Claims.Email, &s.email}, {j.Claims.Name, &s.name},
		{j.Claims.Tenant, &s.tenant}, {j.Claims.Roles, &s.roles}, {j.Claims.Teams, &s.teams},
	} {
		if c.path == "" {
			continue
		}
		p, err := config.ParseClaimPath(c.path)
		if err != nil {
			return nil, err
		}
		*c.dst = p
	}
	return s, nil
}

func (s *jwtSource) resolve(r *Request) (Identity, bool) {
	ns, ok := r.Metadata.Namespace(s.namespace)
	if !ok {
		return Identity{}, false
	}
	payload, ok := ns.Field(s.key).Struct()
	if !ok {
		return Identity{}, false
	}
	id := Identity{Source: SourceJWT}
	id.User, _ = bounded(claimString(payload, s.user))
	id.Tenant, _ = bounded(claimString(payload, s.tenant))
	if !id.usable() {
		return Identity{}, false
	}
	id.Email, _ = bounded(claimString(payload, s.email))
	id.Name, _ = bounded(claimString(payload, s.name))
	id.Roles = boundedList(claimStrings(payload, s.roles))
	id.Teams = boundedList(claimStrings(payload, s.teams))
	id.Claims = payload
	return id, true
}

// claimString returns a string claim, or a whole number as its decimal
// form (numeric subject ids exist); "" for anything else.
func claimString(payload structwire.Struct, path []string) string {
	v := payload.Path(path)
	if s, ok := v.String(); ok {
		return s
	}
	if f, ok := v.Number(); ok && f == float64(int64(f)) && f > -1<<53 && f < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return ""
}

// claimStrings returns an array claim's strings (other items are skipped),
// or a string claim as one item.
func claimStrings(payload structwire.Struct, path []string) []string {
	v := payload.Path(path)
	if s, ok := v.String(); ok {
		return []string{s}
	}
	items, _ := v.List()
	if len(items) == 0 {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := item.String(); ok {
			out = append(out, s)
		}
	}
	return out
}
