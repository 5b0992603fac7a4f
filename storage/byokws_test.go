package storage

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// Credentials belong to one workspace: created there by id or slug, listed
// per workspace, ordered within their workspace, and used only by requests
// of keys in that workspace; a workspace holding one cannot be deleted.
func TestBYOKPerWorkspace(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sealer := testSealer(t, 1)
	acct, _ := s.CreateAccount(NewAccount{Name: "a", Kind: AccountOrganization})
	other, _ := s.CreateAccount(NewAccount{Name: "b", Kind: AccountOrganization})
	ws, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Research", "research" })
	if err != nil {
		t.Fatal(err)
	}
	otherWS, err := s.CreateWorkspace(other.ID, func(w *Workspace) { w.Name, w.Slug = "Research", "research" })
	if err != nil {
		t.Fatal(err)
	}

	def, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "default-ws-key-1"}, sealer)
	if err != nil || def.WorkspaceID != acct.DefaultWorkspaceID || def.SortOrder != 0 {
		t.Fatalf("default workspace credential: %+v %v", def, err)
	}
	bySlug, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, WorkspaceID: "research", Provider: "mock", Secret: "research-key-1"}, sealer)
	if err != nil || bySlug.WorkspaceID != ws.ID {
		t.Fatalf("by slug: %+v %v", bySlug, err)
	}
	// sort_order counts within the workspace
	if bySlug.SortOrder != 0 {
		t.Fatalf("first credential of the workspace has sort_order %d", bySlug.SortOrder)
	}
	byID, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, WorkspaceID: ws.ID, Provider: "mock", Secret: "research-key-2"}, sealer)
	if err != nil || byID.WorkspaceID != ws.ID || byID.SortOrder != 1 {
		t.Fatalf("by id: %+v %v", byID, err)
	}
	for _, ref := range []string{otherWS.ID, other.DefaultWorkspaceID, "nope"} {
		_, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, WorkspaceID: ref, Provider: "mock", Secret: "x"}, sealer)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "workspace_id") {
			t.Errorf("workspace %q: %v", ref, err)
		}
	}

	list, total := s.ListBYOK(BYOKFilter{AccountID: acct.ID, WorkspaceID: ws.ID})
	if total != 2 || list[0].ID != byID.ID || list[1].ID != bySlug.ID {
		t.Fatalf("research list: %d %+v", total, list)
	}
	list, total = s.ListBYOK(BYOKFilter{AccountID: acct.ID, WorkspaceID: acct.DefaultWorkspaceID})
	if total != 1 || list[0].ID != def.ID {
		t.Fatalf("default list: %d %+v", total, list)
	}
	if _, total = s.ListBYOK(BYOKFilter{AccountID: acct.ID}); total != 3 {
		t.Fatalf("all workspaces: %d", total)
	}

	// the request's workspace picks the credential, and only its own
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: ws.ID}); !ok || got.ID != bySlug.ID {
		t.Fatalf("research request: %+v %v", got, ok)
	}
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: acct.DefaultWorkspaceID}); !ok || got.ID != def.ID {
		t.Fatalf("default request: %+v %v", got, ok)
	}
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{}); ok {
		t.Fatalf("a request without a workspace used %+v", got)
	}
	if got, ok := s.BYOKFor(acct.ID, "mock"); !ok || got.ID != def.ID {
		t.Fatalf("BYOKFor: %+v %v", got, ok)
	}
	for _, c := range []Credential{bySlug, byID} {
		if _, err := s.UpdateBYOK(acct.ID, c.ID, func(c *Credential) error { c.Disabled = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: ws.ID}); ok {
		t.Fatalf("the workspace's credentials are disabled, yet %+v (of workspace %s) was used", got, got.WorkspaceID)
	}
	// an update cannot move a credential
	up, err := s.UpdateBYOK(acct.ID, def.ID, func(c *Credential) error { c.WorkspaceID = ws.ID; return nil })
	if err != nil || up.WorkspaceID != acct.DefaultWorkspaceID {
		t.Fatalf("update moved the credential: %+v %v", up, err)
	}

	// a workspace holding credentials cannot be deleted
	err = s.DeleteWorkspace(acct.ID, "research")
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `workspace "research" still holds 2 BYOK credential(s)`) {
		t.Fatalf("delete with credentials: %v", err)
	}
	if _, ok := s.Workspace(acct.ID, ws.ID); !ok {
		t.Fatal("refused delete removed the workspace")
	}
	for _, c := range []Credential{bySlug, byID} {
		if err := s.DeleteBYOK(acct.ID, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteWorkspace(acct.ID, "research"); err != nil {
		t.Fatalf("delete without credentials: %v", err)
	}
}

// A credential stored before credentials belonged to a workspace (no
// workspace_id in its record) belongs to the account's default workspace
// once loaded, and is written back that way.
func TestBYOKOldFormatLoadsIntoDefaultWorkspace(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	sealer := testSealer(t, 2)
	acct, err := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Other", "other" })
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, WorkspaceID: "other", Provider: "mock", Secret: "other-ws-key-0001"}, sealer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const id = "0b6c7a52-5d8e-4c3e-9a51-7d0f3f1a2b3c"
	sealed := sealer.Seal([]byte("sk-old-format-key-0001"), []byte(id))
	sealedJSON, _ := json.Marshal(sealed)
	// the record as the store wrote it before: no workspace_id field
	raw := `{"id":"` + id + `","account_id":"` + acct.ID + `","provider":"mock","name":null,"label":"sk-...0001",` +
		`"disabled":false,"is_fallback":false,"is_byok_only":false,"is_required":false,"declared_zdr":null,` +
		`"allowed_models":null,"allowed_api_key_hashes":null,"allowed_user_ids":null,"sort_order":0,` +
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","seq":7,"sealed":` + string(sealedJSON) + `}`
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(prefixBYOK+acct.ID+"/"+id), []byte(raw))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	c, ok := s.BYOK(acct.ID, id)
	if !ok || c.WorkspaceID != acct.DefaultWorkspaceID {
		t.Fatalf("loaded credential %+v %v, want workspace %s", c, ok, acct.DefaultWorkspaceID)
	}
	if plain, err := c.Open(sealer); err != nil || plain != "sk-old-format-key-0001" {
		t.Fatalf("Open = %q %v", plain, err)
	}
	// a credential stored with its workspace keeps it
	if got, ok := s.BYOK(acct.ID, scoped.ID); !ok || got.WorkspaceID != ws.ID {
		t.Fatalf("scoped credential after reopen: %+v %v", got, ok)
	}
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: ws.ID}); !ok || got.ID != scoped.ID {
		t.Fatalf("the other workspace's request used %+v %v", got, ok)
	}
	if got, ok := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: acct.DefaultWorkspaceID}); !ok || got.ID != id {
		t.Fatalf("default workspace request: %+v %v", got, ok)
	}
	if list, total := s.ListBYOK(BYOKFilter{AccountID: acct.ID, WorkspaceID: acct.DefaultWorkspaceID}); total != 1 || list[0].ID != id {
		t.Fatalf("default workspace list: %d %+v", total, list)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got map[string]any
	if err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(prefixBYOK + acct.ID + "/" + id))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &got) })
	}); err != nil {
		t.Fatal(err)
	}
	if got["workspace_id"] != acct.DefaultWorkspaceID || got["id"] != id || got["sealed"] == nil {
		t.Fatalf("stored record after the migration: %v", got)
	}
}
