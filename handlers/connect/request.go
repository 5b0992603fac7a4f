package connect

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Request is a checked authorization request: what the app asks for, in
// the fields of POST /auth/keys/code (and the consent page's query).
type Request struct {
	CallbackURL string
	Origin      string // the callback's origin, shown to the member
	Challenge   string
	Method      string
	Limit       *money.Amount
	LimitReset  money.Interval
	ExpiresAt   *time.Time // the key's
	KeyLabel    string     // "" : the app's name
	WorkspaceID string     // "" : the account's default workspace
}

// App is the app the request comes from, as the member sees it.
func (q Request) App() (id int64, name, origin string) {
	return AppID(q.Origin), AppName(q.Origin), q.Origin
}

// KeyName is the name the key will have: the label asked for, or the
// app's name.
func (q Request) KeyName() string {
	if q.KeyLabel != "" {
		return q.KeyLabel
	}
	return AppName(q.Origin)
}

// maxKeyLabel bounds key_label (the reference's maxLength).
const maxKeyLabel = 100

// raw is a request's fields as read, before the rules.
type raw struct {
	callbackURL, challenge, method, keyLabel, workspaceID *string
	limit                                                 *money.Amount
	usageLimitType                                        *string
	expiresAt                                             *time.Time
}

// ParseJSON reads and checks the body of POST /auth/keys/code.
func ParseJSON(f *reqbody.Fields) (Request, *apierror.Error) {
	var r raw
	// The second results only say whether a member is present: f.Err
	// holds the first bad value, checked below.
	r.callbackURL, _ = f.NullableString("callback_url")
	r.challenge, _ = f.NullableString("code_challenge")
	r.method, _ = f.NullableString("code_challenge_method")
	r.limit, _ = f.NullableAmount("limit")
	r.usageLimitType, _ = f.NullableString("usage_limit_type")
	r.expiresAt, _ = f.NullableTime("expires_at", false)
	r.keyLabel, _ = f.NullableString("key_label")
	r.workspaceID, _ = f.NullableString("workspace_id")
	if f.Err != nil {
		return Request{}, f.Err
	}
	return r.check()
}

// ParseQuery reads and checks the consent page's query: the same fields
// as POST /auth/keys/code, as query parameters.
func ParseQuery(v url.Values) (Request, *apierror.Error) {
	var r raw
	get := func(name string) *string {
		if !v.Has(name) {
			return nil
		}
		s := v.Get(name)
		return &s
	}
	r.callbackURL, r.challenge, r.method = get("callback_url"), get("code_challenge"), get("code_challenge_method")
	r.usageLimitType, r.keyLabel, r.workspaceID = get("usage_limit_type"), get("key_label"), get("workspace_id")
	if s := get("limit"); s != nil && *s != "" {
		a, err := money.ParseAmount(*s)
		if err != nil {
			return Request{}, apierror.BadRequest("limit: expected a number")
		}
		r.limit = &a
	}
	if s := get("expires_at"); s != nil && *s != "" {
		t, err := time.Parse(time.RFC3339Nano, *s)
		if err != nil {
			return Request{}, apierror.BadRequest("expires_at: expected an ISO 8601 timestamp such as 2027-12-31T23:59:59Z")
		}
		r.expiresAt = &t
	}
	return r.check()
}

// check applies the rules of an authorization request.
func (r raw) check() (Request, *apierror.Error) {
	var q Request
	if r.callbackURL == nil || *r.callbackURL == "" {
		return q, apierror.BadRequest("callback_url: required")
	}
	origin, err := CheckCallbackURL(*r.callbackURL)
	if err != nil {
		return q, apierror.BadRequest("callback_url: " + err.Error())
	}
	q.CallbackURL, q.Origin = *r.callbackURL, origin
	if r.challenge == nil || *r.challenge == "" {
		return q, apierror.BadRequest("code_challenge: required (PKCE, RFC 7636)")
	}
	// RFC 7636 4.3: without a method, the challenge is plain.
	q.Method = MethodPlain
	if r.method != nil {
		q.Method = *r.method
	}
	if q.Method != MethodS256 && q.Method != MethodPlain {
		return q, apierror.BadRequest("code_challenge_method: expected S256 or plain")
	}
	if err := checkChallenge(q.Method, *r.challenge); err != nil {
		return q, apierror.BadRequest("code_challenge: " + err.Error())
	}
	q.Challenge = *r.challenge
	if r.limit != nil {
		if *r.limit < 0 {
			return q, apierror.BadRequest("limit: must not be negative")
		}
		q.Limit = r.limit
	}
	if r.usageLimitType != nil && *r.usageLimitType != "" {
		iv, ok := money.ParseInterval(*r.usageLimitType)
		if !ok || iv == money.IntervalNone {
			return q, apierror.BadRequest("usage_limit_type: expected daily, weekly or monthly")
		}
		q.LimitReset = iv
	}
	if r.expiresAt != nil {
		if !r.expiresAt.After(now()) {
			return q, apierror.BadRequest("expires_at: must be in the future")
		}
		t := r.expiresAt.UTC()
		q.ExpiresAt = &t
	}
	if r.keyLabel != nil {
		l := strings.TrimSpace(*r.keyLabel)
		if utf8.RuneCountInString(l) > maxKeyLabel || strings.ContainsAny(l, "\r\n") {
			return q, apierror.BadRequest("key_label: at most 100 characters, one line")
		}
		q.KeyLabel = l
	}
	if r.workspaceID != nil {
		q.WorkspaceID = *r.workspaceID
	}
	return q, nil
}
