package deploytest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goModRequires returns the module versions a go.mod requires (direct and
// indirect), by module path.
func goModRequires(data []byte) (map[string]string, error) {
	reqs := make(map[string]string)
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case inBlock && fields[0] == ")":
			inBlock = false
			continue
		case inBlock:
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			inBlock = true
			continue
		case fields[0] == "require":
			fields = fields[1:]
		default:
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: a requirement is a module path and a version, got %q", n, sc.Text())
		}
		reqs[fields[0]] = fields[1]
	}
	return reqs, sc.Err()
}

func TestGoModRequires(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		err      bool
	}{
		{name: "block", in: "module m\n\nrequire (\n\ta v1.0.0\n\tb v2.0.0 // indirect\n)\n", want: map[string]string{"a": "v1.0.0", "b": "v2.0.0"}},
		{name: "single lines", in: "module m\nrequire a v1.0.0\nrequire b v0.1.0 // indirect\n", want: map[string]string{"a": "v1.0.0", "b": "v0.1.0"}},
		{name: "replace and tool lines ignored", in: "module m\nreplace a => ../a\ntool x\nrequire (\n)\n", want: map[string]string{}},
		{name: "no version", in: "require (\n\ta\n)\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := goModRequires([]byte(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestToolsModuleSharesVersions: hack/tools (helm) requires every module it
// has in common with the product at the product's version. make test then
// compiles those packages (Kubernetes, kustomize, protobuf, golang.org/x/...)
// once, for helm, and the race-free build of these checks reuses them; one
// version apart, each is compiled twice on a new machine (mk/chart.mk).
func TestToolsModuleSharesVersions(t *testing.T) {
	root := repoRoot(t)
	read := func(name string) map[string]string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		reqs, err := goModRequires(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return reqs
	}
	product, tools := read("go.mod"), read("hack/tools/go.mod")
	shared := 0
	for mod, v := range product {
		tv, ok := tools[mod]
		if !ok {
			continue
		}
		shared++
		if tv != v {
			t.Errorf("%s: hack/tools/go.mod requires %s, go.mod %s (cd hack/tools && go get %s@%s && go mod tidy)", mod, tv, v, mod, v)
		}
	}
	if shared == 0 {
		t.Error("go.mod and hack/tools/go.mod have no module in common: the parse is wrong")
	}
}
