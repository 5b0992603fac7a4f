package caddymodule

import (
	"net/netip"
	"testing"
)

func TestEgressConfigPolicy(t *testing.T) {
	p, err := (*EgressConfig)(nil).policy()
	if err != nil || p.Allowed(netip.MustParseAddr("127.0.0.1")) || !p.Allowed(netip.MustParseAddr("8.8.8.8")) {
		t.Fatalf("default policy: %v, allows loopback %v", err, p.Allowed(netip.MustParseAddr("127.0.0.1")))
	}
	p, err = (&EgressConfig{Allow: []string{"127.0.0.1", "10.0.0.0/8"}}).policy()
	if err != nil || !p.Allowed(netip.MustParseAddr("127.0.0.1")) || !p.Allowed(netip.MustParseAddr("10.9.9.9")) ||
		p.Allowed(netip.MustParseAddr("127.0.0.2")) || p.Allowed(netip.MustParseAddr("169.254.169.254")) {
		t.Fatalf("allow list policy: %v", err)
	}
	if _, err := (&EgressConfig{Allow: []string{"10.0.0.0/40"}}).policy(); err == nil {
		t.Fatal("a bad CIDR in JSON config was accepted")
	}
}
