package tlsedge

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// certmagic's zap entries reach the edge's slog handler with their level,
// logger name and fields.
func TestZapToSlog(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})
	zl := zapToSlog(h).Named("obtain").With(zap.String("identifier", "api.example.com"))
	zl.Debug("hidden")
	zl.Error("could not get certificate from issuer", zap.Error(errors.New("connection refused")))
	out := buf.String()
	for _, want := range []string{`"level":"ERROR"`, `"msg":"could not get certificate from issuer"`, `"logger":"certmagic.obtain"`,
		`"identifier":"api.example.com"`, `"error":"connection refused"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line %s lacks %s", out, want)
		}
	}
	if strings.Contains(out, "hidden") || strings.Count(out, "\n") != 1 {
		t.Errorf("want one line at error level, got %s", out)
	}
}
