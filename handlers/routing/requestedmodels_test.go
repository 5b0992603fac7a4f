package routing

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// requestedModelsByMap is requestedModels as it was, with a map for every
// request: the reference of TestRequestedModelsAsByMap.
func requestedModelsByMap(model, models gjson.Result) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if m := model.Str; m != "" {
		add(m)
	}
	for _, v := range models.Array() {
		add(v.Str)
	}
	return ids
}

// TestRequestedModelsAsByMap compares requestedModels with a map-based
// dedup on lists short and long (past linearIDs), with repeats anywhere.
func TestRequestedModelsAsByMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		count := r.IntN(3 * LinearIDs)
		pool := 1 + r.IntN(2*LinearIDs)
		names := make([]string, count)
		for i := range names {
			names[i] = strconv.Quote("m" + strconv.Itoa(r.IntN(pool)))
		}
		body := `{"models":[` + strings.Join(names, ",") + `]`
		if n%3 != 0 {
			body += `,"model":"m` + strconv.Itoa(r.IntN(pool)) + `"`
		}
		body += "}"
		model, models := gjson.Get(body, "model"), gjson.Get(body, "models")
		want := requestedModelsByMap(model, models)
		var buf [4]string
		got, apiErr := requestedModels(buf[:0], model, models)
		if len(want) == 0 {
			if apiErr == nil {
				t.Fatalf("%s: no error", body)
			}
			continue
		}
		if apiErr != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, %v; want %q", body, got, apiErr, want)
		}
	}
}
