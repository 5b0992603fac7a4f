package record

import "github.com/tollgate-dev/caddy-tollgate/storage/codec"

// FastAccount reads what AccountJSON writes.
func FastAccount(p *codec.Parser, a *Account) bool {
	var kind, billing string
	ok := p.Lit(`{"id":`) && p.Str(&a.ID) &&
		p.Lit(`,"name":`) && p.Str(&a.Name) &&
		p.Lit(`,"kind":`) && p.Str(&kind) &&
		p.Lit(`,"billing":`) && p.Str(&billing)
	a.Kind, a.Billing = AccountKind(kind), Billing(billing)
	if ok && p.Lit(`,"owner_user_id":`) {
		ok = p.Str(&a.OwnerUserID)
	}
	var purchases int64
	ok = ok && p.Lit(`,"default_workspace_id":`) && p.Str(&a.DefaultWorkspaceID) &&
		p.Lit(`,"credits_purchased":`) && p.Amount(&a.CreditsPurchased) &&
		p.Lit(`,"purchases":`) && p.Int(&purchases) && purchases == int64(int(purchases)) &&
		p.Lit(`,"usage":`) && p.Amount(&a.Usage) &&
		p.Lit(`,"byok_usage":`) && p.Amount(&a.BYOKUsage) &&
		p.Lit(`,"rate_limit_exempt":`) && p.Bool(&a.RateLimitExempt) &&
		p.Lit(`,"filtered_model_catalog":`) && p.Bool(&a.FilteredModelCatalog) &&
		p.Lit(`,"free_model_requests":`) && p.Windowed(&a.FreeModelRequests) &&
		p.Lit(`,"free_model_minute":`) && p.Windowed(&a.FreeModelMinute) &&
		p.Lit(`,"created_at":`) && p.Time(&a.CreatedAt) &&
		p.Lit(`,"updated_at":`) && p.Time(&a.UpdatedAt) &&
		p.Lit(`}`)
	a.Purchases = int(purchases)
	return ok
}

// FastPurchase reads what encoding/json writes for a Purchase.
func FastPurchase(p *codec.Parser, r *Purchase) bool {
	ok := p.Lit(`{"id":`) && p.Str(&r.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&r.AccountID) &&
		p.Lit(`,"amount":`) && p.Amount(&r.Amount)
	if ok && p.Lit(`,"note":`) {
		ok = p.Str(&r.Note)
	}
	return ok && p.Lit(`,"created_at":`) && p.Time(&r.CreatedAt) && p.Lit(`}`)
}

// FastMgmtKey reads what encoding/json writes for a ManagementKey.
func FastMgmtKey(p *codec.Parser, m *ManagementKey) bool {
	return p.Lit(`{"hash":`) && p.Str(&m.Hash) &&
		p.Lit(`,"account_id":`) && p.Str(&m.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&m.Name) &&
		p.Lit(`,"label":`) && p.Str(&m.Label) &&
		p.Lit(`,"creator_user_id":`) && p.NullableStr(&m.CreatorUserID) &&
		p.Lit(`,"created_at":`) && p.Time(&m.CreatedAt) &&
		p.Lit(`,"expires_at":`) && p.NullableTime(&m.ExpiresAt) &&
		p.Lit(`}`)
}
