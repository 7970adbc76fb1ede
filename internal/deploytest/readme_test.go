package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCommandsExist: every `make TARGET` the README tells a newcomer
// to run is a target of the Makefile (or of the mk/*.mk it includes), and
// the README shows the two commands CI and newcomers rely on.
func TestReadmeCommandsExist(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(t, root)
	for _, want := range []string{"demo", "test"} {
		if !strings.Contains(string(readme), "make "+want) {
			t.Errorf("README does not show `make %s`", want)
		}
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("make ((?:[a-z][a-z0-9-]*[ ]?)+)").FindAllStringSubmatch(string(readme), -1) {
		for _, name := range strings.Fields(m[1]) {
			if seen[name] || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
				continue
			}
			seen[name] = true
			if !targets[name] {
				t.Errorf("README mentions `make %s`, which is not a Makefile target", name)
			}
		}
	}
	if len(seen) < 5 {
		t.Errorf("found only %d make commands in the README: %v", len(seen), seen)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil || !strings.Contains(string(ci), "make test") {
		t.Errorf(".ci/run must call `make test` (err %v)", err)
	}
}

// makeTargets lists the explicit targets of the Makefile and mk/*.mk,
// expanding the `name: name-%` static pattern prefixes it can see.
func makeTargets(t *testing.T, root string) map[string]bool {
	files := []string{filepath.Join(root, "Makefile")}
	more, _ := filepath.Glob(filepath.Join(root, "mk", "*.mk"))
	files = append(files, more...)
	out := map[string]bool{}
	rule := regexp.MustCompile(`(?m)^([a-zA-Z][a-zA-Z0-9_ .-]*?)\s*:([^=]|$)`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rule.FindAllStringSubmatch(string(data), -1) {
			for _, name := range strings.Fields(m[1]) {
				out[name] = true
			}
		}
	}
	return out
}
