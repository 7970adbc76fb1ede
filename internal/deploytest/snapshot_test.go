package deploytest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// snapshot is a copy of the deployment files, keyed by slash-separated path
// relative to the repository root. Checks read only a snapshot, never the
// disk, so broken copies can be checked the same way.
type snapshot struct {
	files map[string][]byte
	// cmds lists the directories under cmd/ (the binaries that can be built).
	cmds []string
}

// deployDirs and deployFiles are what loadSnapshot copies.
var (
	deployDirs  = []string{"envoy", "manifests", "hack", "mk"}
	deployFiles = []string{"Dockerfile", ".dockerignore", "Makefile"}
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	return root
}

// loadSnapshot reads the deployment files of the repository. A missing
// optional file (Makefile, while it is being written) is simply absent.
func loadSnapshot(t testing.TB) snapshot {
	t.Helper()
	root := repoRoot(t)
	s := snapshot{files: map[string][]byte{}}
	for _, dir := range deployDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.files[filepath.ToSlash(rel)] = data
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
	}
	for _, f := range deployFiles {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s.files[f] = data
	}
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatalf("read cmd/: %v", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			s.cmds = append(s.cmds, e.Name())
		}
	}
	return s
}

// file returns the content of a file of the snapshot, or nil.
func (s snapshot) file(name string) []byte { return s.files[name] }

// edit returns a copy of s in which the first occurrence of old in file name
// is replaced by new. It fails the test when old does not occur, so a broken
// copy never silently equals the original.
func (s snapshot) edit(t testing.TB, name, old, new string) snapshot {
	t.Helper()
	data, ok := s.files[name]
	if !ok {
		t.Fatalf("edit: no file %s in the snapshot", name)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("edit: %q does not occur in %s", old, name)
	}
	c := s.clone()
	c.files[name] = []byte(strings.Replace(string(data), old, new, 1))
	return c
}

// put returns a copy of s with file name set to data (nil removes it).
func (s snapshot) put(name string, data []byte) snapshot {
	c := s.clone()
	if data == nil {
		delete(c.files, name)
	} else {
		c.files[name] = data
	}
	return c
}

func (s snapshot) clone() snapshot {
	return snapshot{files: maps.Clone(s.files), cmds: slices.Clone(s.cmds)}
}

// fsRoot is where fs puts the snapshot in its in-memory file system.
const fsRoot = "/repo"

// fs returns the snapshot as an in-memory file system for kustomize.
func (s snapshot) fs() (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	for name, data := range s.files {
		p := path.Join(fsRoot, name)
		if err := mem.MkdirAll(path.Dir(p)); err != nil {
			return nil, fmt.Errorf("snapshot fs: %w", err)
		}
		if err := mem.WriteFile(p, data); err != nil {
			return nil, fmt.Errorf("snapshot fs: %w", err)
		}
	}
	return mem, nil
}

// problems collects the findings of the checks.
type problems struct{ errs []error }

func (p *problems) addf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// addAll records every error of errs, each prefixed with where.
func (p *problems) addAll(where string, errs []error) {
	for _, err := range errs {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", where, err))
	}
}

func (p *problems) add(where string, err error) {
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", where, err))
	}
}
