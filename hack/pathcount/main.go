// Command pathcount lists the code one exchange runs: it runs a test twice
// with coverage, once with few exchanges and once with more, and keeps the
// blocks whose count grew by at least the exchanges added, that is, the code
// every exchange ran (set-up and background work drop out). It prints each
// file of this module with the functions run in it, grouped: the request's
// path (the processor and the packages it calls), the plugin call behind
// processor.Hooks (executor, plugin client), and the test's own servers.
//
//	go run ./hack/pathcount            # the tools/call of docs/architecture.md
//
// The count it ends with is the strict one: every file whose code runs,
// however small the call, where docs/architecture.md's list counts a call
// into a leaf package as one hop.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const module = "github.com/mcp-extproc/mcp-extproc/"

func main() {
	pkg := flag.String("pkg", "./pkg/processor", "the package of the test")
	test := flag.String("run", "TestPathOfOneToolsCall", "the test, which runs its exchange $MCP_EXTPROC_PATH_EXCHANGES times")
	base := flag.Int("base", 2, "exchanges of the first run (the first ones warm caches up)")
	added := flag.Int("added", 10, "exchanges the second run adds")
	maxProcessor := flag.Int("max-processor-files", 0, "fail when the path runs in more files of pkg/processor (0: no bound)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: pathcount [flags] [-- go test build flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*pkg, *test, *base, *added, *maxProcessor, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "pathcount:", err)
		os.Exit(1)
	}
}

// run runs test twice with coverage, with base and base+added exchanges,
// its build given buildFlags (those of the other test runs, so that their
// compiles are reused), and reports what every added exchange ran.
func run(pkg, test string, base, added, maxProcessor int, buildFlags []string) error {
	dir, err := os.MkdirTemp("", "pathcount")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var profiles [2]map[string]int
	for i, n := range []int{base, base + added} {
		out := filepath.Join(dir, strconv.Itoa(i)+".out")
		args := append([]string{"test"}, buildFlags...)
		args = append(args, "-count=1", "-run", "^"+test+"$", "-covermode=count",
			"-coverpkg="+module+"pkg/...", "-coverprofile="+out, pkg)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env = append(os.Environ(), "MCP_EXTPROC_PATH_EXCHANGES="+strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go test with %d exchanges: %w", n, err)
		}
		if profiles[i], err = readProfile(out); err != nil {
			return err
		}
	}
	ran := map[string][]int{} // file -> start lines of the blocks every exchange ran
	for block, n := range profiles[1] {
		if n-profiles[0][block] < added {
			continue
		}
		file, rest, _ := strings.Cut(block, ":")
		line, _, _ := strings.Cut(rest, ".")
		l, err := strconv.Atoi(line)
		if err != nil {
			return fmt.Errorf("block %q: %w", block, err)
		}
		file = strings.TrimPrefix(file, module)
		ran[file] = append(ran[file], l)
	}
	return report(ran, test, maxProcessor)
}

// readProfile reads a coverage profile: block -> count.
func readProfile(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		n, err := strconv.Atoi(line[i+1:])
		if err != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		j := strings.LastIndexByte(line[:i], ' ')
		counts[line[:j]] += n
	}
	return counts, sc.Err()
}

// group says where a file's code belongs in the exchange.
func group(file string) int {
	switch {
	case strings.HasPrefix(file, "pkg/processor/"):
		return 0
	case strings.HasPrefix(file, "pkg/executor/"), strings.HasPrefix(file, "pkg/pluginclient/"), strings.HasPrefix(file, "pkg/reconnect/"):
		return 2
	case strings.HasPrefix(file, "pkg/pluginserver/"):
		return 3
	}
	return 1
}

var groupNames = []string{
	"the processor (pkg/processor)",
	"packages the processor calls on the request path",
	"the plugin call behind processor.Hooks (executor, plugin client)",
	"the test's plugin server",
}

func report(ran map[string][]int, test string, maxProcessor int) error {
	files := make([]string, 0, len(ran))
	for f := range ran {
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b string) int {
		if ga, gb := group(a), group(b); ga != gb {
			return ga - gb
		}
		return strings.Compare(a, b)
	})
	counts := make([]int, len(groupNames))
	fmt.Printf("code every exchange of %s ran, by file:\n", test)
	last := -1
	for _, f := range files {
		g := group(f)
		if g != last {
			fmt.Printf("\n%s:\n", groupNames[g])
			last = g
		}
		funcs, err := functionsAt(f, ran[f])
		if err != nil {
			return err
		}
		counts[g]++
		fmt.Printf("  %-44s %s\n", f, strings.Join(funcs, " "))
	}
	fmt.Printf("\nfiles: %d in the processor and %d it calls into on the request path (%d in all); %d in the plugin call; %d in the plugin server\n",
		counts[0], counts[1], counts[0]+counts[1], counts[2], counts[3])
	if maxProcessor > 0 && counts[0] > maxProcessor {
		return fmt.Errorf("the path runs in %d files of pkg/processor, more than %d: fold what it only passes through into the file of its step, or move a question the configuration answers off the path (docs/architecture.md)",
			counts[0], maxProcessor)
	}
	return nil
}

// functionsAt names the functions of file that hold the given lines.
func functionsAt(file string, lines []int) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		from, to := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		for _, l := range lines {
			if l >= from && l <= to {
				seen[funcName(fd)] = true
				break
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
