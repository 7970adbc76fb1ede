package identity

import (
	"encoding/json"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// userObject is GlobalContext.user in cpex's object form. ContextForge
// plugins read "email"; user_patterns conditions match "email" and "id".
type userObject struct {
	ID       string `json:"id"`
	Email    string `json:"email,omitempty"`
	FullName string `json:"full_name,omitempty"`
	IsAdmin  bool   `json:"is_admin"`
}

// Apply sets g's user, user_context and tenant_id to id: all of them, so
// nothing a less trusted source set earlier survives. A tenant-only
// identity leaves user and user_context unset.
func (id *Identity) Apply(g *cpex.GlobalContext) {
	g.User, g.UserContext, g.TenantID = nil, nil, id.Tenant
	if id.User == "" {
		return
	}
	// Marshalling a struct of strings cannot fail.
	g.User, _ = json.Marshal(userObject{ID: id.User, Email: id.Email, FullName: id.Name, IsAdmin: id.IsAdmin})
	g.UserContext = &cpex.UserContext{
		UserID: id.User, Email: id.Email, FullName: id.Name, IsAdmin: id.IsAdmin,
		Roles: id.Roles, Teams: id.Teams, TeamID: id.Tenant, AuthMethod: id.Source,
	}
}
