package admin

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestProviderResponses(t *testing.T) {
	one := providerResponses(storage.Generation{Model: "m", Provider: "p", LatencyMS: 40, UpstreamID: "chatcmpl-1"})
	if len(one) != 1 || one[0]["provider_name"] != "p" || one[0]["status"] != 200 || one[0]["latency"] != int64(40) ||
		one[0]["id"] != "chatcmpl-1" || one[0]["model_permaslug"] != "m" {
		t.Fatalf("one endpoint: %v", one)
	}
	if r := providerResponses(storage.Generation{Model: "m", Provider: "p"}); r[0]["id"] != nil {
		t.Fatalf("no upstream id: %v", r)
	}
	two := providerResponses(storage.Generation{Model: "m", Provider: "b", UpstreamID: "x", Attempts: []storage.ProviderAttempt{
		{Provider: "a", Model: "m", Status: 503, LatencyMS: 5, BYOK: true}, {Provider: "b", Model: "m", Status: 200, LatencyMS: 9}}})
	if len(two) != 2 || two[0]["provider_name"] != "a" || two[0]["status"] != 503 || two[0]["is_byok"] != true || two[0]["id"] != nil ||
		two[1]["provider_name"] != "b" || two[1]["id"] != "x" {
		t.Fatalf("two attempts: %v", two)
	}
}
