package integration

import (
	"context"
	"math/rand"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

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

// cpuTime is the CPU the process (the test and the in-process gateway)
// has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settledCPU waits for the process's CPU use to settle (no request
// still working) and returns what it used since from.
func settledCPU(t *testing.T, from time.Duration) time.Duration {
	last := cpuTime(t)
	for range 100 {
		time.Sleep(300 * time.Millisecond)
		now := cpuTime(t)
		if now-last < 30*time.Millisecond {
			return now - from
		}
		last = now
	}
	t.Fatal("the process kept working")
	return 0
}

// A client that leaves stops the work on its request's body: a prompt
// of 8 MiB for a model of a million tokens' window, which takes the
// tokenizer a second or more of CPU, is left early, and the gateway stops
// counting it (the process's CPU shows it) instead of counting it to its
// end for nobody.
func TestClientLeavingStopsWork(t *testing.T) {
	wide := func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", "\t\tmodel openai/wide {\n\t\t\tcontext_length 1000000\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
			"\t\t\tprovider mock http://"+mockAddr+"/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n\t\tmodel tollgate-mock:free {\n")
	}
	startInProcessWith(t, chain(withTokenizedModels(t), wide))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"leaves"}`)
	r := rand.New(rand.NewSource(48))
	var words strings.Builder
	for words.Len() < 8<<20 {
		for range 255 {
			words.WriteByte(byte('a' + r.Intn(26)))
		}
		words.WriteByte(' ')
	}
	body := `{"model":"openai/wide","messages":[{"role":"user","content":"` + words.String() + `"}]}`

	// The whole work: counted up to the model's window, then refused.
	from := settledCPU(t, 0)
	c.mustPost("/chat/completions", key, body, nil).expectError(t, 400, "messages: the prompt has over ")
	whole := settledCPU(t, from)

	// The client leaves a quarter of the way.
	from = settledCPU(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), whole/4)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", c.gateway+"/api/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d before the client left", res.StatusCode)
	}
	left := settledCPU(t, from)
	if left > whole*2/3 {
		t.Fatalf("the request the client left used %v of CPU, the whole work %v", left, whole)
	}
}
