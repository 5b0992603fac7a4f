package dashboard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A page's action is a call of the API route that makes the change, in
// process: the public management routes through admin.ServeForAccount
// (with the rights of the account's management key), the operator's
// through the operator API's handler. Their answer, or their error and
// its message, is what the page shows.

// answer is an API route's answer.
type answer struct {
	Status int
	Body   []byte
	// Err is the route's refusal; its Message names the field first
	// ("name: ...") when a field is wrong.
	Err *apierror.Error
}

func (a answer) ok() bool { return a.Err == nil && a.Status/100 == 2 }

// get reads a field of the JSON answer.
func (a answer) get(path string) gjson.Result { return gjson.GetBytes(a.Body, path) }

// capture is the ResponseWriter of an in-process call.
type capture struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header {
	if c.h == nil {
		c.h = http.Header{}
	}
	return c.h
}
func (c *capture) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}
func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}

// newCall is the request of an in-process call with a JSON body.
func newCall(r *http.Request, method, path, query string, body any) (*http.Request, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.URL.RawQuery = query
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = r.RemoteAddr
	return req, nil
}

// callAccount calls the public management route sub (below /api/v1) as
// the session's account.
func (d *Dashboard) callAccount(r *http.Request, s Session, method, sub, query string, body any) answer {
	st, err := d.gatewayStore()
	if err != nil {
		return answer{Err: apierror.New(http.StatusServiceUnavailable, "The gateway's database is unavailable")}
	}
	acct, ok := st.Account(s.AccountID)
	if !ok {
		return answer{Err: apierror.NotFound("Account not found")}
	}
	req, err := newCall(r, method, admin.APIPrefix+sub, query, body)
	if err != nil {
		return answer{Err: apierror.BadRequest(err.Error())}
	}
	var c capture
	serve := d.admin.ServeForAccount
	if !s.CanManageAccount() {
		// A member: what an admin set on their key stays the admin's.
		serve = func(w http.ResponseWriter, r *http.Request, acct storage.Account, sub string) *apierror.Error {
			return d.admin.ServeForMember(w, r, acct, s.MemberID, sub)
		}
	}
	if e := serve(&c, req, acct, sub); e != nil {
		if e.Status == 0 {
			e.Status = http.StatusInternalServerError
		}
		return answer{Status: e.Status, Err: e}
	}
	return answer{Status: c.status, Body: c.body.Bytes()}
}

// callOperator calls an operator API route (path below /tollgate/).
func (d *Dashboard) callOperator(r *http.Request, method, path string, body any) answer {
	if d.operator == nil {
		return answer{Status: http.StatusServiceUnavailable, Err: apierror.New(http.StatusServiceUnavailable, "the operator API is not available")}
	}
	req, err := newCall(r, method, path, "", body)
	if err != nil {
		return answer{Err: apierror.BadRequest(err.Error())}
	}
	var c capture
	d.operator.ServeHTTP(&c, req)
	a := answer{Status: c.status, Body: c.body.Bytes()}
	if c.status/100 != 2 {
		a.Err = &apierror.Error{Status: c.status, Message: gjson.GetBytes(a.Body, "error.message").Str}
	}
	return a
}

// formErrors are a form's errors by field ("" for the form as a whole).
type formErrors map[string]string

// fieldError files an API error under the field its message names, when
// it is one of fields; else under "".
func fieldError(e *apierror.Error, fields ...string) formErrors {
	msg := e.Message
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(msg, f+": "); ok {
			return formErrors{f: rest}
		}
	}
	return formErrors{"": msg}
}

// logAction records a change made from the dashboard: who, what, the
// outcome; never a key or a token.
func (d *Dashboard) logAction(r *http.Request, s Session, action string, a answer) {
	fields := append(sessionFields(s, r), zap.String("action", action), zap.Int("status", a.Status))
	if a.Err != nil {
		d.logger.Info("dashboard action refused", append(fields, zap.String("error", a.Err.Message))...)
		return
	}
	d.logger.Info("dashboard action", fields...)
}

// forbidden is the page of an action beyond the session's role.
func (d *Dashboard) forbidden(w http.ResponseWriter, r *http.Request, s Session, what string) {
	d.logger.Info("dashboard action refused: role", sessionFields(s, r)...)
	d.errorPage(w, r, http.StatusForbidden, "Not allowed", "Your role ("+string(s.Role)+") cannot "+what+". Nothing was changed.")
}

// ownKey returns one of the session's visible keys by hash; another
// account's key, or for a member another member's, is not found (hashes
// cannot be probed).
func (d *Dashboard) ownKey(st *storage.Store, s Session, hash string) (storage.APIKey, bool) {
	k, ok := st.APIKey(hash)
	if !ok || k.AccountID != s.AccountID {
		return storage.APIKey{}, false
	}
	if !s.CanManageAccount() && (k.CreatorUserID == nil || *k.CreatorUserID != s.MemberID) {
		return storage.APIKey{}, false
	}
	return k, true
}
