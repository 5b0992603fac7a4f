package connect

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func parseBody(t *testing.T, body string) (Request, *apierror.Error) {
	t.Helper()
	f, apiErr := reqbody.ParseText([]byte(body))
	if apiErr != nil {
		t.Fatalf("%s: %v", body, apiErr)
	}
	return ParseJSON(f)
}

func wantError(t *testing.T, what string, apiErr *apierror.Error, status int, msg string) {
	t.Helper()
	if apiErr == nil || apiErr.Status != status || !strings.Contains(apiErr.Message, msg) {
		t.Fatalf("%s: %+v; want %d %q", what, apiErr, status, msg)
	}
}

// Bad input names its field, in the body and in the consent page's query.
func TestRequestRulesNameTheField(t *testing.T) {
	ok := `"callback_url":"https://app.example/cb","code_challenge":"` + rfcChallenge + `"`
	for _, tc := range []struct{ body, field string }{
		{`{}`, "callback_url: required"},
		{`{"callback_url":"http://app.example/cb","code_challenge":"` + rfcChallenge + `"}`, "callback_url: must be https"},
		{`{"callback_url":"https://app.example/cb"}`, "code_challenge: required"},
		{`{"callback_url":"https://app.example/cb","code_challenge":""}`, "code_challenge: required"},
		{`{` + ok + `,"code_challenge_method":"S512"}`, "code_challenge_method: expected S256 or plain"},
		{`{` + ok + `,"code_challenge_method":"s256"}`, "code_challenge_method: expected S256 or plain"},
		{`{` + ok + `,"code_challenge_method":"S256","limit":-1}`, "limit: must not be negative"},
		{`{` + ok + `,"code_challenge_method":"S256","limit":"5"}`, "limit"},
		{`{` + ok + `,"code_challenge_method":"S256","usage_limit_type":"yearly"}`, "usage_limit_type"},
		{`{` + ok + `,"code_challenge_method":"S256","expires_at":"2001-01-01T00:00:00Z"}`, "expires_at: must be in the future"},
		{`{` + ok + `,"code_challenge_method":"S256","expires_at":"tomorrow"}`, "expires_at"},
		{`{` + ok + `,"code_challenge_method":"S256","key_label":"` + strings.Repeat("x", 101) + `"}`, "key_label"},
		{`{"callback_url":"https://app.example/cb","code_challenge":"short","code_challenge_method":"S256"}`, "code_challenge: expected"},
	} {
		_, apiErr := parseBody(t, tc.body)
		wantError(t, tc.body, apiErr, http.StatusBadRequest, tc.field)
	}

	q, apiErr := parseBody(t, `{`+ok+`,"code_challenge_method":"S256","limit":2.5,"usage_limit_type":"monthly",
		"expires_at":"2099-01-01T00:00:00Z","key_label":" My key ","workspace_id":"ws"}`)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if q.Origin != "https://app.example" || q.Method != MethodS256 || q.Limit == nil || *q.Limit != money.Amount(2.5*money.AmountScale) ||
		q.LimitReset != money.IntervalMonthly || q.ExpiresAt == nil || q.KeyName() != "My key" || q.WorkspaceID != "ws" {
		t.Fatalf("request %+v", q)
	}
	// Without a method the challenge is plain (RFC 7636 4.3): an S256
	// challenge is then a valid plain one, and the key is named after the app.
	if q, _ := parseBody(t, `{`+ok+`}`); q.Method != MethodPlain || q.KeyName() != "app.example" {
		t.Fatalf("no method: %+v", q)
	}

	v := url.Values{"callback_url": {"https://app.example/cb"}, "code_challenge": {rfcChallenge}, "code_challenge_method": {"S256"},
		"limit": {"3"}, "expires_at": {"2099-01-01T00:00:00Z"}}
	if q, apiErr := ParseQuery(v); apiErr != nil || *q.Limit != 3*money.AmountScale {
		t.Fatalf("query: %+v %v", q, apiErr)
	}
	v.Set("code_challenge_method", "none")
	_, apiErr = ParseQuery(v)
	wantError(t, "query method", apiErr, 400, "code_challenge_method")
	v.Set("code_challenge_method", "S256")
	v.Set("limit", "lots")
	_, apiErr = ParseQuery(v)
	wantError(t, "query limit", apiErr, 400, "limit:")
}

func issue(t *testing.T, st *storage.Store, acct storage.Account, body string, ttl time.Duration) Issued {
	t.Helper()
	q, apiErr := parseBody(t, body)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	iss, apiErr := Issue(st, acct.ID, acct.OwnerUserID, q, ttl)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return iss
}

// The exchange gives the member's key once, for the right verifier; every
// wrong attempt spends the code and creates nothing.
func TestExchange(t *testing.T) {
	gw := testgw.New(t)
	st := gw.Storage
	acct := gw.Account(t, storage.AccountPersonal)
	s256 := `{"callback_url":"http://localhost:7777/cb","code_challenge":"` + rfcChallenge + `","code_challenge_method":"S256",
		"limit":5,"key_label":"IDE"}`
	keys := func() int { return len(st.ListAPIKeys(storage.KeyFilter{AccountID: acct.ID, IncludeDisabled: true})) }

	iss := issue(t, st, acct, s256, time.Minute)
	if !strings.HasPrefix(iss.Code, storage.CodeIDPrefix) || iss.App.Origin != "http://localhost:7777" || iss.App.ID != AppID("http://localhost:7777") {
		t.Fatalf("issued %+v", iss)
	}
	// Concurrent exchanges: one key.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []string
	for range 8 {
		wg.Go(func() {
			if key, _, apiErr := Exchange(st, iss.Code, rfcVerifier, nil); apiErr == nil {
				mu.Lock()
				got = append(got, key)
				mu.Unlock()
			} else if apiErr.Status != 400 || apiErr.Message != MsgCodeInvalid {
				t.Errorf("losing exchange: %+v", apiErr)
			}
		})
	}
	wg.Wait()
	if len(got) != 1 || keys() != 1 {
		t.Fatalf("%d keys handed out, %d stored", len(got), keys())
	}
	p, err := st.Authenticate(got[0])
	if err != nil || p.Key.Connect == nil || p.Key.Connect.Origin != "http://localhost:7777" || *p.Key.CreatorUserID != acct.OwnerUserID ||
		p.Key.Name != "IDE" || *p.Key.Limit != 5*money.AmountScale {
		t.Fatalf("key %+v %v", p.Key, err)
	}
	_, _, apiErr := Exchange(st, iss.Code, rfcVerifier, nil)
	wantError(t, "reused", apiErr, 400, MsgCodeInvalid)

	// A wrong verifier, or a method other than the request's: 403, and the
	// code is spent.
	iss = issue(t, st, acct, s256, time.Minute)
	_, _, apiErr = Exchange(st, iss.Code, strings.Replace(rfcVerifier, "d", "e", 1), nil)
	wantError(t, "wrong verifier", apiErr, 403, MsgVerifierMismatch)
	_, _, apiErr = Exchange(st, iss.Code, rfcVerifier, nil)
	wantError(t, "after a wrong verifier", apiErr, 400, MsgCodeInvalid)
	iss = issue(t, st, acct, s256, time.Minute)
	plain := MethodPlain
	_, _, apiErr = Exchange(st, iss.Code, rfcVerifier, &plain)
	wantError(t, "method", apiErr, 403, MsgMethodMismatch)

	// plain: the verifier is the challenge.
	iss = issue(t, st, acct, `{"callback_url":"https://a.example/cb","code_challenge":"`+rfcVerifier+`","code_challenge_method":"plain"}`, time.Minute)
	if _, _, apiErr := Exchange(st, iss.Code, rfcVerifier, &plain); apiErr != nil {
		t.Fatal(apiErr)
	}

	// Expired, and unknown.
	iss = issue(t, st, acct, s256, time.Nanosecond)
	_, _, apiErr = Exchange(st, iss.Code, rfcVerifier, nil)
	wantError(t, "expired", apiErr, 400, MsgCodeExpired)
	_, _, apiErr = Exchange(st, storage.CodeIDPrefix+"nope", rfcVerifier, nil)
	wantError(t, "unknown", apiErr, 400, MsgCodeInvalid)
	if keys() != 2 {
		t.Fatalf("%d keys; the refused exchanges created some", keys())
	}
}

// The member sees the keys apps hold for them and revokes them; a
// management key's change is refused with the reason; others' keys are
// not theirs to revoke.
func TestAppsAndRevoke(t *testing.T) {
	gw := testgw.New(t)
	st := gw.Storage
	acct := gw.Account(t, storage.AccountPersonal)
	other := gw.Account(t, storage.AccountPersonal)
	iss := issue(t, st, acct, `{"callback_url":"https://chat.example/cb","code_challenge":"`+rfcChallenge+`","code_challenge_method":"S256"}`, time.Minute)
	key, k, apiErr := Exchange(st, iss.Code, rfcVerifier, nil)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	plainKey, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	apps := Apps(st, acct.ID, acct.OwnerUserID)
	if len(apps) != 1 || apps[0].Hash != k.Hash || apps[0].Name != "chat.example" {
		t.Fatalf("apps %+v", apps)
	}
	if ManagedByMember(plainKey) != nil {
		t.Fatal("a plain key refused")
	}
	wantError(t, "management key", ManagedByMember(k), 403, "provisioned by a connect client (https://chat.example)")

	wantError(t, "another account", Revoke(st, other.ID, other.OwnerUserID, k.Hash), 404, "")
	wantError(t, "a key that is no app's", Revoke(st, acct.ID, acct.OwnerUserID, plainKey.Hash), 404, "")
	if apiErr := Revoke(st, acct.ID, acct.OwnerUserID, k.Hash); apiErr != nil {
		t.Fatal(apiErr)
	}
	if _, err := st.Authenticate(key); err == nil {
		t.Fatal("revoked key still authenticates")
	}
	if len(Apps(st, acct.ID, acct.OwnerUserID)) != 0 {
		t.Fatal("revoked key still listed")
	}
}
