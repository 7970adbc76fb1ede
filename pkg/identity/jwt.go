package identity

import (
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
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
	ns := r.Metadata[s.namespace]
	if ns == nil {
		return Identity{}, false
	}
	payload := ns.GetFields()[s.key].GetStructValue()
	if payload == nil {
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

// Claim returns the value at path in payload, or nil.
func Claim(payload *structpb.Struct, path []string) *structpb.Value {
	if len(path) == 0 {
		return nil
	}
	v := payload.GetFields()[path[0]]
	for _, name := range path[1:] {
		v = v.GetStructValue().GetFields()[name]
	}
	return v
}

// claimString returns a string claim, or a whole number as its decimal
// form (numeric subject ids exist); "" for anything else.
func claimString(payload *structpb.Struct, path []string) string {
	switch v := Claim(payload, path).GetKind().(type) {
	case *structpb.Value_StringValue:
		return v.StringValue
	case *structpb.Value_NumberValue:
		if f := v.NumberValue; f == float64(int64(f)) && f > -1<<53 && f < 1<<53 {
			return strconv.FormatInt(int64(f), 10)
		}
	}
	return ""
}

// claimStrings returns an array claim's strings (other items are skipped),
// or a string claim as one item.
func claimStrings(payload *structpb.Struct, path []string) []string {
	switch v := Claim(payload, path).GetKind().(type) {
	case *structpb.Value_StringValue:
		return []string{v.StringValue}
	case *structpb.Value_ListValue:
		items := v.ListValue.GetValues()
		if len(items) == 0 {
			return nil
		}
		out := make([]string, 0, len(items))
		for _, item := range items {
			if s, ok := item.GetKind().(*structpb.Value_StringValue); ok {
				out = append(out, s.StringValue)
			}
		}
		return out
	}
	return nil
}
