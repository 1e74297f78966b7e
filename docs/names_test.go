package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// notCode lists the words in code spans of ARCHITECTURE.md that name no
// file, function, type or configuration key of the repository: contract
// values, protocol names and the like. A word missing from both this list
// and the code fails the test, so a renamed function cannot stay in the
// walk by accident.
var notCode = map[string]bool{
	"to": true, "toTimestamp": true, "toBlock": true, // the contract's bounds
	"h2": true, "http/1.1": true, // ALPN protocol ids
	"MSG_MORE": true, "sendfile": true, // Linux
	"78.0": true, "0.78": true, "5": true, "0.05": true,
	"/open-api": true, "-tags poison": true,
	"GOAWAY": true, "ENHANCE_YOUR_CALM": true, "PROTOCOL_ERROR": true,
	"PING": true, "SETTINGS": true, "RST_STREAM": true, "HEADERS": true,
	"CONTINUATION": true, "WINDOW_UPDATE": true, "DATA": true, "PRIORITY": true,
	"END_STREAM": true, "INITIAL_WINDOW_SIZE": true,
}

// stdPackages are standard library packages the page names.
var stdPackages = map[string]bool{
	"sync": true, "http": true, "net": true, "tls": true, "context": true,
	"time": true, "runtime": true, "debug": true, "slog": true, "io": true,
	"os": true, "errors": true, "bytes": true, "strings": true,
}

// TestArchitectureNamesExist reads docs/ARCHITECTURE.md and fails for every
// file, directory, package, function, method, type, field or configuration
// key it names in a code span (or as a step of its request chart) that the
// repository does not have. The page is a newcomer's map; a map that names
// what is not there sends them looking for nothing.
func TestArchitectureNamesExist(t *testing.T) {
	page, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	repo := indexRepo(t, "..")
	var bad []string
	for _, name := range namesOn(string(page)) {
		if why := repo.missing(name); why != "" {
			bad = append(bad, "`"+name+"`: "+why)
		}
	}
	// The request chart names a file and the step it holds:
	// "-> auth.go      authenticate: ...".
	step := regexp.MustCompile(`(?m)(?:->|or)\s+(\S+\.go)\s+(\w+)[:( ]`)
	for _, m := range step.FindAllStringSubmatch(string(page), -1) {
		file, fn := m[1], m[2]
		if !repo.declaredIn(file, fn) {
			bad = append(bad, "chart: "+fn+" is not declared in "+file)
		}
	}
	// Every step of Server.serve is on the chart, with the file its
	// comment names, and is declared there.
	src, err := os.ReadFile("../proxy/server.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	if i := strings.Index(body, "func (s *Server) serve("); i >= 0 {
		body = body[i:]
		body = body[:strings.Index(body, "\n}\n")]
	} else {
		t.Fatal("proxy/server.go has no Server.serve")
	}
	call := regexp.MustCompile(`(?m)(\w+)\(x\)\)?\s*(?:\{\s*)?// (\w+\.go):`)
	steps := call.FindAllStringSubmatch(body, -1)
	if len(steps) < 10 {
		t.Fatalf("found %d steps in Server.serve; the pattern no longer reads it", len(steps))
	}
	for _, m := range steps {
		fn, file := m[1], m[2]
		if !repo.declaredIn("proxy/"+file, fn) {
			bad = append(bad, "Server.serve: "+fn+" is not declared in proxy/"+file+" as its comment says")
		}
		if !regexp.MustCompile(`(?:->|or)\s+` + regexp.QuoteMeta(file) + `\s+` + fn + `\b`).MatchString(string(page)) {
			bad = append(bad, "chart: the step "+fn+" ("+file+") of Server.serve is missing")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// namesOn returns the code spans of a Markdown page (inline spans, and the
// .go files named in its fenced blocks), each once.
func namesOn(page string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	goFile := regexp.MustCompile(`[\w/]+\.go\b`)
	var prose strings.Builder
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			for _, f := range goFile.FindAllString(line, -1) {
				add(f)
			}
			continue
		}
		prose.WriteString(line)
		prose.WriteByte('\n')
	}
	span := regexp.MustCompile("`([^`\n]+)`")
	for _, m := range span.FindAllStringSubmatch(prose.String(), -1) {
		add(m[1])
	}
	return out
}

// repoIndex is what the repository declares, read with go/parser.
type repoIndex struct {
	root       string
	files      map[string]bool            // slash paths of .go files
	bases      map[string]bool            // their base names
	dirs       map[string]bool            // directories holding Go files
	pkgDecls   map[string]map[string]bool // package name -> top-level names
	members    map[string]map[string]bool // type name -> methods and fields
	anyName    map[string]bool            // every declared name, anywhere
	fileDecl   map[string]map[string]bool // base and slash path -> names declared in it
	yamlKeys   map[string]bool            // every yaml tag of a struct field
	pkgMethods map[string]map[string]bool // package name -> its methods' names
	modules    []string                   // go.mod's required module paths
}

func indexRepo(t *testing.T, root string) *repoIndex {
	t.Helper()
	r := &repoIndex{
		root: root, files: map[string]bool{}, bases: map[string]bool{},
		dirs: map[string]bool{}, pkgDecls: map[string]map[string]bool{},
		members: map[string]map[string]bool{}, anyName: map[string]bool{},
		fileDecl: map[string]map[string]bool{}, yamlKeys: map[string]bool{},
		pkgMethods: map[string]map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		r.files[rel] = true
		r.bases[name] = true
		r.dirs[filepath.ToSlash(filepath.Dir(rel))] = true
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		r.collect(rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) >= 2 && strings.Contains(fields[0], ".") {
			r.modules = append(r.modules, fields[0])
		}
	}
	return r
}

func (r *repoIndex) collect(rel string, f *ast.File) {
	pkg := f.Name.Name
	if r.pkgDecls[pkg] == nil {
		r.pkgDecls[pkg] = map[string]bool{}
	}
	inFile := map[string]bool{}
	r.fileDecl[rel] = inFile
	base := filepath.Base(rel)
	if r.fileDecl[base] == nil {
		r.fileDecl[base] = map[string]bool{}
	}
	declare := func(name string, top bool) {
		r.anyName[name] = true
		inFile[name] = true
		r.fileDecl[base][name] = true
		if top {
			r.pkgDecls[pkg][name] = true
		}
	}
	member := func(typ, name string) {
		if r.members[typ] == nil {
			r.members[typ] = map[string]bool{}
		}
		r.members[typ][name] = true
		r.anyName[name] = true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declare(d.Name.Name, true)
				continue
			}
			declare(d.Name.Name, false)
			if r.pkgMethods[pkg] == nil {
				r.pkgMethods[pkg] = map[string]bool{}
			}
			r.pkgMethods[pkg][d.Name.Name] = true
			member(recvType(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					declare(s.Name.Name, true)
					r.typeMembers(s.Name.Name, s.Type, member)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declare(n.Name, true)
					}
				}
			}
		}
	}
	// Struct fields declared anywhere carry yaml tags: the configuration keys.
	ast.Inspect(f, func(n ast.Node) bool {
		if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
			tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`"))
			if y, ok := tag.Lookup("yaml"); ok {
				if k := strings.Split(y, ",")[0]; k != "" && k != "-" {
					r.yamlKeys[k] = true
				}
			}
		}
		return true
	})
}

func (r *repoIndex) typeMembers(typ string, expr ast.Expr, member func(typ, name string)) {
	switch t := expr.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			for _, n := range fl.Names {
				member(typ, n.Name)
			}
			if len(fl.Names) == 0 { // embedded: its name is the field's
				member(typ, recvType(fl.Type))
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				member(typ, n.Name)
			}
		}
	}
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

var (
	identPath = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(\))?$`)
	number    = regexp.MustCompile(`^[0-9.]+$`)
)

// missing says why name is not in the repository, or "" when it is.
func (r *repoIndex) missing(name string) string {
	switch {
	case notCode[name] || number.MatchString(name):
		return ""
	case strings.HasSuffix(name, ".go"):
		if strings.Contains(name, "/") {
			if !r.files[name] {
				return "no such file"
			}
		} else if !r.bases[name] {
			return "no file of that name"
		}
		return ""
	case strings.HasSuffix(name, ":"): // a configuration section
		if !r.yamlKeys[strings.TrimSuffix(name, ":")] {
			return "no configuration section of that name"
		}
		return ""
	case strings.HasPrefix(name, "Benchmark") || strings.HasPrefix(name, "Test"):
		if fn, _, _ := strings.Cut(name, "/"); !r.anyName[fn] {
			return "no such test or benchmark"
		}
		return ""
	case strings.Contains(name, "/"):
		if r.dirs[name] {
			return ""
		}
		for _, m := range r.modules {
			if name == m || strings.HasPrefix(name, m+"/") {
				return ""
			}
		}
		return "no such directory or required module"
	case identPath.MatchString(name):
		return r.missingIdent(strings.TrimSuffix(name, "()"))
	}
	return "not a name the check understands: add it to notCode if it is no code"
}

func (r *repoIndex) missingIdent(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		if r.anyName[name] || r.yamlKeys[name] {
			return ""
		}
		return "declared nowhere"
	}
	head, rest := parts[0], parts[1:]
	if stdPackages[head] {
		return ""
	}
	// A configuration key such as server.write_timeout: lower case, every
	// segment a yaml tag.
	if r.isConfigKey(parts) {
		return ""
	}
	owner := ""
	switch {
	case r.pkgDecls[head] != nil && r.dirs[head] || r.isPackage(head):
		switch {
		case r.pkgDecls[head][rest[0]]:
			owner, rest = rest[0], rest[1:]
		case r.pkgMethods[head][rest[0]] && len(rest) == 1:
			return "" // a method of one of the package's types (cache.Get)
		default:
			return "package " + head + " declares no " + rest[0]
		}
	case r.members[head] != nil:
		owner = head
	default:
		// A receiver variable (x.fail): some type must have the member.
		for _, ms := range r.members {
			if ms[rest[0]] {
				owner, rest = "", rest[1:]
				break
			}
		}
		if owner == "" && len(rest) == len(parts)-1 {
			return "no type has a member " + rest[0]
		}
	}
	for _, p := range rest {
		if !r.members[owner][p] {
			return owner + " has no member " + p
		}
		owner = p
	}
	return ""
}

func (r *repoIndex) isPackage(name string) bool {
	for d := range r.dirs {
		if filepath.Base(d) == name && r.pkgDecls[name] != nil {
			return true
		}
	}
	return false
}

// isConfigKey reports whether parts name a configuration key: lower case,
// every segment a yaml tag of some struct field.
func (r *repoIndex) isConfigKey(parts []string) bool {
	for _, p := range parts {
		if strings.ToLower(p) != p || !r.yamlKeys[p] {
			return false
		}
	}
	return true
}

// declaredIn reports whether file (a base name or a slash path) declares fn.
func (r *repoIndex) declaredIn(file, fn string) bool {
	return r.fileDecl[file][fn]
}
