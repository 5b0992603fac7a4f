package policy

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// BenchmarkAdmittedRequest is the router's decision for a key with a
// model list, a provider list and a data policy that admit the request:
// nothing is refused, so nothing is allocated.
func BenchmarkAdmittedRequest(b *testing.B) {
	no := false
	zdr := catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true, Region: "europe"}
	m := &catalog.Model{ID: "acme/m", Providers: []*catalog.Provider{{Name: "a", DataPolicy: zdr}, {Name: "b", DataPolicy: zdr}}}
	rules := keyRules(&storage.Guardrail{Name: "G", AllowedModels: []string{"acme/m"}, AllowedProviders: []string{"a", "b"},
		EnablePaidModelTraining: &no, AllowedDataRegions: []string{"europe"}})
	cands := candidates(m, m.Providers...)
	b.ReportAllocs()
	for b.Loop() {
		if CheckModel(rules, m.ID) != nil {
			b.Fatal("model refused")
		}
		if out, refused := AllowedEndpoints(rules, cands, candidate.endpoint); refused != nil || len(out) != 2 {
			b.Fatal("endpoint refused")
		}
	}
}
