package status

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

//go:embed templates/status.html
var pageFS embed.FS

//go:embed static/status.css
var pageCSS string

//go:embed static/status.js
var pageJS string

// Options configure Handler.
type Options struct {
	// Secrets returns the strings the page must never show: the API keys,
	// the upstream credential. Any text of a snapshot that holds one shows
	// "[redacted]" in its place. Strings shorter than 8 bytes are not
	// searched for. nil: none.
	Secrets func() []string
	// Board, when set, lists the fleet's replicas and their sum; each page
	// load reads it, bounded by FleetTimeout. nil: this replica alone.
	Board *Board
	// FleetTimeout bounds reading the Board; zero: one second.
	FleetTimeout time.Duration
	// Refresh is how often the page's script fetches the figures again;
	// zero: five seconds.
	Refresh time.Duration
}

// Handler serves the status page at GET / and GET /status (HTML that
// reads without JavaScript; a short script refreshes its figures) and the
// snapshot at GET /status.json. src is called once per request; what it
// returns is the handler's own (it is copied before being completed and
// redacted).
func Handler(src func() Snapshot, o Options) http.Handler {
	o.FleetTimeout = cmp.Or(o.FleetTimeout, time.Second)
	o.Refresh = cmp.Or(o.Refresh, 5*time.Second)
	h := &handler{src: src, o: o, tmpl: template.Must(template.New("status.html").Funcs(funcs).ParseFS(pageFS, "templates/status.html"))}
	// The style and the script are inline, so the page is one request and
	// works offline; the policy allows exactly them and nothing else.
	h.csp = fmt.Sprintf("default-src 'none'; style-src '%s'; script-src '%s'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		hash(pageCSS), hash(pageJS))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.page)
	mux.HandleFunc("GET /status", h.page)
	mux.HandleFunc("GET /status.json", h.json)
	return mux
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

type handler struct {
	src  func() Snapshot
	o    Options
	tmpl *template.Template
	csp  string
}

// snapshot is src's snapshot, deep-copied so that completing and redacting
// it never writes into slices the edge still holds, with the fleet read,
// the verdict made and the secrets taken out.
func (h *handler) snapshot(ctx context.Context) (Snapshot, error) {
	orig := h.src()
	b, err := json.Marshal(orig)
	if err != nil {
		return Snapshot{}, err
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return Snapshot{}, err
	}
	if s.Taken.IsZero() {
		s.Taken = time.Now()
	}
	if h.o.Board != nil {
		ctx, cancel := context.WithTimeout(ctx, h.o.FleetTimeout)
		replicas, err := h.o.Board.collect(ctx)
		cancel()
		s.Fleet = newFleetView(withOwn(replicas, summary(s)))
		if err != nil {
			s.Fleet.Error = err.Error()
		}
	}
	assess(&s)
	if h.o.Secrets != nil {
		redact(&s, h.o.Secrets())
	}
	return s, nil
}

func (h *handler) headers(w http.ResponseWriter, contentType string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

func (h *handler) json(w http.ResponseWriter, r *http.Request) {
	s, err := h.snapshot(r.Context())
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	h.headers(w, "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// pageData is what the template sees.
type pageData struct {
	S         Snapshot
	CSS       template.CSS
	JS        template.JS
	RefreshMs int64
	Every     string
	Shape     string
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	s, err := h.snapshot(r.Context())
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	err = h.tmpl.Execute(&buf, pageData{
		S: s,
		// Both are files of this package, embedded at build time.
		CSS:       template.CSS(pageCSS),
		JS:        template.JS(pageJS),
		RefreshMs: h.o.Refresh.Milliseconds(),
		Every:     span(h.o.Refresh.Seconds()),
		Shape:     shape(&s),
	})
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.headers(w, "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", h.csp)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

// shape sums up the page's structure: the lengths of its lists. The script
// refreshes figures in place while the shape holds and reloads the page
// when it changes (a replica joined, a certificate appeared). status.js
// computes the same string.
func shape(s *Snapshot) string {
	mig := -1
	if s.Migration != nil {
		mig = len(s.Migration.Keys)
	}
	nat := -1
	if s.Native != nil {
		nat = len(s.Native.Routes)
	}
	str := -1
	if s.Streams != nil {
		str = len(s.Streams.Routes)
	}
	return fmt.Sprintf("%d/%d/%d/%d/%d/%d/%t/%t/%d/%d", len(s.Routes), len(s.Limits.Refused), len(s.Limits.TopKeys),
		len(s.TLS), len(s.Fleet.Replicas), mig, s.Cache.L2.Present, s.Fleet.Enabled, nat, str)
}

var funcs = template.FuncMap{
	"pct":         pct,
	"per":         per,
	"rate":        rate,
	"dur":         dur,
	"size":        size,
	"count":       count,
	"span":        span,
	"ago":         ago,
	"stamp":       stamp,
	"breaker":     breakerState,
	"breakerText": breakerText,
	"errst":       errorState,
	"days":        daysState,
	"store":       storeState,
	"okbad":       boolState,
	"verdict": func(state string) string {
		switch state {
		case green:
			return "Healthy"
		case amber:
			return "Needs a look"
		}
		return "Failing"
	},
	"yesno": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
}
