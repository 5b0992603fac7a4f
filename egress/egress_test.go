package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestIsPublic(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"2606:4700:4700::1111", true},
		{"::ffff:8.8.8.8", true},
		{"127.0.0.1", false},
		{"127.8.9.10", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"169.254.0.1", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"100.64.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"192.0.2.10", false},
		{"::1", false},
		{"::", false},
		{"fe80::1", false},
		{"fd00::1", false},
		{"fc00::1", false},
		{"ff02::1", false},
		{"2001:db8::1", false},
		{"::ffff:127.0.0.1", false},       // mapped v4-in-v6
		{"::ffff:169.254.169.254", false}, // mapped metadata
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::a00:1", false},  // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", true}, // NAT64 of 8.8.8.8
		{"2002:7f00:1::", false},   // 6to4 of 127.0.0.1
		{"2002:808:808::", true},   // 6to4 of 8.8.8.8
		{"fe80::1%eth0", false},
	} {
		a := netip.MustParseAddr(tt.addr)
		if got := IsPublic(a); got != tt.want {
			t.Errorf("IsPublic(%s) = %v, want %v", tt.addr, got, tt.want)
		}
		if got := (*Policy)(nil).Allowed(a); got != tt.want {
			t.Errorf("nil policy Allowed(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestAllowList(t *testing.T) {
	var allow []netip.Prefix
	for _, s := range []string{"127.0.0.1", "10.0.0.0/8", "fd00::/8"} {
		p, err := ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		allow = append(allow, p)
	}
	p := New(allow)
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true}, // a mapped address matches its IPv4 range
		{"127.0.0.2", false},
		{"10.200.3.4", true},
		{"fd12::1", true},
		{"fe80::1", false},
		{"169.254.169.254", false},
		{"192.168.0.1", false},
		{"8.8.8.8", true},
	} {
		if got := p.Allowed(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Allowed(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if _, err := ParsePrefix("10.0.0.0/33"); err == nil {
		t.Error("ParsePrefix accepted 10.0.0.0/33")
	}
	if _, err := ParsePrefix("nope"); err == nil {
		t.Error("ParsePrefix accepted nope")
	}
	if _, err := ParsePrefix("::ffff:10.0.0.0/104"); err == nil {
		t.Error("ParsePrefix accepted a mapped range")
	}
	if got, _ := ParsePrefix("10.1.2.3/8"); got.String() != "10.0.0.0/8" {
		t.Errorf("ParsePrefix(10.1.2.3/8) = %s", got)
	}
}

func TestControl(t *testing.T) {
	p := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for addr, ok := range map[string]bool{
		"127.0.0.1:80": false, "[::1]:443": false, "169.254.169.254:80": false,
		"[::ffff:127.0.0.1]:80": false, "10.1.1.1:8080": true, "8.8.8.8:53": true, "nonsense": false,
	} {
		err := p.Control("tcp", addr, nil)
		if (err == nil) != ok {
			t.Errorf("Control(%s) = %v, want allowed %v", addr, err, ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("Control(%s) = %v, not ErrRefused", addr, err)
		}
	}
}

// TestTransport: a client on the policy's transport cannot reach a
// loopback server unless the policy (read at each dial) allows it.
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	var cur atomic.Pointer[Policy]
	cur.Store(New(nil))
	tr := Transport(cur.Load)
	tr.DisableKeepAlives = true
	c := &http.Client{Transport: tr}
	_, err := c.Get(srv.URL)
	if err == nil || !errors.Is(err, ErrRefused) {
		t.Fatalf("default policy: got %v, want a refusal", err)
	}
	cur.Store(New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}))
	res, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed loopback: %v", err)
	}
	res.Body.Close()
	cur.Store(New(nil)) // tightened again
	if _, err := c.Get(srv.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("tightened policy: got %v, want a refusal", err)
	}
}

func TestResolveAndCheck(t *testing.T) {
	p := New(nil)
	var lookups atomic.Int32
	p.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		switch host {
		case "public.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("93.184.215.14")}, nil
		case "internal.test":
			return []netip.Addr{netip.MustParseAddr("::ffff:169.254.169.254")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host}
	}
	ctx := context.Background()
	a, err := p.Resolve(ctx, "public.test")
	if err != nil || a.String() != "93.184.215.14" {
		t.Fatalf("Resolve(public.test) = %v, %v", a, err)
	}
	if _, err := p.Resolve(ctx, "internal.test"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Fatalf("Resolve(internal.test) = %v", err)
	}
	if _, err := p.Resolve(ctx, "127.0.0.1"); !errors.Is(err, ErrRefused) {
		t.Fatalf("Resolve(127.0.0.1) = %v", err)
	}
	if _, err := p.Resolve(ctx, "[::1]"); !errors.Is(err, ErrRefused) {
		t.Fatalf("Resolve([::1]) = %v", err)
	}
	// Cached: repeated resolutions do not look the name up again.
	n := lookups.Load()
	for i := 0; i < 10; i++ {
		_, _ = p.Resolve(ctx, "public.test")
	}
	if lookups.Load() != n {
		t.Errorf("lookups went from %d to %d: not cached", n, lookups.Load())
	}
	// Expired: looked up again.
	p.mu.Lock()
	c := p.cache["public.test"]
	c.expires = time.Now().Add(-time.Second)
	p.cache["public.test"] = c
	p.mu.Unlock()
	_, _ = p.Resolve(ctx, "public.test")
	if lookups.Load() != n+1 {
		t.Errorf("expired entry not looked up again")
	}

	for url, ok := range map[string]bool{
		"https://public.test/v1":         true,
		"http://unknown.test/":           true, // unresolvable now: checked when dialed
		"http://internal.test/v1":        false,
		"http://127.0.0.1:8080/v1":       false,
		"http://[::ffff:127.0.0.1]:80/":  false,
		"http://169.254.169.254/latest/": false,
		"http://[fd00::1]/":              false,
		"https://93.184.215.14/v1":       true,
		"http://0.0.0.0:80/":             false,
		"http://[2002:7f00:1::]:80/v1":   false,
	} {
		err := p.Check(ctx, url)
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want ok %v", url, err, ok)
		}
	}
	if err := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Check(ctx, "http://127.0.0.1:9/v1"); err != nil {
		t.Errorf("allowed loopback refused: %v", err)
	}
}
