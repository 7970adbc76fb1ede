// Package ruleset holds the extproc.rules that the allocation budgets
// (pkg/processor) and the benchmarks (internal/bench) both judge, so that
// what is counted is what is timed.
package ruleset

import (
	"fmt"
	"strconv"
	"strings"
)

// Twenty is the YAML of the extproc.rules list (indented under extproc:)
// of 20 rules of the kinds docs/rules.md shows: by role and tool prefix,
// by tool name, by argument, by tenant and by header. None denies an echo
// call; one hides every admin_ tool from a caller without the admin role.
func Twenty() string {
	var b strings.Builder
	b.WriteString("  rules:\n")
	add := func(name, deny string) {
		fmt.Fprintf(&b, "    - name: %s\n      deny: %s\n", name, strconv.Quote(deny))
	}
	add("admin-tools", `mcp.name.startsWith("admin_") && !("admin" in identity.roles)`)
	for i := range 8 {
		add(fmt.Sprintf("ops-%d", i), fmt.Sprintf(`mcp.name == "ops_tool_%d" && !("ops" in identity.roles)`, i))
	}
	for i := range 4 {
		add(fmt.Sprintf("public-read-%d", i), fmt.Sprintf(`mcp.name == "read_file_%d" && !mcp.arguments.path.startsWith("/public/")`, i))
	}
	for i := range 4 {
		add(fmt.Sprintf("tenant-%d", i), fmt.Sprintf(`identity.tenant == "suspended-%d"`, i))
	}
	for i := range 3 {
		add(fmt.Sprintf("client-%d", i), fmt.Sprintf(`request.headers["user-agent"] == "banned-agent-%d"`, i))
	}
	return b.String()
}
