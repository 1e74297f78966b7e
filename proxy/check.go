package proxy

import (
	"cmp"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"tradergate/proxy/tlsedge"
)

// `tradergate check`: a configuration file judged as the edge judges it at
// start and on SIGHUP (ParseConfig, then Validate), plus the files it names
// loaded as serving loads them, so that a reload is tried before it is
// sent. Nothing here decides what is valid: the problems are the ones
// start-up would refuse, split one per line and placed on their line.

// CheckReport is what Check found.
type CheckReport struct {
	// Problems, one per field at fault; none when the file would load.
	Problems []Problem
	// Env lists the environment variables the file names, in the order of
	// its sections, each as set or unset only: never a value.
	Env []EnvVar
	// Config is the loaded configuration when there is no problem, else
	// nil.
	Config *Config
}

// Problem is one thing start-up would refuse.
type Problem struct {
	// Line is the line of the field in the file, or of the nearest section
	// that holds it when the field is left out; 0: none (the file as a
	// whole).
	Line int
	// Field is the field's path ("keys[1].sha256"); "": the file as a
	// whole (a YAML syntax error).
	Field string
	// Message says what is wrong, without the field's path.
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// EnvVar is an environment variable a configuration names.
type EnvVar struct {
	Field string // the field naming it: "upstream.key_env"
	Name  string
	Set   bool
}

// Check loads data as the edge does at start and on every reload, then the
// files it names: the certificate and key of server.tls mode files (an
// expired certificate is a problem, as at start), the CA roots of mode acme
// (server.tls.ca_roots_file), the session ticket keys of either mode;
// Validate itself loads redis.ca_file. getenv
// resolves the variables the file names; their values never reach the
// report.
func Check(data []byte, getenv func(string) string) CheckReport {
	var r CheckReport
	cfg, err := ParseConfig(data)
	if err != nil {
		r.Problems = byLine(problemsOf(err, data))
		return r
	}
	for _, v := range []EnvVar{
		{Field: "upstream.key_env", Name: cfg.Upstream.KeyEnv},
		{Field: "redis.password_env", Name: cfg.Redis.PasswordEnv},
		{Field: "admin.token_env", Name: cfg.Admin.TokenEnv},
	} {
		if v.Name != "" {
			v.Set = getenv(v.Name) != ""
			r.Env = append(r.Env, v)
		}
	}
	if err := cfg.Validate(getenv); err != nil {
		r.Problems = problemsOf(err, data)
	}
	tls := &cfg.Server.TLS
	if tls.Mode == tlsedge.ModeFiles && tls.CertFile != "" && tls.KeyFile != "" {
		if err := tlsedge.New(*tls, tlsedge.Options{}).ReloadCertificates(); err != nil {
			r.Problems = append(r.Problems, problemsOf(err, data)...)
		}
	}
	if tls.Mode == tlsedge.ModeACME {
		if _, err := tls.CARoots(); err != nil {
			r.Problems = append(r.Problems, problemsOf(err, data)...)
		}
		// Mode files reads the ticket keys with its certificates, above.
		if _, err := tls.TicketKeys(); err != nil {
			r.Problems = append(r.Problems, problemsOf(err, data)...)
		}
	}
	if len(r.Problems) == 0 {
		r.Config = cfg
	}
	r.Problems = byLine(r.Problems)
	return r
}

// byLine puts problems in file order, as an editor walks them.
func byLine(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
	return ps
}

// Write prints the report for the file called name, one line each,
// compiler style ("config.yaml:14: server.listen: ..."), so that an editor
// can jump to the line; the last line says OK or how many problems.
func (r CheckReport) Write(w io.Writer, name string) error {
	var b strings.Builder
	for _, v := range r.Env {
		state := "unset"
		if v.Set {
			state = "set"
		}
		fmt.Fprintf(&b, "%s: environment variable %s (%s) is %s\n", name, v.Name, v.Field, state)
	}
	for _, p := range r.Problems {
		at := name
		if p.Line > 0 {
			at += ":" + strconv.Itoa(p.Line)
		}
		q := p
		q.Line = 0
		fmt.Fprintf(&b, "%s: %s\n", at, q)
	}
	switch n := len(r.Problems); n {
	case 0:
		fmt.Fprintf(&b, "%s: OK\n", name)
	case 1:
		fmt.Fprintf(&b, "%s: 1 problem\n", name)
	default:
		fmt.Fprintf(&b, "%s: %d problems\n", name, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sections are the top-level keys of the file, the first step of every
// field path.
var sections = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			m[tag] = true
		}
	}
	return m
}()

var (
	// lineRe is the line prefix of decoder errors: "line 7: " and
	// yaml.v3's "yaml: line 7: ".
	lineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	// fieldRe is a field path at the start of a message, ended by ": " or,
	// before a file name, by a space.
	fieldRe = regexp.MustCompile(`^([a-z_]+(?:\[\d+\]|\.[A-Za-z0-9_-]+)*)(: | )`)
)

// problemsOf splits an error of ParseConfig, Validate or a file load into
// its problems. They arrive joined by "; ", and a message may itself hold
// "; ", so a piece starts a new problem only when it begins with a line or
// a field path of the file.
func problemsOf(err error, data []byte) []Problem {
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // a file that does not parse has no lines to find
	var out []Problem
	for piece := range strings.SplitSeq(err.Error(), "; ") {
		p, ok := parseProblem(piece)
		if !ok && len(out) > 0 {
			out[len(out)-1].Message += "; " + piece
			continue
		}
		if p.Line == 0 && p.Field != "" {
			p.Line = lineOf(&root, p.Field)
		}
		out = append(out, p)
	}
	return out
}

// parseProblem reads "[line N: ][field: ]message"; ok reports whether the
// piece began with a line or a field.
func parseProblem(s string) (p Problem, ok bool) {
	if m := lineRe.FindStringSubmatch(s); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		s, ok = s[len(m[0]):], true
	}
	// A field of a known section; after a line, any field the decoder
	// named (an unknown top-level one).
	if m := fieldRe.FindStringSubmatch(s); m != nil && (sections[strings.FieldsFunc(m[1], isPathSep)[0]] || ok && m[2] == ": ") {
		p.Field, ok = m[1], true
		s = s[len(m[0]):]
	}
	p.Message = s
	return p, ok
}

func isPathSep(r rune) bool { return r == '.' || r == '[' }

// lineOf is the line of the field at path ("keys[1].sha256") in the
// document under root, or of the deepest mapping key or item on the way
// to it when the field is left out; 0 when not even its section is there.
func lineOf(root *yaml.Node, path string) int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return 0
	}
	n, line := root.Content[0], 0
	for _, step := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == step {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}
