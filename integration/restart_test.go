package integration

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Killing the process (SIGKILL, no clean shutdown) and starting it again on
// the same data directory keeps every account, key, setting and credit.
func TestRestartKeepsEveryKey(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "12.5")
	c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expect(t, 200)
	keys := map[string]string{}
	for i := range 20 {
		k, h := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"k%d","limit":%d}`, i, i+1))
		keys[h] = k
	}
	var disabled string
	for h := range keys {
		disabled = h
		break
	}
	c.api("PATCH", "/keys/"+disabled, org.MgmtKey, `{"disabled":true}`).expect(t, 200)

	p.kill()
	p.start(t)

	c = newClient(t, p.gateway, p.admin)
	for h, k := range keys {
		if h == disabled {
			c.api("GET", "/key", k, nil).expectError(t, 401, "disabled")
			continue
		}
		me := c.api("GET", "/key", k, nil).expect(t, 200).JSON.Get("data")
		got := c.api("GET", "/keys/"+h, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
		if me.Get("limit").Int() != got.Get("limit").Int() || got.Get("limit").Int() < 1 {
			t.Fatalf("key %s changed: %s vs %s", h, me.Raw, got.Raw)
		}
	}
	if c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_credits").String() != "12.5" {
		t.Fatal("credits lost")
	}
	if !c.api("GET", "/organization/settings", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.is_filtered_model_catalog_enabled").Bool() {
		t.Fatal("organization setting lost")
	}
	// A clean stop and start keeps everything as well.
	n := len(c.api("GET", "/keys?include_disabled=true", org.MgmtKey, nil).JSON.Get("data").Array())
	if n != 20 {
		t.Fatalf("%d keys after restart, want 20", n)
	}
}

// A clean stop writes the key table's snapshot and the next start restores
// the keys from it, counters included, instead of reading every key
// record. After a kill -9 the start restores the same snapshot, now older
// than the database, and reads the key records written since: a charge,
// a new key, a deleted one and a disabled one are all as acknowledged.
// The records' snapshot (accounts, purchases, management keys,
// workspaces) likewise: credits bought, a setting changed and an account
// created after it come back after the kill -9.
func TestRestartFromKeySnapshot(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"capped","limit":5,"limit_reset":"daily"}`)
	_, goneHash := c.newKey(org.MgmtKey, `{"name":"to delete"}`)
	offKey, offHash := c.newKey(org.MgmtKey, `{"name":"to disable"}`)
	body := chatBody("tollgate-mock", `,"max_tokens":20`)
	c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
	before := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if before.Get("usage").Float() <= 0 {
		t.Fatalf("the request charged the key nothing: %s", before.Raw)
	}

	credits := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")

	p.stop(t)
	if snapshotFiles(t, dir) != 1 || fileCount(t, dir, "records.snapshot") != 1 {
		t.Fatal("a clean stop wrote no key table or records snapshot")
	}
	p.start(t)
	if n := strings.Count(p.log.String(), "key table restored from its snapshot"); n != 1 {
		t.Fatalf("the start after a clean stop restored the key table %d times; log:\n%s", n, p.log)
	}
	if n := strings.Count(p.log.String(), "records restored from their snapshot"); n != 1 {
		t.Fatalf("the start after a clean stop restored the records %d times; log:\n%s", n, p.log)
	}
	c = newClient(t, p.gateway, p.admin)
	if got := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Raw != before.Raw {
		t.Fatalf("the key changed across a clean restart:\n got %s\nwant %s", got.Raw, before.Raw)
	}
	if got := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Raw != credits.Raw {
		t.Fatalf("the credits changed across a clean restart:\n got %s\nwant %s", got.Raw, credits.Raw)
	}

	c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
	charged := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if charged.Get("usage").Float() <= before.Get("usage").Float() {
		t.Fatalf("the second request charged nothing: %s", charged.Raw)
	}
	newKey, newHash := c.newKey(org.MgmtKey, `{"name":"after the snapshot","limit":3}`)
	c.api("DELETE", "/keys/"+goneHash, org.MgmtKey, nil).expect(t, 200)
	c.api("PATCH", "/keys/"+offHash, org.MgmtKey, `{"disabled":true}`).expect(t, 200)
	// The account's records after the snapshot: credits bought, a
	// setting changed, and a new account with its management key.
	c.operator("POST", "/accounts/"+org.AccountID+"/credits", `{"amount":"2.5"}`).expect(t, 201)
	c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expect(t, 200)
	credits = c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	later := c.newTenant("organization", "4")
	laterCredits := c.api("GET", "/credits", later.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	p.kill()
	if snapshotFiles(t, dir) != 1 {
		t.Fatal("the snapshot did not outlive the start that read it")
	}
	p.start(t)
	if n := strings.Count(p.log.String(), "key table restored from its snapshot"); n != 2 {
		t.Fatalf("the start after a kill -9 did not restore the key table's snapshot; log:\n%s", p.log)
	}
	c = newClient(t, p.gateway, p.admin)
	if got := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Raw != charged.Raw {
		t.Fatalf("the key lost a charge across a kill -9:\n got %s\nwant %s", got.Raw, charged.Raw)
	}
	if got := c.api("GET", "/keys/"+newHash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Get("limit").Float() != 3 {
		t.Fatalf("the key created after the snapshot: %s", got.Raw)
	}
	c.api("GET", "/key", newKey, nil).expect(t, 200)
	c.api("GET", "/keys/"+goneHash, org.MgmtKey, nil).expectError(t, 404, "")
	c.api("GET", "/key", offKey, nil).expectError(t, 401, "disabled")
	if n := strings.Count(p.log.String(), "records restored from their snapshot"); n != 2 {
		t.Fatalf("the start after a kill -9 did not restore the records' snapshot; log:\n%s", p.log)
	}
	if got := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Raw != credits.Raw {
		t.Fatalf("the credits bought before a kill -9:\n got %s\nwant %s", got.Raw, credits.Raw)
	}
	if !c.api("GET", "/organization/settings", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.is_filtered_model_catalog_enabled").Bool() {
		t.Fatal("the setting changed before a kill -9 was lost")
	}
	if got := c.api("GET", "/credits", later.MgmtKey, nil).expect(t, 200).JSON.Get("data"); got.Raw != laterCredits.Raw {
		t.Fatalf("the account created before a kill -9:\n got %s\nwant %s", got.Raw, laterCredits.Raw)
	}
	c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
}

// fileCount counts the files named name under dir.
func fileCount(t *testing.T, dir, name string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// snapshotFiles counts the key table snapshots under dir.
func snapshotFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "keytable.snapshot" {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
