package routing

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// TestPrivateAttemptsPinCheckedAddress: the router dials a private
// endpoint at the address it checked (a name resolved under the policy),
// keeping its Host and TLS server name; a disallowed address is skipped
// with a 403 naming the policy.
func TestPrivateAttemptsPinCheckedAddress(t *testing.T) {
	gw := testgw.New(t)
	gw.Sealer = testgw.NewSealer(t, 3)
	rt := &Router{Gateway: gw}
	acct, err := gw.Storage.CreateAccount(storage.NewAccount{Name: "A", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	add := func(model, base string) string {
		e, err := gw.Storage.CreatePrivateEndpoint(storage.PrivateEndpoint{ID: storage.NewEndpointID(), AccountID: acct.ID,
			Name: model, Model: model, UpstreamModel: model, BaseURL: base,
			Pricing: storage.EndpointPricing{Prompt: "0", Completion: "0", Request: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gw.Storage.UpdatePrivateEndpoint(acct.ID, e.ID, "activate", nil, func(e *storage.PrivateEndpoint) error {
			e.Status = storage.EndpointEnabled
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	add("acme/local", "https://localhost:8443/v1")
	meta := add("acme/meta", "http://169.254.169.254/v1")
	id := &gateway.Identity{Principal: storage.Principal{AccountID: acct.ID}}
	st := &pipeline.State{ID: id, Store: gw.Storage}

	atts, refusal := rt.privateAttempts("acme/local", nil, st)
	if refusal != nil || len(atts) != 1 {
		t.Fatalf("loopback allowed: %v, %d attempts", refusal, len(atts))
	}
	p := atts[0].Provider
	if p.Dial != "127.0.0.1:8443" || p.Host != "localhost:8443" || p.Scheme != "https" {
		t.Fatalf("provider dial %q host %q scheme %q", p.Dial, p.Host, p.Scheme)
	}
	route := &upstream.Route{Provider: p, Model: atts[0].Model}
	if v, _ := route.Placeholder("tollgate.upstream.server_name"); v != "localhost" {
		t.Fatalf("server_name %v", v)
	}

	_, refusal = rt.privateAttempts("acme/meta", nil, st)
	if refusal == nil || refusal.Status != http.StatusForbidden ||
		!strings.Contains(refusal.Message, "Private endpoint "+meta+" is refused by the gateway's customer_egress policy: 169.254.169.254") {
		t.Fatalf("metadata address: %+v", refusal)
	}

	// The default policy refuses loopback too, and the request is answered
	// with the refusal when no other provider serves the model.
	gw.Egress = egress.New(nil)
	if atts, refusal := rt.privateAttempts("acme/local", nil, st); len(atts) != 0 || refusal == nil || refusal.Status != http.StatusForbidden {
		t.Fatalf("default policy: %d attempts, %+v", len(atts), refusal)
	}
	gw.Egress = egress.New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	if _, refusal := rt.privateAttempts("acme/local", nil, st); refusal == nil {
		t.Fatal("an allow list without loopback accepted localhost")
	}
}
