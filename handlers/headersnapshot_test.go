package handlers

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
)

// TestHeaderSnapshotAsClone compares headerSnapshot with what it stands
// for, a Header.Clone put back by clear and maps.Copy, on headers small
// (in place) and large (a Clone), with nil and empty values: the same
// header after a restore, also after the live header changed (values
// edited in place, added to, deleted) and after a second restore.
func TestHeaderSnapshotAsClone(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 3000 {
		h := http.Header{}
		for i := range r.IntN(6) {
			k := "K" + strconv.Itoa(i)
			switch r.IntN(5) {
			case 0:
				h[k] = nil
			case 1:
				h[k] = []string{}
			default:
				vv := make([]string, 1+r.IntN(3), 4) // room to append in place
				for j := range vv {
					vv[j] = strconv.Itoa(n) + "-" + strconv.Itoa(j)
				}
				h[k] = vv
			}
		}
		want := h.Clone()
		var s answer.HeaderSnapshot
		s.Take(h)
		// The live header changes after the snapshot.
		for k, vv := range h {
			if len(vv) > 0 {
				vv[0] = "edited"
			}
			h[k] = append(vv, "added")
			break
		}
		h["New"] = []string{"x"}
		w := httptest.NewRecorder()
		maps.Copy(w.Header(), h)
		for range 2 {
			s.Restore(w)
			if !reflect.DeepEqual(w.Header(), want) {
				t.Fatalf("restored %v, want %v", w.Header(), want)
			}
			for k, vv := range w.Header() {
				if (vv == nil) != (want[k] == nil) || cap(vv) != len(vv) {
					t.Fatalf("%s: %#v (cap %d), want %#v", k, vv, cap(vv), want[k])
				}
				w.Header()[k] = append(vv, "after")
			}
			w.Header()["Other"] = []string{"y"}
		}
	}
}
