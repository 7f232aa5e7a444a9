package etcdlock

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// slogCore is the zap core of the etcd client that Open makes: it sends
// the client's log entries to the slog.Logger of SetLogger (package
// locker's, which discards by default), and nowhere before one is set.
type slogCore struct {
	log    *atomic.Pointer[slog.Logger]
	fields []zapcore.Field
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	lg := c.log.Load()
	return lg != nil && lg.Enabled(context.Background(), level(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(slices.Clip(c.fields), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	attrs := []slog.Attr{slog.String("logger", e.LoggerName)}
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	slices.SortFunc(attrs[1:], func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	if lg := c.log.Load(); lg != nil {
		lg.LogAttrs(context.Background(), level(e.Level), e.Message, attrs...)
	}
	return nil
}

func (c *slogCore) Sync() error { return nil }
