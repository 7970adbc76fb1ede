package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Table is one block of a report.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Check is one ratio held against the target.
type Check struct {
	Name   string
	Ratio  float64
	Target float64
}

// OK reports whether the ratio meets the target.
func (c Check) OK() bool { return c.Ratio <= c.Target }

// Report is what [Run] measured.
type Report struct {
	Tables []Table
	Checks []Check
}

// WriteText prints the report as aligned plain text.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Tables {
		fmt.Fprintf(tw, "\n== %s\n", t.Title)
		fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
		for _, row := range t.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, n := range t.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(r.Checks) > 0 {
		fmt.Fprintf(tw, "\n== Targets (ratio sidecar / baseline, median of the rounds)\n")
		for _, c := range r.Checks {
			verdict := "MET"
			if !c.OK() {
				verdict = "MISSED"
			}
			fmt.Fprintf(tw, "%s\t%.3f\t<= %.2f\t%s\n", c.Name, c.Ratio, c.Target, verdict)
		}
	}
	return tw.Flush()
}

// WriteMarkdown prints the report as Markdown tables (for docs/benchmarks.md).
func (r *Report) WriteMarkdown(w io.Writer) error {
	for _, t := range r.Tables {
		fmt.Fprintf(w, "\n#### %s\n\n", t.Title)
		fmt.Fprintf(w, "| %s |\n", strings.Join(t.Header, " | "))
		fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(t.Header)))
		for _, row := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
		if len(t.Notes) > 0 {
			fmt.Fprintln(w)
			for _, n := range t.Notes {
				fmt.Fprintf(w, "- %s\n", n)
			}
		}
	}
	if len(r.Checks) > 0 {
		fmt.Fprintf(w, "\n#### Targets\n\n| figure | ratio | target | |\n|---|---|---|---|\n")
		for _, c := range r.Checks {
			verdict := "met"
			if !c.OK() {
				verdict = "**missed**"
			}
			fmt.Fprintf(w, "| %s | %.3f | ≤ %.2f | %s |\n", c.Name, c.Ratio, c.Target, verdict)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// dur formats a latency: µs below 10 ms, ms above.
func dur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	default:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
}

// signedDur formats a difference of latencies.
func signedDur(d time.Duration) string {
	if d < 0 {
		return "-" + dur(-d)
	}
	return "+" + dur(d)
}

func ratio(v float64) string { return fmt.Sprintf("%.3f", v) }

func rate(v float64) string { return fmt.Sprintf("%.0f/s", v) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func count(v float64) string { return fmt.Sprintf("%.0f", v) }
