package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"tradergate/cache/configerr"
	"tradergate/proxy/tlsedge"
)

// `tradergate check`: a configuration file judged as the edge judges it at
// start and on SIGHUP (Parse, then Validate), plus the files it names
// loaded as serving loads them, so that a reload is tried before it is
// sent. Nothing here decides what is valid: the problems are the values
// start-up would refuse with, each already naming its field and placed
// on its line.

// CheckReport is what Check found.
type CheckReport struct {
	// Problems, in file order; none when the file would load.
	Problems configerr.List
	// Env lists the environment variables the file names, as notes, in
	// the order of its sections, each as set or unset only: never a
	// value. A variable that is unset where it is needed is a problem
	// instead (of its field, from Validate), not a note.
	Env []EnvVar
	// Config is the loaded configuration when there is no problem, else
	// nil.
	Config *Config
}

// EnvVar is an environment variable a configuration names.
type EnvVar struct {
	Field string // the field naming it: "upstream.key_env"
	Name  string
	Set   bool
	// Line is the field's line, or its section's when the field is left
	// out (a default); 0: neither is in the file.
	Line int
}

// Check loads data as the edge does at start and on every reload, then the
// files it names: the certificate and key of server.tls mode files (an
// expired certificate is a problem, as at start), the CA roots of mode acme
// (server.tls.ca_roots_file), the session ticket keys of either mode;
// Validate itself loads redis.ca_file. getenv resolves the variables the
// file names; their values never reach the report.
func Check(data []byte, getenv func(string) string) CheckReport {
	var r CheckReport
	cfg, err := Parse(data)
	if err != nil {
		r.Problems.Append(err)
		return r
	}
	r.Problems.Append(cfg.Validate(getenv))
	tls := &cfg.Server.TLS
	if tls.Mode == tlsedge.ModeFiles && tls.CertFile != "" && tls.KeyFile != "" {
		r.Problems.Append(tlsedge.New(*tls, tlsedge.Options{}).ReloadCertificates())
	}
	if tls.Mode == tlsedge.ModeACME {
		_, err := tls.CARoots()
		r.Problems.Append(err)
		// Mode files reads the ticket keys with its certificates, above.
		_, err = tls.TicketKeys()
		r.Problems.Append(err)
	}
	place(cfg.doc, r.Problems)
	r.Problems.Sort()
	for _, v := range []EnvVar{
		{Field: "upstream.key_env", Name: cfg.Upstream.KeyEnv},
		{Field: "redis.password_env", Name: cfg.Redis.PasswordEnv},
		{Field: "admin.token_env", Name: cfg.Admin.TokenEnv},
		{Field: "native.key_env", Name: cfg.Native.KeyEnv},
	} {
		if v.Name == "" {
			continue
		}
		if v.Set = getenv(v.Name) != ""; !v.Set && r.problemAt(v.Field) {
			continue
		}
		v.Line, _ = position(cfg.doc, v.Field)
		r.Env = append(r.Env, v)
	}
	if len(r.Problems) == 0 {
		r.Config = cfg
	}
	return r
}

// problemAt reports whether a problem names the field at path.
func (r *CheckReport) problemAt(path string) bool {
	for _, p := range r.Problems {
		if p.Path == path {
			return true
		}
	}
	return false
}

// Write prints the report for the file called name, one line each,
// compiler style ("config.yaml:14:3: server.listen: ..."), so that an
// editor can jump to the line: the notes, then the problems; the last
// line says OK or how many problems.
func (r CheckReport) Write(w io.Writer, name string) error {
	var b strings.Builder
	for _, v := range r.Env {
		state := "unset"
		if v.Set {
			state = "set"
		}
		fmt.Fprintf(&b, "%s: note: %s: environment variable %s is %s\n", at(name, v.Line, 0), v.Field, v.Name, state)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "%s: %s\n", at(name, p.Line, p.Col), p.Detail())
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

// at is "name:line:col", with only the parts known.
func at(name string, line, col int) string {
	if line > 0 {
		name += ":" + strconv.Itoa(line)
		if col > 0 {
			name += ":" + strconv.Itoa(col)
		}
	}
	return name
}
