package storage

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// conformanceLease is the shared backends' hold lease in the tests of
// leases: the shortest allowed, so that an abandoned hold lapses quickly.
const conformanceLease = 300 * time.Millisecond

// conformanceFixture is an organization with a member, a key of that
// member in the default workspace, and the key's cap.
type conformanceFixture struct {
	acct   Account
	member Member
	key    APIKey
	limit  money.Amount
}

func newConformanceFixture(t *testing.T, s *Store, limit money.Amount) conformanceFixture {
	t.Helper()
	acct, err := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "mia@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit, CreatorUserID: &m.ID})
	if err != nil {
		t.Fatal(err)
	}
	return conformanceFixture{acct: acct, member: m, key: k, limit: limit}
}

// seen waits until replica r has the fixture's records.
func (f conformanceFixture) seen(t *testing.T, r *Store) {
	t.Helper()
	eventually(t, 2*time.Second, "the records reach the replica", func() bool {
		_, ok := r.APIKey(f.key.Hash)
		_, mok := r.Member(f.acct.ID, f.member.ID)
		return ok && mok
	})
}

// counters are every level's charged total, as r reads them.
type counters struct{ account, key, workspace, member money.Amount }

func (f conformanceFixture) counters(r *Store) counters {
	a, _ := r.Account(f.acct.ID)
	k, _ := r.APIKey(f.key.Hash)
	w, _ := r.Workspace(f.acct.ID, f.key.WorkspaceID)
	m, _ := r.Member(f.acct.ID, f.member.ID)
	return counters{a.Usage, k.Usage.Total, w.Usage.Total, m.Usage.Total}
}
