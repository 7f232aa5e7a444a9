package etcdlock

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

// TestClientLogsGoToSetLogger checks that the zap logger Open gives the
// etcd client writes nowhere before SetLogger, and to the slog logger
// after, with the entry's fields as attributes.
func TestClientLogsGoToSetLogger(t *testing.T) {
	var sink atomic.Pointer[slog.Logger]
	lg := zap.New(&slogCore{log: &sink}).Named("etcd-client").With(zap.String("endpoint", "h:1"))
	lg.Warn("before SetLogger")
	var buf bytes.Buffer
	sink.Store(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	lg.Debug("below the level")
	lg.Warn("retrying", zap.Int("attempt", 2), zap.Error(errTest))
	got := buf.String()
	for _, want := range []string{"level=WARN", "msg=retrying", "attempt=2", "endpoint=h:1", "error=boom", "logger=etcd-client"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "before SetLogger") || strings.Contains(got, "below the level") {
		t.Errorf("log %q has entries it should not", got)
	}
}

var errTest = errorString("boom")

type errorString string

func (e errorString) Error() string { return string(e) }
