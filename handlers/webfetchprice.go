package handlers

import (
	"fmt"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// webFetchPrice is the price of one fetch (WebFetchPrice, or the
// default), refusing a value that is not a non-negative amount.
func (t *Tollgate) webFetchPrice() (money.Amount, error) {
	s := t.WebFetchPrice
	if s == "" {
		s = DefaultWebFetchPrice
	}
	a, err := money.ParseAmount(s)
	if err != nil || a < 0 {
		return 0, fmt.Errorf("web_fetch_price: expected a non-negative amount of credits, got %q", t.WebFetchPrice)
	}
	return a, nil
}
