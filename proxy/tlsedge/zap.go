package tlsedge

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// certmagic logs through zap. zapToSlog hands its entries to the
// edge's slog handler, so certificate events (obtained, renewal failed, ...)
// arrive in the same stream as everything else, at the same levels; a
// discarding handler makes it a no-op.
func zapToSlog(h slog.Handler) *zap.Logger {
	return zap.New(&slogCore{h: h}).Named("certmagic")
}

// slogCore is a zapcore.Core writing to an slog.Handler.
type slogCore struct{ h slog.Handler }

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h.WithAttrs(attrs(fields))}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// attrs encodes zap fields one at a time, to keep their order; a field may
// yield several keys (an error adds "errorVerbose" when it formats itself).
func attrs(fields []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			out = append(out, slog.Any(k, v))
		}
	}
	return out
}
