package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// extproc.rules is a list of [rules.Rule], whose keys package rules
// declares; the extproc section (extproc.go) calls rulesDefaults and
// validator.rules for it.

// rulesDefaults trims the rules' names.
func rulesDefaults(rs []rules.Rule) {
	for i := range rs {
		rs[i].Name = strings.TrimSpace(rs[i].Name)
	}
}

// rules validates extproc.rules (at path at) by compiling them: every
// issue of rules.Compile is a problem of its rule's name or deny. It warns
// about a rule that reads identity.* where nothing can fill it in.
func (v *validator) rules(c *Config, at string) {
	e := &c.Extproc
	if len(e.Rules) == 0 {
		return
	}
	set, issues := rules.Compile(e.Rules, rules.Options{})
	for _, is := range issues {
		v.problem("", fmt.Sprintf("%s[%d].%s", at, is.Index, is.Field), "%s", is.Error())
	}
	if set == nil || e.Identity != nil || mayResolveIdentity(c.Plugins) {
		return
	}
	for i := range set.Len() {
		empty := emptyIdentity(set.Variables(i), e)
		if len(empty) == 0 {
			continue
		}
		v.warn("", fmt.Sprintf("%s[%d].deny", at, i),
			"rule %q reads %s, always empty here: extproc.identity is not configured and no plugin has an %s or %s hook (docs/identity.md)",
			set.Rule(i).Name, strings.Join(empty, ", "), cpex.HTTPAuthResolveUser, cpex.IdentityResolve)
	}
}

// mayResolveIdentity reports whether a plugin has, or may be given by its
// server (its hooks are not set in the file), a hook that resolves the
// caller's identity.
func mayResolveIdentity(plugins []Plugin) bool {
	for i := range plugins {
		p := &plugins[i]
		if p.EffectiveMode() == ModeDisabled {
			continue
		}
		if len(p.Hooks) == 0 || slices.Contains(p.Hooks, cpex.HTTPAuthResolveUser) || slices.Contains(p.Hooks, cpex.IdentityResolve) {
			return true
		}
	}
	return false
}

// emptyIdentity returns the identity variables among vars that nothing
// fills in without extproc.identity: all of them but identity.user and
// identity.tenant when the legacy user_header and tenant_header name them.
func emptyIdentity(vars []string, e *Extproc) []string {
	var empty []string
	for _, name := range vars {
		switch {
		case !strings.HasPrefix(name, "identity."):
		case name == "identity.user" && e.UserHeader != "":
		case name == "identity.tenant" && e.TenantHeader != "":
		default:
			empty = append(empty, name)
		}
	}
	return empty
}
