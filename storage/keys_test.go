package storage

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// A limit or a disable an admin set on a key is the admin's: the key's
// member can neither change nor remove the limit nor enable the key; the
// record remembers who set them, through a reopen.
func TestAdminSetLimitAndDisableAreTheAdmins(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := s.CreateAccount(NewAccount{Name: "Org", Kind: AccountOrganization})
	m, _ := s.CreateMember(NewMember{AccountID: acct.ID, Email: "bob@example.com"})
	five, ten := money.Amount(5*money.AmountScale), money.Amount(10*money.AmountScale)
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "bob's", CreatorUserID: &m.ID})
	if err != nil {
		t.Fatal(err)
	}
	change := func(byAdmin bool, fn func(*APIKey)) error {
		_, err := s.UpdateAPIKey(k.Hash, func(next *APIKey) error {
			cur := *next
			fn(next)
			return CheckKeyChange(cur, next, byAdmin)
		})
		return err
	}
	// The member's own limit is theirs to change.
	if err := change(false, func(k *APIKey) { k.Limit = &ten }); err != nil {
		t.Fatal(err)
	}
	if err := change(false, func(k *APIKey) { k.Limit = nil }); err != nil {
		t.Fatal(err)
	}
	// An admin's limit, then a disable.
	if err := change(true, func(k *APIKey) { k.Limit = &five }); err != nil {
		t.Fatal(err)
	}
	if err := change(true, func(k *APIKey) { k.Disabled = true }); err != nil {
		t.Fatal(err)
	}
	// Rate limits are an admin's; the member's same limits pass.
	if err := change(true, func(k *APIKey) { k.RateLimits = &RateLimits{ConcurrentRequests: 2} }); err != nil {
		t.Fatal(err)
	}
	if err := change(false, func(k *APIKey) { k.RateLimits = &RateLimits{ConcurrentRequests: 2} }); err != nil {
		t.Fatal(err)
	}
	if err := change(true, func(k *APIKey) { k.RateLimits = nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.APIKey(k.Hash); !got.LimitByAdmin || !got.DisabledByAdmin {
		t.Fatalf("after reopen: %+v", got)
	}
	for name, c := range map[string]struct {
		fn    func(*APIKey)
		field string
	}{
		"lift the limit":   {func(k *APIKey) { k.Limit = &ten }, "limit"},
		"remove the limit": {func(k *APIKey) { k.Limit = nil }, "limit"},
		"change the reset": {func(k *APIKey) { k.LimitReset = money.IntervalDaily }, "limit"},
		"count BYOK":       {func(k *APIKey) { k.IncludeBYOKInLimit = true }, "limit"},
		"enable the key":   {func(k *APIKey) { k.Disabled = false }, "disabled"},
		"set rate limits":  {func(k *APIKey) { k.RateLimits = &RateLimits{RequestsPerMinute: 1} }, "rate_limits"},
	} {
		err := change(false, c.fn)
		if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), c.field+": ") {
			t.Errorf("member: %s: %v", name, err)
		}
	}
	if got, _ := s.APIKey(k.Hash); got.Limit == nil || *got.Limit != five || !got.Disabled {
		t.Fatalf("a member's refused change changed the key: %+v", got)
	}
	// The rest of the key stays the member's; the admin changes anything.
	if err := change(false, func(k *APIKey) { k.Name = "renamed" }); err != nil {
		t.Fatal(err)
	}
	if err := change(true, func(k *APIKey) { k.Disabled = false; k.Limit = nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.APIKey(k.Hash); got.LimitByAdmin || got.DisabledByAdmin {
		t.Fatalf("the admin lifted both, still marked: %+v", got)
	}
	// A member's own disable they may undo.
	if err := change(false, func(k *APIKey) { k.Disabled = true }); err != nil {
		t.Fatal(err)
	}
	if err := change(false, func(k *APIKey) { k.Disabled = false }); err != nil {
		t.Fatal(err)
	}
	// An admin creating a key with a limit sets it.
	ak, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "for bob", CreatorUserID: &m.ID, Limit: &five, ByAdmin: true})
	if !ak.LimitByAdmin {
		t.Fatal("an admin's key limit at creation is not marked")
	}
}
