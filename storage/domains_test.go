package storage

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// noteDomain is an outside domain store for the tests: one note per
// account, which deactivates a member in the same step.
type noteDomain struct {
	k     *kernel.Kernel
	org   Locked
	notes kernel.Records[note]
}

type note struct {
	AccountID string `json:"account_id"`
	ID        string `json:"id"`
	Text      string `json:"text"`
}

func (n note) RecordIDs() (string, string) { return n.AccountID, n.ID }

const prefixNote = "zz/"

func (d *noteDomain) Kinds() []kernel.Kind { return []kernel.Kind{d.notes.Kind(prefixNote, nil)} }

// deactivate writes a note and deactivates the member in one step.
func (d *noteDomain) deactivate(accountID, userID string) error {
	d.k.Lock()
	m, ok := d.org.Member(accountID, userID)
	if !ok {
		d.k.Unlock()
		return ErrNotFound
	}
	c := *m
	c.Active = false
	b := d.org.PutMember(&c)
	d.org.LeaveWorkspaces(accountID, userID)
	kernel.PutDirty(d.k, d.notes, prefixNote, &note{AccountID: accountID, ID: userID, Text: "left"})
	d.k.Unlock()
	return b.Wait()
}

func init() {
	RegisterDomain(DomainInfo{Name: "test-notes", New: func(s *Store) Domain {
		return &noteDomain{k: s.Kernel(), org: s.Locked(), notes: kernel.Records[note]{}}
	}})
}

// An outside domain store is made per Store, its records load on reopen,
// and its changes to other domains go through Locked in one step.
func TestOutsideDomainStore(t *testing.T) {
	dir := t.TempDir()
	s, acct, _, member := newOrgStore(t, dir)
	ws, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "R", "r" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddWorkspaceMembers(acct.ID, ws.ID, []string{member.ID}); err != nil {
		t.Fatal(err)
	}
	d := s.Domain("test-notes").(*noteDomain)
	if err := d.deactivate(acct.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Member(acct.ID, member.ID); m.Active {
		t.Fatal("member still active")
	}
	if ms, _, _ := s.WorkspaceMembers(acct.ID, ws.ID); len(ms) != 0 {
		t.Fatalf("workspace members %+v", ms)
	}
	if s.Domain("nope") != nil {
		t.Fatal("an unregistered domain is found")
	}
	s.Close()

	s = openTemp(t, dir)
	defer s.Close()
	d2 := s.Domain("test-notes").(*noteDomain)
	if d2 == d {
		t.Fatal("a domain store is shared between stores")
	}
	if n, ok := d2.notes[acct.ID][member.ID]; !ok || n.Text != "left" {
		t.Fatalf("note after reopen: %+v", n)
	}
}

func TestRegisterDomainRefusesRepeats(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "already registered") {
			t.Fatalf("recovered %v", r)
		}
	}()
	RegisterDomain(DomainInfo{Name: "test-notes", New: func(*Store) Domain { return nil }})
}
