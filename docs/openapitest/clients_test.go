package openapitest_test

// Clients generated from the document a live edge serves, as teams moving
// off the legacy host generate theirs: ogen and oapi-codegen (Go) each
// build a client into a temporary module of its own, and a program run
// against the edge over its fasthttp front calls every /v1 operation
// (testdata/clients/*/main.go); openapi-typescript's types, used through
// openapi-fetch, are checked by tsc (testdata/clients/ts/use.ts). The
// generators are installed by .ci/run outside the module (ogen and
// oapi-codegen into $(go env GOPATH)/bin, the npm packages into the
// prefix Spectral and Prism share); where one is absent its test fails
// under CI and skips elsewhere. The generated clients' own modules are
// resolved through the module proxy into the temporary module, never
// into this repository's go.mod.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/legacysim"
)

// Versions of the generators' runtime modules the generated code needs:
// the ones of the generators .ci/run installs.
const (
	ogenModule    = "github.com/ogen-go/ogen v1.24.0"
	oapiRTModule  = "github.com/oapi-codegen/runtime v1.9.0"
	clientTimeout = 5 * time.Minute
)

// Wallets the legacy host answers with a failure for, whatever the
// request: a 404, and a 500 (which the edge passes on as 502 until the
// route's breaker opens).
const (
	notFoundWallet = "0x00000000000000000000000000000000000f0404"
	brokenWallet   = "0x00000000000000000000000000000000000f0500"
)

// goTool is the path of a Go program .ci/run installs with go install:
// on PATH, else in $(go env GOPATH)/bin.
func goTool(t *testing.T, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join(build.Default.GOPATH, "bin", name); fileExists(p) {
		return p
	}
	msg := fmt.Sprintf("%s not on PATH nor in $(go env GOPATH)/bin (.ci/run installs it: go install %s)", name, install)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// clientEdge is the outside tests' edge (legacy paths on), with a legacy
// host that fails every request naming notFoundWallet (404) or
// brokenWallet (500).
func clientEdge(t *testing.T) *edge {
	t.Helper()
	failing := func(status int) *legacysim.Sim {
		s := legacysim.New(legacysim.Config{Seed: 11, Key: legacyKey})
		s.SetFaults(legacysim.Faults{FailStatus: status})
		return s
	}
	notFound, broken := failing(404), failing(500)
	return newEdgeWrapped(t, "5s", legacyOn, func(sim http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch p := strings.ToLower(r.URL.Path); {
			case strings.Contains(p, notFoundWallet):
				notFound.ServeHTTP(w, r)
			case strings.Contains(p, brokenWallet):
				broken.ServeHTTP(w, r)
			default:
				sim.ServeHTTP(w, r)
			}
		})
	})
}

// servedDocument writes the document e serves at /v1/openapi.json into
// dir and returns its path and bytes.
func servedDocument(t *testing.T, e *edge, dir string) (string, []byte) {
	t.Helper()
	_, resp, body := e.do(t, http.MethodGet, "/v1/openapi.json", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/openapi.json: %d", resp.StatusCode)
	}
	p := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, body
}

// clientFixture is what the client programs read from TG_CLIENT_FIXTURE.
type clientFixture struct {
	URL, KeyAll, KeyTxOnly, KeyTiny                 string
	Token, ConditionID, Wallet, TradeTx, ComboTx    string
	Signer, NotFoundWallet, BrokenWallet, UnknownTx string
}

func fixtureOf(e *edge) clientFixture {
	m := e.sim.Markets()[0]
	signers := make([]string, 0, len(e.sim.Signers()))
	for s := range e.sim.Signers() {
		signers = append(signers, s)
	}
	sort.Strings(signers)
	return clientFixture{
		URL: e.url, KeyAll: keyAll, KeyTxOnly: keyTxOnly, KeyTiny: keyTiny,
		Token: m.Tokens[0], ConditionID: m.ConditionID, Wallet: e.sim.Wallets()[0],
		TradeTx: e.sim.TradeTxs()[0], ComboTx: e.sim.ComboTxs()[0], Signer: signers[0],
		NotFoundWallet: notFoundWallet, BrokenWallet: brokenWallet,
		UnknownTx: "0x" + strings.Repeat("ab", 32),
	}
}

// v1Operations is the operationId of every operation under /v1 in doc.
func v1Operations(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, item := range d.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for _, raw := range item {
			var op struct {
				OperationID string   `json:"operationId"`
				Tags        []string `json:"tags"`
			}
			// The streams' bodies do not end: the generated clients,
			// which read a body whole, leave them out (docs/CONTRACT.md#streams).
			if json.Unmarshal(raw, &op) == nil && op.OperationID != "" && !slices.Contains(op.Tags, "stream") {
				ops = append(ops, op.OperationID)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// run runs name with args in dir and fails t with its output, the
// document's locations in it named by their JSON path, when it fails.
func run(t *testing.T, doc []byte, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, excerptOf(out, 16<<10), locate(doc, out))
	}
	return out
}

// docLocation is how the generators name a place in the document:
// openapi.json:line:column.
var docLocation = regexp.MustCompile(`openapi\.json:(\d+):(\d+)`)

// locate names, for each openapi.json:line:column in out, the JSON path
// of the schema or value there.
func locate(doc, out []byte) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, m := range docLocation.FindAllSubmatch(out, 20) {
		if seen[string(m[0])] {
			continue
		}
		seen[string(m[0])] = true
		line, _ := strconv.Atoi(string(m[1]))
		col, _ := strconv.Atoi(string(m[2]))
		fmt.Fprintf(&b, "%s is %s\n", m[0], pathAt(doc, line, col))
	}
	if b.Len() > 0 {
		return "in the document:\n" + b.String()
	}
	return ""
}

// pathAt is the JSON path of the innermost member or element of doc whose
// text holds line:column (1-based).
func pathAt(doc []byte, line, col int) string {
	off := 0
	for l := 1; l < line && off < len(doc); l++ {
		i := bytes.IndexByte(doc[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	off += col - 1
	best := "$"
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func(path string) bool
	walk = func(path string) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return true
		}
		for i := 0; dec.More(); i++ {
			start := dec.InputOffset()
			child := fmt.Sprintf("%s[%d]", path, i)
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				child = path + "." + fmt.Sprint(k)
			}
			if start > int64(off) {
				return false
			}
			best = child
			if !walk(child) {
				return false
			}
		}
		_, err = dec.Token()
		return err == nil
	}
	walk("$")
	return best
}

// runClient builds the Go program in dir and runs it against e: every
// case must pass and every /v1 operation must have been answered.
func runClient(t *testing.T, e *edge, doc []byte, dir string) {
	t.Helper()
	env := []string{"GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
	run(t, doc, dir, env, "go", "build", "-o", "client", ".")
	fx, err := json.Marshal(fixtureOf(e))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "client"))
	cmd.Env = append(os.Environ(), "TG_CLIENT_FIXTURE="+string(fx))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	passed, done := 0, false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "op "):
			answered[strings.TrimPrefix(line, "op ")] = true
		case strings.HasPrefix(line, "ok "):
			passed++
		case strings.HasPrefix(line, "done"):
			done = true
		default:
			t.Error(line)
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil && !t.Failed() {
		t.Errorf("client: %v\n%s", err, stderr.Bytes())
	}
	if !done {
		t.Errorf("the client stopped before its end:\n%s", stderr.Bytes())
	}
	var missing []string
	for _, op := range v1Operations(t, doc) {
		if !answered[op] {
			missing = append(missing, op)
		}
	}
	if len(missing) > 0 {
		t.Errorf("operations never answered as documented: %s", strings.Join(missing, ", "))
	}
	t.Logf("%d cases passed; %d of the document's /v1 operations answered", passed, len(answered))
}

// newClientModule makes a module named module in a new directory, with
// the program testdata/clients/<program>/main.go and a go.mod requiring
// require, and returns the directory.
func newClientModule(t *testing.T, module, program, require string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "clients", program, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := strings.TrimPrefix(runtime.Version(), "go")
	mod := fmt.Sprintf("module %s\n\ngo %s\n\nrequire %s\n", module, goVersion, require)
	for name, b := range map[string][]byte{"main.go": src, "go.mod": []byte(mod)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestOgenClient generates the /v1 client with ogen (every feature the
// document needs, discriminators included; only the client side and the
// /v1 paths, to keep the build small, but the streams, whose bodies do
// not end: every /v1 path not ending in /stream, which RE2, without
// lookahead, says as an alternation), builds it and runs it: ogen
// decodes each answer's body and headers and validates both against the
// document, so a single answer out of the document fails the run.
func TestOgenClient(t *testing.T) {
	ogen := goTool(t, "ogen", "github.com/ogen-go/ogen/cmd/ogen@"+strings.Fields(ogenModule)[1])
	e := clientEdge(t)
	dir := newClientModule(t, "ogenclient", "ogen", ogenModule)
	specPath, doc := servedDocument(t, e, dir)
	cfg := `generator:
  features:
    disable_all: true
    enable: [paths/client]
  filters:
    path_regex: "^/v1/.*([^m]|[^a]m|[^e]am|[^r]eam|[^t]ream|[^s]tream|[^/]stream)$"
`
	if err := os.WriteFile(filepath.Join(dir, "ogen.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, doc, dir, nil, ogen, "-config", "ogen.yml", "-target", "api", "-package", "api", "-clean", specPath)
	runClient(t, e, doc, dir)
}

// TestOapiCodegenClient generates models and client with oapi-codegen,
// the legacy operations included (they must compile too), builds it and
// runs it against the edge.
func TestOapiCodegenClient(t *testing.T) {
	gen := goTool(t, "oapi-codegen", "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2")
	e := clientEdge(t)
	dir := newClientModule(t, "oapiclient", "oapi", oapiRTModule)
	specPath, doc := servedDocument(t, e, dir)
	cfg := "package: api\ngenerate:\n  client: true\n  models: true\noutput: api/api.gen.go\noutput-options:\n  exclude-tags: [stream]\n"
	if err := os.MkdirAll(filepath.Join(dir, "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oapi.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, doc, dir, nil, gen, "-config", "oapi.yml", specPath)
	runClient(t, e, doc, dir)
}

// TestOpenAPITypeScriptTypes generates TypeScript types with
// openapi-typescript and checks with tsc that testdata/clients/ts/use.ts,
// which reads every answer through openapi-fetch, still compiles.
func TestOpenAPITypeScriptTypes(t *testing.T) {
	gen := npmTool(t, "openapi-typescript")
	tsc := npmTool(t, "tsc")
	// openapi-fetch is a library: found beside the tools, in the prefix's
	// node_modules.
	modules := filepath.Dir(filepath.Dir(gen))
	if !fileExists(filepath.Join(modules, "openapi-fetch", "package.json")) {
		msg := "openapi-fetch not installed beside openapi-typescript in " + modules
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	e := newEdgeWith(t, "5s", legacyOn)
	dir := t.TempDir()
	specPath, doc := servedDocument(t, e, dir)
	src, err := os.ReadFile(filepath.Join("testdata", "clients", "ts", "use.ts"))
	if err != nil {
		t.Fatal(err)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "esnext",
  "moduleResolution": "bundler", "skipLibCheck": true, "lib": ["es2022", "dom"]}, "files": ["use.ts"]}`
	for name, b := range map[string][]byte{"use.ts": src, "tsconfig.json": []byte(tsconfig)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run(t, doc, dir, nil, gen, specPath, "-o", "api.d.ts")
	run(t, doc, dir, nil, tsc, "-p", ".", "--noEmit")
}

// TestLocate: a generator's openapi.json:line:column is named by the JSON
// path of what stands there, the innermost member holding it.
func TestLocate(t *testing.T) {
	doc := []byte(`{
  "components": {
    "schemas": {
      "A": {
        "type": "object",
        "properties": {
          "m": {
            "const": "OK"
          }
        }
      },
      "B": [
        1,
        {"x": 2}
      ]
    }
  }
}
`)
	for _, c := range []struct {
		line, col int
		want      string
	}{
		{7, 11, "$.components.schemas.A.properties.m"},
		{8, 13, "$.components.schemas.A.properties.m.const"},
		{5, 9, "$.components.schemas.A.type"},
		{14, 9, "$.components.schemas.B[1]"},
		{14, 15, "$.components.schemas.B[1].x"},
	} {
		if got := pathAt(doc, c.line, c.col); got != c.want {
			t.Errorf("%d:%d: %s, want %s", c.line, c.col, got, c.want)
		}
	}
	out := locate(doc, []byte(`error at openapi.json:8:13: "const" without a type`))
	if !strings.Contains(out, "openapi.json:8:13 is $.components.schemas.A.properties.m.const") {
		t.Errorf("locate: %q", out)
	}
}
