package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestWebFetchPriceOption(t *testing.T) {
	var tg Tollgate
	if known, err := tg.SetOption("web_fetch_price", []string{"0.002"}); !known || err != nil || tg.WebFetchPrice != "0.002" {
		t.Fatalf("%v %v %q", known, err, tg.WebFetchPrice)
	}
	if p, err := tg.webFetchPrice(); err != nil || p.String() != "0.002" {
		t.Fatalf("%v %v", p, err)
	}
	for _, args := range [][]string{{"-1"}, {"cheap"}, {}, {"1", "2"}} {
		var tg Tollgate
		if _, err := tg.SetOption("web_fetch_price", args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	bad := Tollgate{WebFetchPrice: "x"}
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "web_fetch_price:") {
		t.Errorf("Validate: %v", err)
	}
	if p, err := new(Tollgate).webFetchPrice(); err != nil || p != 0 {
		t.Errorf("unset %v %v", p, err)
	}
}

// web_fetch_price reaches the web-fetch plugin's module as its price,
// beside the module's other configuration; a price set in both places is
// refused.
func TestWebFetchPriceHandedToThePlugin(t *testing.T) {
	tg := Tollgate{WebFetchPrice: "0.002", PluginsRaw: caddy.ModuleMap{"moderation": json.RawMessage(`{}`)}}
	if err := tg.priceWebFetch(); err != nil || string(tg.PluginsRaw[webFetchModule]) != `{"price":"0.002"}` || string(tg.PluginsRaw["moderation"]) != `{}` {
		t.Fatalf("%v %s", err, tg.PluginsRaw)
	}
	unset := Tollgate{}
	if err := unset.priceWebFetch(); err != nil || unset.PluginsRaw != nil {
		t.Fatalf("unset: %v %s", err, unset.PluginsRaw)
	}
	both := Tollgate{WebFetchPrice: "0.002", PluginsRaw: caddy.ModuleMap{webFetchModule: json.RawMessage(`{"price":"0.003"}`)}}
	if err := both.priceWebFetch(); err == nil || !strings.HasPrefix(err.Error(), "web_fetch_price:") {
		t.Fatalf("both: %v", err)
	}
}
