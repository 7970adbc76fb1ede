package deploytest

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The images the Dockerfile must build: target → ports it must EXPOSE.
var dockerTargets = map[string][]int{
	"extproc":        {50052, 9090},
	"example-plugin": {8000, 50051}, // 50051: cpex gRPC (--grpc-addr)
	"mcp-echo":       {3000},
}

// runtimeBase is the base of every runtime image.
const runtimeBase = "gcr.io/distroless/static-debian12:nonroot"

// buildScript is the one place that holds the build command.
const buildScript = "hack/build.sh"

// canonicalBuild is the build command of the project, as normalizeBuild
// writes it ({} stands for any variable: the binary's name, the output
// directory, the package, version and commit stamped by -X).
var canonicalBuild = []string{"CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags=-s -w -X {}.version={} -X {}.commit={}", "-o", "{}", "./cmd/{}"}

type dockerInstr struct {
	cmd  string // upper case
	args string
	line int
}

type dockerStage struct {
	name, base string
	line       int
	instrs     []dockerInstr
}

// parseDockerfile splits a Dockerfile into stages of instructions, joining
// continuation lines and dropping comments.
func parseDockerfile(data []byte) ([]*dockerStage, error) {
	var stages []*dockerStage
	sc := bufio.NewScanner(bytes.NewReader(data))
	var buf strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if buf.Len() == 0 {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			start = n
		} else if strings.HasPrefix(line, "#") {
			continue // comment inside a continued instruction
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			buf.WriteString(cont)
			buf.WriteByte(' ')
			continue
		}
		buf.WriteString(line)
		text := buf.String()
		buf.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := dockerInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			words := strings.Fields(in.args)
			words = slices.DeleteFunc(words, func(w string) bool { return strings.HasPrefix(w, "--") })
			st := &dockerStage{line: start}
			switch {
			case len(words) == 1:
				st.base = words[0]
			case len(words) == 3 && strings.EqualFold(words[1], "AS"):
				st.base, st.name = words[0], words[2]
			default:
				return nil, fmt.Errorf("line %d: cannot parse FROM %s", start, in.args)
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				return nil, fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
			}
			continue
		}
		st := stages[len(stages)-1]
		st.instrs = append(st.instrs, in)
	}
	if buf.Len() > 0 {
		return nil, fmt.Errorf("unterminated continuation at line %d", start)
	}
	return stages, sc.Err()
}

// shellWords splits a shell command into words, removing quotes; variables
// are left as written.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					w.WriteByte(s[j])
					continue
				}
				w.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			i = j
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// varRef matches a shell or make variable reference.
var varRef = regexp.MustCompile(`\$\$?(\([A-Za-z_@*<][A-Za-z0-9_]*\)|\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*|[@*<])`)

// normalizeBuild turns the `go build` segment of a command line into words
// comparable across make and sh: quotes removed, every variable reference
// written {}, and the -o argument reduced to its last element.
func normalizeBuild(cmdline string) ([]string, error) {
	words, err := shellWords(cmdline)
	if err != nil {
		return nil, err
	}
	for i, w := range words {
		words[i] = varRef.ReplaceAllString(w, "{}")
	}
	for i := range words {
		if words[i] == "-o" && i+1 < len(words) {
			words[i+1] = path.Base(words[i+1])
		}
	}
	return words, nil
}

// shellSeparator splits a command line into commands.
var shellSeparator = regexp.MustCompile(`&&|\|\||;`)

// buildSegments returns the shell segments (split at && ; ||) of text that
// run `go build` on ./cmd/, one per command.
func buildSegments(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || !strings.Contains(line, "go build") {
			continue
		}
		line = strings.TrimLeft(line, "@-+")
		for _, seg := range shellSeparator.Split(line, -1) {
			seg = strings.TrimSpace(seg)
			if strings.Contains(seg, "go build") && strings.Contains(seg, "./cmd/") {
				out = append(out, seg)
			}
		}
	}
	return out
}

// checkBuildCommand checks that hack/build.sh holds the canonical build
// command, and that the Makefile (and mk/*.mk) either call the script or
// run exactly the same command.
func checkBuildCommand(s snapshot) []error {
	var p problems
	script := s.file(buildScript)
	if script == nil {
		return []error{fmt.Errorf("%s is missing", buildScript)}
	}
	segs := buildSegments(string(script))
	if len(segs) != 1 {
		p.addf("%s: want exactly one `go build ./cmd/...` command, found %d", buildScript, len(segs))
		return p.errs
	}
	ref, err := normalizeBuild(segs[0])
	if err != nil {
		p.addf("%s: %v", buildScript, err)
		return p.errs
	}
	if !slices.Equal(ref, canonicalBuild) {
		p.addf("%s: build command %q differs from the project's %q", buildScript, ref, canonicalBuild)
	}
	mk := s.file("Makefile")
	if mk == nil {
		p.addf("Makefile is missing: it must build with %s (or the identical command)", buildScript)
		return p.errs
	}
	makefiles := []string{"Makefile"}
	for name := range s.files {
		if strings.HasPrefix(name, "mk/") && strings.HasSuffix(name, ".mk") {
			makefiles = append(makefiles, name)
		}
	}
	slices.Sort(makefiles)
	usesScript := false
	for _, name := range makefiles {
		text := string(s.file(name))
		usesScript = usesScript || strings.Contains(text, buildScript)
		for _, seg := range buildSegments(text) {
			words, err := normalizeBuild(seg)
			if err != nil {
				p.addf("%s: %v", name, err)
				continue
			}
			usesScript = true
			if !slices.Equal(words, ref) {
				p.addf("%s: build command %q differs from %s's %q: keep one source of truth", name, words, buildScript, ref)
			}
		}
	}
	if !usesScript {
		p.addf("Makefile: builds no binary with %s nor with the same go build command", buildScript)
	}
	return p.errs
}

// checkDockerfile checks the stages, the build command, the runtime images
// and the .dockerignore allow-list.
func checkDockerfile(s snapshot) []error {
	var p problems
	data := s.file("Dockerfile")
	if data == nil {
		return []error{fmt.Errorf("Dockerfile is missing")}
	}
	stages, err := parseDockerfile(data)
	if err != nil {
		return []error{fmt.Errorf("Dockerfile: %w", err)}
	}
	byName := map[string]*dockerStage{}
	for _, st := range stages {
		if st.name != "" {
			byName[st.name] = st
		}
	}
	// builds maps a stage to the binaries its RUNs build with the script.
	builds := map[string][]string{}
	scriptRun := regexp.MustCompile(`(?:^|[\s;&|])(?:sh\s+|\./)?` + regexp.QuoteMeta(buildScript) + `\s+(\S+)\s+(\S+)`)
	ignore := parseDockerignore(s.file(".dockerignore"))
	for _, st := range stages {
		for _, in := range st.instrs {
			switch in.cmd {
			case "RUN":
				if strings.Contains(in.args, "go build") {
					p.addf("Dockerfile:%d: runs go build directly; call %s (one source of truth with the Makefile)", in.line, buildScript)
				}
				for _, m := range scriptRun.FindAllStringSubmatch(in.args, -1) {
					builds[st.name] = append(builds[st.name], m[1]+" "+m[2])
				}
			case "COPY", "ADD":
				if strings.Contains(in.args, "--from=") {
					continue
				}
				words := strings.Fields(in.args)
				words = slices.DeleteFunc(words, func(w string) bool { return strings.HasPrefix(w, "--") })
				if len(words) < 2 {
					continue
				}
				for _, src := range words[:len(words)-1] {
					probe := strings.TrimPrefix(path.Clean(src), "./")
					if strings.HasSuffix(src, "/") {
						probe += "/x/main.go"
					}
					if ignore.excluded(probe) {
						p.addf("Dockerfile:%d: COPY %s, but .dockerignore excludes it from the build context", in.line, src)
					}
				}
			}
		}
	}
	for target, ports := range dockerTargets {
		st := byName[target]
		if st == nil {
			p.addf("Dockerfile: no stage %q (docker build --target %s)", target, target)
			continue
		}
		where := fmt.Sprintf("Dockerfile:%d: stage %s", st.line, target)
		if st.base != runtimeBase {
			p.addf("%s: FROM %s, want %s", where, st.base, runtimeBase)
		}
		var exposed []int
		user, entry, labels := "", "", ""
		var copied []string
		for _, in := range st.instrs {
			switch in.cmd {
			case "LABEL":
				labels += " " + in.args
			case "EXPOSE":
				for _, f := range strings.Fields(in.args) {
					n, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
					if err != nil {
						p.addf("%s: EXPOSE %s: %v", where, f, err)
					}
					exposed = append(exposed, n)
				}
			case "USER":
				user = in.args
			case "ENTRYPOINT":
				entry = in.args
			case "COPY":
				m := regexp.MustCompile(`--from=(\S+)\s+(\S+)`).FindStringSubmatch(in.args)
				if m == nil {
					p.addf("%s: COPY %s: a runtime image takes only the binary from a build stage", where, in.args)
					continue
				}
				for _, b := range builds[m[1]] {
					name, out, _ := strings.Cut(b, " ")
					if path.Join(out, name) == m[2] && name == target {
						copied = append(copied, name)
					}
				}
			case "RUN":
				p.addf("%s: RUN in a runtime image (it has no shell)", where)
			}
		}
		for _, port := range ports {
			if !slices.Contains(exposed, port) {
				p.addf("%s: does not EXPOSE %d", where, port)
			}
		}
		if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
			p.addf("%s: USER %q: run as a non-root user (65532)", where, user)
		}
		if !strings.HasPrefix(entry, "[") {
			p.addf("%s: ENTRYPOINT must be in exec form (the image has no shell)", where)
		}
		if len(copied) == 0 {
			p.addf("%s: does not copy ./cmd/%s built by %s", where, target, buildScript)
		}
		p.errs = append(p.errs, checkOCILabels(where, labels)...)
		if !slices.Contains(s.cmds, target) {
			p.addf("%s: cmd/%s does not exist", where, target)
		}
	}
	return p.errs
}

// ociLabels are the OCI image annotations every image carries; true: the
// value must come from a build argument (stamped by make image), not be
// written into the Dockerfile.
var ociLabels = map[string]bool{
	"org.opencontainers.image.version":  true,
	"org.opencontainers.image.revision": true,
	"org.opencontainers.image.source":   false,
	"org.opencontainers.image.licenses": false,
}

// checkOCILabels checks the LABEL arguments of one runtime stage.
func checkOCILabels(where, labels string) []error {
	var p problems
	for key, stamped := range ociLabels {
		m := regexp.MustCompile(regexp.QuoteMeta(key) + `=("[^"]*"|\S+)`).FindStringSubmatch(labels)
		switch {
		case m == nil:
			p.addf("%s: no LABEL %s", where, key)
		case stamped && !strings.Contains(m[1], "${"):
			p.addf("%s: LABEL %s=%s is not stamped from a build argument", where, key, m[1])
		}
	}
	return p.errs
}

// dockerignore is a parsed .dockerignore: the last matching pattern wins.
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(data []byte) dockerignore {
	var out dockerignore
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		pat := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(line, "!")), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(pat); i++ {
			switch c := pat[i]; {
			case strings.HasPrefix(pat[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(pat[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		out = append(out, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), neg})
	}
	return out
}

// excluded reports whether a file is left out of the build context: a
// pattern matches the file or one of its parent directories.
func (d dockerignore) excluded(file string) bool {
	ex := false
	for _, pat := range d {
		for p := file; p != "." && p != "/" && p != ""; p = path.Dir(p) {
			if pat.re.MatchString(p) {
				ex = !pat.negate
				break
			}
		}
	}
	return ex
}
