package handlers

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// webFetchModule is the web-fetch plugin's module name, which the
// handler's web_fetch_price configures.
const webFetchModule = "web_fetch"

// webFetchPrice is the price of one fetch the handler sets
// (WebFetchPrice; 0 when it sets none: the plugin's default), refusing a
// value that is not a non-negative amount.
func (t *Tollgate) webFetchPrice() (money.Amount, error) {
	if t.WebFetchPrice == "" {
		return 0, nil
	}
	a, err := money.ParseAmount(t.WebFetchPrice)
	if err != nil || a < 0 {
		return 0, fmt.Errorf("web_fetch_price: expected a non-negative amount of credits, got %q", t.WebFetchPrice)
	}
	return a, nil
}

// priceWebFetch hands web_fetch_price to the web-fetch plugin's module
// as its price, before the plugins are loaded.
func (t *Tollgate) priceWebFetch() error {
	if t.WebFetchPrice == "" {
		return nil
	}
	if _, err := t.webFetchPrice(); err != nil {
		return err
	}
	cfg := map[string]json.RawMessage{}
	if raw := t.PluginsRaw[webFetchModule]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("plugins: %s: %v", webFetchModule, err)
		}
	}
	if _, ok := cfg["price"]; ok {
		return fmt.Errorf("web_fetch_price: the %s plugin's price is set too; set one of them", webFetchModule)
	}
	cfg["price"], _ = json.Marshal(t.WebFetchPrice) // a string always marshals
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if t.PluginsRaw == nil {
		t.PluginsRaw = caddy.ModuleMap{}
	}
	t.PluginsRaw[webFetchModule] = raw
	return nil
}
