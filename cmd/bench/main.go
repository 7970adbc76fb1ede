// Command bench measures mcp-extproc against two baseline ext_proc servers
// (one that asks for nothing, one that asks for the same bodies) and against
// the plugins' own time, and prints the ratio tables with the ext_proc
// message count of each target (see docs/benchmarks.md). It is what `make bench` runs:
//
//	go run ./cmd/bench [-only passthrough,replicas] [-markdown] [-quick]
//	                   [-cpuprofile cpu.out] [-memprofile mem.out]
//
// Everything runs in this process on loopback: the sidecar (the production
// wiring of internal/sidecar), the baseline server, the plugin servers and
// the lean Envoy driver of internal/bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if os.Getenv(bench.ChildEnv) != "" {
		// A target of the cpu scenario, in a process of its own.
		if err := bench.ServeChild(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "", "comma-separated scenarios to run (default all: "+strings.Join(bench.Scenarios(), ",")+")")
	markdown := fs.Bool("markdown", false, "print Markdown tables (for docs/benchmarks.md) instead of plain text")
	quick := fs.Bool("quick", false, "a handful of operations per scenario: checks the harness, measures nothing")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the whole run to this file")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long (a whole make bench takes about 12 minutes on 2 cores)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts := bench.Options{Quick: *quick}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	if !*quiet {
		opts.Progress = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 4096 // finer than the default 512 KiB: small allocations matter here
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	host, _ := os.Hostname()
	fmt.Fprintf(stdout, "mcp-extproc bench: %s, GOMAXPROCS %d, NumCPU %d, %s/%s, host %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, host)
	rep, err := bench.Run(ctx, opts)
	if rep != nil {
		write := rep.WriteText
		if *markdown {
			write = rep.WriteMarkdown
		}
		if werr := write(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	fmt.Fprintf(stdout, "\ntotal time %s\n", time.Since(start).Round(time.Second))
	if *memProfile != "" {
		if perr := writeHeapProfile(*memProfile); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
