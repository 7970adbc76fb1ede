package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeHeadings returns the Markdown headings of text outside code
// fences, as written (without the leading #s).
func readmeHeadings(text string) []string {
	var out []string
	fenced := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if h, ok := strings.CutPrefix(line, "#"); ok && !fenced {
			out = append(out, strings.TrimSpace(strings.TrimLeft(h, "#")))
		}
	}
	return out
}

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces
// to dashes, punctuation other than - and _ dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestReadmeSections: no section of the README appears twice (whatever its
// level), and every in-page link of the contents reaches a heading.
func TestReadmeSections(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]bool{}
	for _, h := range readmeHeadings(string(data)) {
		key := strings.ToLower(h)
		if seen[key] {
			t.Errorf("README: section %q appears twice", h)
		}
		seen[key] = true
		anchors[githubAnchor(h)] = true
	}
	links := regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(data), -1)
	if len(links) < 10 {
		t.Errorf("README: %d in-page links, want a table of contents", len(links))
	}
	for _, m := range links {
		if !anchors[m[1]] {
			t.Errorf("README links to #%s, which no heading has", m[1])
		}
	}
	for _, want := range []string{"## Contents", "```mermaid\nsequenceDiagram", "```mermaid\nflowchart"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("README lacks %q", want)
		}
	}
}

func TestGithubAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"What happens when…":                        "what-happens-when",
		"The ext_proc filter, setting by setting":   "the-ext_proc-filter-setting-by-setting",
		"Sidecar deployment (any Kubernetes)":       "sidecar-deployment-any-kubernetes",
		"In Kubernetes: a ConfigMap, reloaded live": "in-kubernetes-a-configmap-reloaded-live",
	} {
		if got := githubAnchor(h); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestMakeHelp: `make help` lists every target a newcomer is told about,
// each with its one-line description.
func TestMakeHelp(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	cmd := exec.Command(makeBin, "--no-print-directory", "-s", "help")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	listed := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(line, "  ") {
			listed[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for name := range makeTargets(t, repoRoot(t)) {
		switch name {
		case "all", "PHONY", ".PHONY":
			continue
		}
		if strings.Contains(name, "%") || strings.HasPrefix(name, ".") {
			continue
		}
		if listed[name] == "" {
			t.Errorf("make help does not describe target %q (give it a ## comment)", name)
		}
	}
}
