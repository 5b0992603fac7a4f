package catalog

import "testing"

func TestDialValue(t *testing.T) {
	p := &Provider{Name: "p", Style: "openai", Dial: "example.com:443"}
	if got := p.DialValue(); got != "example.com:443" {
		t.Fatalf("before New: %v", got)
	}
	New([]*Model{{ID: "m", Providers: []*Provider{p}}})
	if got := p.DialValue(); got != "example.com:443" {
		t.Fatalf("after New: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.DialValue() }); n != 0 {
		t.Errorf("DialValue allocates %v times", n)
	}
	q := *p
	q.Dial = "10.0.0.1:443" // a private endpoint's checked address
	if got := q.DialValue(); got != "10.0.0.1:443" {
		t.Fatalf("copy with another Dial: %v", got)
	}
	p.Dial = ""
	if got := p.DialValue(); got != "" {
		t.Fatalf("Dial cleared: %v", got)
	}
}
