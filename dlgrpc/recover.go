package dlgrpc

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// SafeCall runs fn on the calling goroutine. A panic in it is recovered,
// reported to logger (slog.Default() when nil) with its stack, and
// returned as an error wrapping ErrPanic that names what ("model
// \"resnet\"", "the Authenticate hook"). The services call user code
// (hooks, models, release callbacks) through it, so that a panic there
// fails one call rather than the process.
func SafeCall(logger *slog.Logger, what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered(logger, what, r)
		}
	}()
	return fn()
}

// recovered reports r, recovered in what, and returns its error.
func recovered(logger *slog.Logger, what string, r any) error {
	if logger == nil {
		logger = slog.Default()
	}
	logger.Error("dlgrpc: recovered from a panic", "in", what, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return fmt.Errorf("%w in %s: %v", ErrPanic, what, r)
}
