package integration

import (
	"fmt"
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
