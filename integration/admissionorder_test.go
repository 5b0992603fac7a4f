package integration

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// A key that cannot pay is refused before the gateway works on its
// body: a prepaid account without credits and a key whose limit is spent
// get their 402 for a request whose PDF would otherwise be parsed (and
// refused as unreadable), and no provider is called. A key that can pay
// has the same body parsed and refused with the PDF's 400.
func TestAdmissionBeforeWork(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, tap.through)
	c := newClient(t, gatewayAddr, adminAddr)
	pdf := pdftest.Build("Revenue grew 12% in Q3.")
	broken := pdfChat("tollgate-mock", pdfDataURL(pdf[:len(pdf)/3]), "", "")

	broke := c.newTenant("organization", "")
	brokeKey, _ := c.newKey(broke.MgmtKey, `{"name":"no credit"}`)
	expect402(t, c.mustPost("/chat/completions", brokeKey, broken, nil), "service_credits", "", false)

	paid := c.newTenant("organization", "10")
	spent, _ := c.newKey(paid.MgmtKey, `{"name":"spent","limit":0}`)
	expect402(t, c.mustPost("/chat/completions", spent, broken, nil), "service_key_limit", "", false)
	expect402(t, c.mustPost("/responses", spent, `{"model":"tollgate-mock","input":"hi"}`, nil), "service_key_limit", "", false)

	key, _ := c.newKey(paid.MgmtKey, `{"name":"paying"}`)
	c.mustPost("/chat/completions", key, broken, nil).expectError(t, 400, "messages[0].content[1].file: the PDF cannot be read")
	if b := tap.take(); len(b) != 0 {
		t.Fatalf("the provider was called %d times", len(b))
	}
}
