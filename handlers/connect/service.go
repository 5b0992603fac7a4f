package connect

import (
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// now is the flow's clock; tests replace it.
var now = time.Now

// The lifetime of an authorization code: by default, and at most (an
// OAuth code is short-lived; RFC 6749 10.5). The operator sets it with
// the tollgate app's connect_code_ttl.
const (
	DefaultCodeTTL = 5 * time.Minute
	MaxCodeTTL     = 10 * time.Minute
)

// CodeTTL is the code lifetime the tollgate app gw offers (its
// ConnectCodeTTL), DefaultCodeTTL without one.
func CodeTTL(gw any) time.Duration {
	if c, ok := gw.(interface{ ConnectCodeTTL() time.Duration }); ok && c.ConnectCodeTTL() > 0 {
		return c.ConnectCodeTTL()
	}
	return DefaultCodeTTL
}

// Messages of the exchange's refusals.
const (
	MsgCodeInvalid      = "code: unknown or already used"
	MsgCodeExpired      = "code: expired; ask the person to approve again"
	MsgVerifierMismatch = "code_verifier does not match the code_challenge of the authorization request"
	MsgMethodMismatch   = "code_challenge_method does not match the authorization request"
)

// Issued is an issued authorization code: the code string (given to the
// app once) and its record.
type Issued struct {
	Code string
	storage.ConnectCode
}

// Issue issues a code for the member userID of the account, who approved
// req; the code lives ttl.
func Issue(st *storage.Store, accountID, userID string, req Request, ttl time.Duration) (Issued, *apierror.Error) {
	id, name, origin := req.App()
	c, code, err := st.CreateConnectCode(storage.NewConnectCode{
		AccountID: accountID, UserID: userID,
		ChallengeS256: storedChallenge(req.Method, req.Challenge), Method: req.Method,
		CallbackURL: req.CallbackURL, App: storage.ConnectApp{ID: id, Name: name, Origin: origin},
		KeyName: req.KeyName(), Limit: req.Limit, LimitReset: req.LimitReset, KeyExpiresAt: req.ExpiresAt,
		WorkspaceID: req.WorkspaceID, TTL: ttl,
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if req.WorkspaceID != "" {
			return Issued{}, apierror.NotFound("Workspace not found")
		}
		return Issued{}, apierror.NotFound("Account not found")
	case errors.Is(err, storage.ErrForbidden):
		return Issued{}, apierror.New(http.StatusForbidden, strings.TrimPrefix(err.Error(), storage.ErrForbidden.Error()+": "))
	case errors.Is(err, storage.ErrInvalid):
		return Issued{}, apierror.BadRequest(strings.TrimPrefix(err.Error(), storage.ErrInvalid.Error()+": "))
	case err != nil:
		return Issued{}, storeFailure(err)
	}
	return Issued{Code: code, ConnectCode: c}, nil
}

// Exchange trades a code and its verifier for the key the member
// approved: the code is consumed by the first attempt, right or wrong,
// so that a code is worth one try; a wrong verifier, a method other than
// the request's, an unknown, used or expired code create nothing. method
// is the exchange's code_challenge_method, nil when absent.
func Exchange(st *storage.Store, code, verifier string, method *string) (key string, k storage.APIKey, apiErr *apierror.Error) {
	c, err := st.ConsumeConnectCode(storage.HashSecret(code))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", k, apierror.BadRequest(MsgCodeInvalid)
	case errors.Is(err, storage.ErrCodeExpired):
		return "", k, apierror.BadRequest(MsgCodeExpired)
	case err != nil:
		return "", k, storeFailure(err)
	}
	if method != nil && *method != c.Method {
		return "", k, apierror.New(http.StatusForbidden, MsgMethodMismatch)
	}
	if !VerifyStored(c.ChallengeS256, verifier) {
		return "", k, apierror.New(http.StatusForbidden, MsgVerifierMismatch)
	}
	app := c.App
	user := c.UserID
	k, key, err = st.CreateAPIKey(storage.NewAPIKey{
		AccountID: c.AccountID, WorkspaceID: c.WorkspaceID, Name: c.KeyName,
		Limit: c.Limit, LimitReset: c.LimitReset, ExpiresAt: c.KeyExpiresAt,
		CreatorUserID: &user, Connect: &app,
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", k, apierror.New(http.StatusForbidden, "The account or workspace the person approved no longer exists")
	case errors.Is(err, storage.ErrInvalid):
		// The member left the account, or the key's expiry passed, since.
		return "", k, apierror.New(http.StatusForbidden, "The approval no longer holds: "+strings.TrimPrefix(err.Error(), storage.ErrInvalid.Error()+": "))
	case err != nil:
		return "", k, storeFailure(err)
	}
	return key, k, nil
}

// Discard consumes a code without exchanging it: an exchange refused
// before its verifier was looked at (no verifier, a malformed body) still
// uses the code up. An unknown, used or expired code is no error here.
func Discard(st *storage.Store, code string) *apierror.Error {
	_, err := st.ConsumeConnectCode(storage.HashSecret(code))
	if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrCodeExpired) {
		return storeFailure(err)
	}
	return nil
}

// storeFailure is the answer to a store that failed: 503 while the shared
// database is away, 500 otherwise.
func storeFailure(err error) *apierror.Error {
	if errors.Is(err, storage.ErrUnavailable) {
		return apierror.New(http.StatusServiceUnavailable, "The gateway's database is unavailable; retry shortly")
	}
	return apierror.New(http.StatusInternalServerError, "Internal Server Error")
}

// Apps lists the keys apps hold for the member userID of the account,
// newest first: the member's "Connected apps".
func Apps(st *storage.Store, accountID, userID string) []storage.APIKey {
	var out []storage.APIKey
	for _, k := range st.ListAPIKeys(storage.KeyFilter{AccountID: accountID, IncludeDisabled: true}) {
		if k.Connect != nil && k.CreatorUserID != nil && *k.CreatorUserID == userID {
			out = append(out, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out
}

// Revoke deletes a key an app holds for the member userID: only its
// member may (a management key may not, ManagedByMember); another's key,
// or one that is not an app's, is reported as missing.
func Revoke(st *storage.Store, accountID, userID, hash string) *apierror.Error {
	k, ok := st.APIKey(hash)
	if !ok || k.AccountID != accountID || k.Connect == nil || k.CreatorUserID == nil || *k.CreatorUserID != userID {
		return apierror.NotFound("API key not found")
	}
	if err := st.DeleteAPIKey(hash); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return apierror.NotFound("API key not found")
		}
		return storeFailure(err)
	}
	return nil
}

// ManagedByMember is the 403 of a management key's change to a key an app
// holds (a leaked management key cannot edit or delete keys
// provisioned by a connect client); nil for other keys.
func ManagedByMember(k storage.APIKey) *apierror.Error {
	if k.Connect == nil {
		return nil
	}
	return apierror.New(http.StatusForbidden, "This key was provisioned by a connect client ("+k.Connect.Origin+
		") for a member: management keys cannot change or delete it; its member revokes it in the dashboard")
}
