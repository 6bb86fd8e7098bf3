package testenv

import (
	"io"
	"log/slog"

	"go.temporal.io/sdk/log"
)

func quietSDKLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}
