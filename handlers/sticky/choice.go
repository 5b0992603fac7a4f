package sticky

// Choice is a request's part of sticky routing, in its state.
type Choice struct {
	// SessionID is the request's session id (SessionID); "" when it has
	// none.
	SessionID string
}
