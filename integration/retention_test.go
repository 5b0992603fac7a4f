package integration

import (
	"fmt"
	"testing"
	"time"
)

// GET /generation of an id older than the generation retention (default
// 30 days) answers a 404 that says the record expired, through Caddy; a
// recent one is found.
func TestGenerationExpiredIs404(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"a"}`)
	res := c.api("POST", "/responses", key, `{"model":"mock/echo","input":"hi"}`).expect(t, 200)
	c.api("GET", "/generation?id="+res.Header.Get("X-Generation-Id"), key, nil).expect(t, 200)
	old := fmt.Sprintf("gen-%013d-0123456789ab", time.Now().Add(-31*24*time.Hour).UnixMilli())
	c.api("GET", "/generation?id="+old, key, nil).
		expectError(t, 404, "Generation not found: "+old+" has expired (generations are removed 30 days after they are created, generation_retention)")
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"generation_id":"`+old+`","category":"latency"}`).
		expectError(t, 404, "has expired")
}
