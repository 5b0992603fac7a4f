package integration

import (
	"strings"
	"testing"
)

// TestKeyCreatorAndExternalUser: POST /keys takes as creator_user_id only
// a member of the caller's organization, and bounds external.user as
// every id.
func TestKeyCreatorAndExternalUser(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("1")
	other := c.newOrg("1")

	for _, body := range []string{
		`{"name":"k","creator_user_id":"user_nobody"}`,
		`{"name":"k","creator_user_id":"` + other.Member + `"}`,
	} {
		c.api("POST", "/keys", org.Mgmt, body).expectError(t, 400, "creator_user_id: not a member of this account")
	}
	r := c.api("POST", "/keys", org.Mgmt, `{"name":"k","creator_user_id":"`+org.Member+`"}`).expect(t, 201)
	if r.JSON.Get("data.creator_user_id").Str != org.Member {
		t.Fatalf("creator_user_id %s", r.JSON.Get("data.creator_user_id").Raw)
	}

	long := strings.Repeat("x\\n", 8<<10) // 16 KB written, with newlines
	c.api("POST", "/keys", org.Mgmt, `{"name":"k","external":{"user":"`+long+`"}}`).expectError(t, 400, "external.user: ")
	c.api("POST", "/keys", org.Mgmt, `{"name":"k","external":{"user":"`+strings.Repeat("u", 257)+`"}}`).
		expectError(t, 400, "external.user: expected at most 256 characters")
	r = c.api("POST", "/keys", org.Mgmt, `{"name":"k","external":{"user":"`+strings.Repeat("u", 256)+`"}}`).expect(t, 201)
	if r.JSON.Get("data.external_user").Str != strings.Repeat("u", 256) {
		t.Fatalf("external_user %s", r.JSON.Get("data.external_user").Raw)
	}
}
