package storage

import (
	"errors"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

func TestDestinationsAndEndpointsPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	sealer := testSealer(t, 3)
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	d := Destination{ID: record.NewUUID(), AccountID: acct.ID, Type: "webhook", Enabled: true, SamplingRate: 1, Config: []byte(`{"url":"x"}`)}
	d.SealConfig(sealer, []byte(`{"url":"x","secret":"s3cret"}`))
	d, err := s.CreateDestination(d)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxDestinationsPerType; i++ {
		if _, err := s.CreateDestination(Destination{AccountID: acct.ID, Type: "webhook"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateDestination(Destination{AccountID: acct.ID, Type: "webhook"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("sixth webhook: %v, want ErrConflict", err)
	}
	e := PrivateEndpoint{ID: NewEndpointID(), AccountID: acct.ID, Name: "e", Model: "m", BaseURL: "http://h/v1", UpstreamModel: "u"}
	e.SetSecret(sealer, "endpoint-secret-key-123")
	e, err = s.CreatePrivateEndpoint(e)
	if err != nil || e.Status != EndpointDraft {
		t.Fatalf("create endpoint: %v %s", err, e.Status)
	}
	// a refused transition names the current state and changes nothing
	_, err = s.UpdatePrivateEndpoint(acct.ID, e.ID, "activate", []EndpointStatus{EndpointValidated}, func(p *PrivateEndpoint) error {
		p.Status = EndpointEnabled
		return nil
	})
	var se *StateError
	if !errors.As(err, &se) || se.Status != EndpointDraft {
		t.Fatalf("activate a draft: %v", err)
	}
	for _, step := range []struct {
		from, to EndpointStatus
	}{{EndpointDraft, EndpointValidated}, {EndpointValidated, EndpointEnabled}} {
		if _, err := s.UpdatePrivateEndpoint(acct.ID, e.ID, "x", []EndpointStatus{step.from}, func(p *PrivateEndpoint) error {
			p.Status = step.to
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.EnabledEndpointsFor(acct.ID, "m"); len(got) != 1 {
		t.Fatalf("enabled endpoints %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	got, ok := s.Destination(acct.ID, d.ID)
	if !ok || got.Type != "webhook" || !got.Enabled {
		t.Fatalf("destination after reopen: %+v %v", got, ok)
	}
	raw, err := got.OpenConfig(sealer)
	if err != nil || string(raw) != `{"url":"x","secret":"s3cret"}` {
		t.Fatalf("sealed config after reopen: %q %v", raw, err)
	}
	if _, total := s.ListDestinations(acct.ID, "", 0, 2); total != MaxDestinationsPerType {
		t.Fatalf("total %d", total)
	}
	ge, ok := s.PrivateEndpoint(acct.ID, e.ID)
	if !ok || ge.Status != EndpointEnabled {
		t.Fatalf("endpoint after reopen: %+v", ge)
	}
	if key, err := ge.OpenSecret(sealer); err != nil || key != "endpoint-secret-key-123" {
		t.Fatalf("endpoint key after reopen: %v", err)
	}
	if err := s.DeletePrivateEndpoint(acct.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	if got := s.EnabledEndpointsFor(acct.ID, "m"); len(got) != 0 {
		t.Fatalf("deleted endpoint still routed: %v", got)
	}
}
