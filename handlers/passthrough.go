package handlers

import (
	"errors"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
)

// passThrough calls next for a request the router did not route to a
// provider (GET /generation, ...). When next fails before it answered
// (reverse_proxy has no upstream for it, or cannot reach it), the client
// gets the spec's JSON error with the failure's status instead of Caddy's
// empty error answer.
func passThrough(next caddyhttp.Handler, w http.ResponseWriter, r *http.Request, logger *zap.Logger) error {
	tw := &answerTracker{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	err := next.ServeHTTP(tw, r)
	if err == nil || tw.answered || r.Context().Err() != nil {
		return err
	}
	status := http.StatusBadGateway
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode >= 400 {
		status = he.StatusCode
	}
	if logger != nil {
		logger.Error("request not routed by model failed upstream", zap.String("path", r.URL.Path), zap.Error(err))
	}
	apierror.Write(w, apierror.New(status, http.StatusText(status)))
	return nil
}

// answerTracker records whether a response was started.
type answerTracker struct {
	caddyhttp.ResponseWriterWrapper
	answered bool
}

func (t *answerTracker) WriteHeader(status int) {
	if status >= 200 {
		t.answered = true
	}
	t.ResponseWriterWrapper.WriteHeader(status)
}

func (t *answerTracker) Write(p []byte) (int, error) {
	t.answered = true
	return t.ResponseWriterWrapper.Write(p)
}

func (t *answerTracker) ReadFrom(r io.Reader) (int64, error) {
	t.answered = true
	return t.ResponseWriterWrapper.ReadFrom(r)
}
