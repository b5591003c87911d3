package dlgrpc

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// SafeCall turns a panic into an error wrapping ErrPanic that names
// where, and reports it with the stack.
func TestSafeCall(t *testing.T) {
	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&log, nil))
	err := SafeCall(logger, `model "m"`, func() error { panic("boom") })
	if !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), `model "m"`) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(log.String(), "boom") || !strings.Contains(log.String(), "recover_test.go") {
		t.Fatalf("the report lacks the panic or its stack: %s", log.String())
	}
	want := errors.New("plain")
	if err := SafeCall(logger, "x", func() error { return want }); err != want {
		t.Fatalf("an error passes through as it is: %v", err)
	}
}
