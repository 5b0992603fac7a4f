// Package egress is the gateway's policy for connections to URLs that
// customers supply (private endpoints, observability destinations): by
// default they may reach only public unicast addresses, never loopback,
// private (RFC 1918, ULA), link-local (169.254.0.0/16 with the cloud
// metadata address 169.254.169.254, fe80::/10), shared (100.64.0.0/10),
// multicast, reserved or unspecified ones, so that a customer cannot make
// the gateway connect to its own network (server-side request forgery).
// The operator allows more with CIDRs (`customer_egress { allow ... }`).
//
// The policy is applied twice: when a URL is stored (Check, a 400 for the
// customer) and when a connection is made (Control in a net.Dialer, and
// Resolve for reverse_proxy's dial address), the latter being the real
// protection against a name that resolves differently later (DNS
// rebinding).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CacheTTL is how long Resolve keeps a host's addresses (and a failed
// lookup, for NegativeTTL), so that routing does not look a name up on
// every request.
var (
	CacheTTL    = 30 * time.Second
	NegativeTTL = 5 * time.Second
)

// CheckTimeout bounds the name lookup of Check.
var CheckTimeout = 3 * time.Second

// ErrRefused wraps every refusal by the policy.
var ErrRefused = errors.New("refused by the gateway's customer_egress policy")

// notPublic are ranges that IsGlobalUnicast and IsPrivate leave to us:
// special-purpose blocks that are not reachable public hosts.
var notPublic = mustPrefixes(
	"0.0.0.0/8",       // "this network"
	"100.64.0.0/10",   // shared address space (carrier-grade NAT)
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"240.0.0.0/4",     // reserved, broadcast
	"100::/64",        // discard-only
	"2001::/23",       // IETF protocol assignments (Teredo, ORCHID, ...)
	"2001:db8::/32",   // documentation
	"fec0::/10",       // deprecated site-local
	"64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
)

// nat64 and sixToFour embed an IPv4 address, which must be public too.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// ParsePrefix reads a CIDR, or a single address as its /32 or /128.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("%s: write an IPv4 range in dotted form", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// IsPublic reports whether a is a public unicast address.
func IsPublic(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return IsPublic(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return IsPublic(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}

// Policy says which addresses customer-supplied URLs may reach. The zero
// value and nil allow public unicast addresses only. A Policy is safe for
// concurrent use.
type Policy struct {
	allow []netip.Prefix

	mu    sync.Mutex
	cache map[string]cached
	// lookup resolves a host (net.DefaultResolver; tests replace it).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

type cached struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

// New returns a policy allowing public unicast addresses and those in
// allow.
func New(allow []netip.Prefix) *Policy {
	return &Policy{allow: append([]netip.Prefix(nil), allow...)}
}

// Allow lists the policy's extra ranges.
func (p *Policy) Allow() []netip.Prefix {
	if p == nil {
		return nil
	}
	return append([]netip.Prefix(nil), p.allow...)
}

// Allowed reports whether the policy lets a connection reach a.
func (p *Policy) Allowed(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return false
	}
	if p != nil {
		for _, pr := range p.allow {
			if pr.Contains(a) {
				return true
			}
		}
	}
	return IsPublic(a)
}

func refused(host string, a netip.Addr) error {
	if host == "" || host == a.String() {
		return fmt.Errorf("%w: %s is not a public address", ErrRefused, a)
	}
	return fmt.Errorf("%w: %s resolves to %s, which is not a public address", ErrRefused, host, a)
}

// Control is a net.Dialer Control function: it refuses a connection to a
// disallowed address, after name resolution, whatever the name resolved
// to when its URL was stored.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrRefused, address)
	}
	if !p.Allowed(ap.Addr()) {
		return refused("", ap.Addr())
	}
	return nil
}

// Dialer returns a dialer that refuses disallowed addresses. The policy is
// read at every dial through current, so that a client made once follows
// config reloads.
func Dialer(current func() *Policy) *net.Dialer {
	return &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			return current().Control(network, address, c)
		},
	}
}

// Transport is an HTTP transport whose connections follow the policy
// (read through current at each dial). It ignores proxy environment
// variables: a proxy would make the check apply to the proxy instead.
func Transport(current func() *Policy) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           Dialer(current).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// resolve returns host's addresses, from the cache when fresh.
func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return []netip.Addr{a}, nil
	}
	if p == nil {
		return lookupHost(ctx, host)
	}
	now := time.Now()
	p.mu.Lock()
	c, ok := p.cache[host]
	lookup := p.lookup
	p.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.addrs, c.err
	}
	if lookup == nil {
		lookup = lookupHost
	}
	addrs, err := lookup(ctx, host)
	if ctx.Err() != nil {
		return nil, err // the caller gave up: not the name's fault
	}
	c = cached{addrs: addrs, err: err, expires: now.Add(CacheTTL)}
	if err != nil {
		c.expires = now.Add(NegativeTTL)
	}
	p.mu.Lock()
	if p.cache == nil {
		p.cache = map[string]cached{}
	}
	if len(p.cache) >= 4096 {
		for k, v := range p.cache {
			if now.After(v.expires) {
				delete(p.cache, k)
			}
		}
	}
	p.cache[host] = c
	p.mu.Unlock()
	return addrs, err
}

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) {
			return nil, fmt.Errorf("cannot resolve %s: %s", host, de.Err)
		}
		return nil, fmt.Errorf("cannot resolve %s: %v", host, err)
	}
	return ips, nil
}

// Resolve returns an address of host the policy allows (the first one
// resolved), for a connection made now; an error wrapping ErrRefused when
// host resolves only to disallowed addresses, another when it does not
// resolve. Lookups are cached for CacheTTL.
func (p *Policy) Resolve(ctx context.Context, host string) (netip.Addr, error) {
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if p.Allowed(a) {
			return a.Unmap(), nil
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("cannot resolve %s: no address", host)
	}
	return netip.Addr{}, refused(host, addrs[0].Unmap())
}

// Check is the check of a URL being stored: its host must be an allowed
// address or a name that resolves to at least one. A name that does not
// resolve (yet) is accepted: connections are checked when made.
func (p *Policy) Check(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return errors.New("expected a URL with a host")
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	_, err = p.Resolve(ctx, u.Hostname())
	if errors.Is(err, ErrRefused) {
		return err
	}
	return nil
}
