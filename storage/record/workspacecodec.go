package record

import (
	"encoding/binary"
	"math"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// FastWorkspace reads what encoding/json writes for a Workspace without
// budgets or members (most of them; a workspace with either is left to
// encoding/json).
func FastWorkspace(p *codec.Parser, w *Workspace) bool {
	return p.Lit(`{"id":`) && p.Str(&w.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&w.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&w.Name) &&
		p.Lit(`,"slug":`) && p.Str(&w.Slug) &&
		p.Lit(`,"description":`) && p.NullableStr(&w.Description) &&
		p.Lit(`,"created_by":`) && p.NullableStr(&w.CreatedBy) &&
		p.Lit(`,"default_guardrail_id":`) && p.Str(&w.DefaultGuardrailID) &&
		p.Lit(`,"default_image_model":`) && p.NullableStr(&w.DefaultImageModel) &&
		p.Lit(`,"default_provider_sort":`) && p.NullableStr(&w.DefaultProviderSort) &&
		p.Lit(`,"default_text_model":`) && p.NullableStr(&w.DefaultTextModel) &&
		p.Lit(`,"disabled_server_tools":`) && p.Strs(&w.DisabledServerTools) &&
		p.Lit(`,"io_logging_api_key_ids":`) && p.Ints(&w.IOLoggingAPIKeyIDs) &&
		p.Lit(`,"io_logging_sampling_rate":`) && p.Float(&w.IOLoggingSamplingRate) &&
		p.Lit(`,"is_data_discount_logging_enabled":`) && p.Bool(&w.IsDataDiscountLoggingEnabled) &&
		p.Lit(`,"is_observability_broadcast_enabled":`) && p.Bool(&w.IsObservabilityBroadcastEnabled) &&
		p.Lit(`,"is_observability_io_logging_enabled":`) && p.Bool(&w.IsObservabilityIOLoggingEnabled) &&
		p.Lit(`,"include_byok_in_budgets":`) && p.Bool(&w.IncludeBYOKInBudgets) &&
		p.Lit(`,"created_at":`) && p.Time(&w.CreatedAt) &&
		p.Lit(`,"updated_at":`) && p.NullableTime(&w.UpdatedAt) &&
		p.Lit(`}`)
}

// EncodeWorkspace appends a *Workspace's binary form.
func EncodeWorkspace(b []byte, v any) ([]byte, error) {
	w := v.(*Workspace)
	b = codec.AppendBytes(b, w.ID)
	b = codec.AppendBytes(b, w.AccountID)
	b = codec.AppendBytes(b, w.Name)
	b = codec.AppendBytes(b, w.Slug)
	b = codec.AppendOptStr(b, w.Description)
	b = codec.AppendOptStr(b, w.CreatedBy)
	b = codec.AppendBytes(b, w.DefaultGuardrailID)
	b = codec.AppendOptStr(b, w.DefaultImageModel)
	b = codec.AppendOptStr(b, w.DefaultProviderSort)
	b = codec.AppendOptStr(b, w.DefaultTextModel)
	b = codec.AppendBool(b, w.DisabledServerTools != nil)
	b = binary.AppendUvarint(b, uint64(len(w.DisabledServerTools)))
	for _, t := range w.DisabledServerTools {
		b = codec.AppendBytes(b, t)
	}
	b = codec.AppendBool(b, w.IOLoggingAPIKeyIDs != nil)
	b = binary.AppendUvarint(b, uint64(len(w.IOLoggingAPIKeyIDs)))
	for _, id := range w.IOLoggingAPIKeyIDs {
		b = binary.AppendVarint(b, id)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.IOLoggingSamplingRate))
	b = codec.AppendBool(b, w.IsDataDiscountLoggingEnabled)
	b = codec.AppendBool(b, w.IsObservabilityBroadcastEnabled)
	b = codec.AppendBool(b, w.IsObservabilityIOLoggingEnabled)
	b = codec.AppendBool(b, w.IncludeBYOKInBudgets)
	var err error
	b = codec.AppendBinTime(b, w.CreatedAt, &err)
	b = codec.AppendBool(b, w.UpdatedAt != nil)
	if w.UpdatedAt != nil {
		b = codec.AppendBinTime(b, *w.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Budgets)))
	for iv, bu := range w.Budgets {
		b = codec.AppendBytes(b, string(iv))
		b = codec.AppendBytes(b, bu.ID)
		b = codec.AppendBytes(b, string(bu.Interval))
		b = binary.AppendVarint(b, int64(bu.Limit))
		b = codec.AppendBinTime(b, bu.CreatedAt, &err)
		b = codec.AppendBinTime(b, bu.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Members)))
	for id, m := range w.Members {
		b = codec.AppendBytes(b, id)
		b = codec.AppendBytes(b, m.UserID)
		b = codec.AppendBytes(b, string(m.Role))
		b = codec.AppendBinTime(b, m.CreatedAt, &err)
	}
	return b, err
}

// DecodeWorkspace reads what EncodeWorkspace appends.
func DecodeWorkspace(v []byte, w *Workspace, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	w.ID = p.Str()
	w.AccountID = p.Str()
	w.Name = p.Str()
	w.Slug = p.Str()
	w.Description = p.OptStr()
	w.CreatedBy = p.OptStr()
	w.DefaultGuardrailID = p.Str()
	w.DefaultImageModel = p.OptStr()
	w.DefaultProviderSort = p.OptStr()
	w.DefaultTextModel = p.OptStr()
	if some := p.Bool(); some {
		w.DisabledServerTools = make([]string, p.Count())
		for i := range w.DisabledServerTools {
			w.DisabledServerTools[i] = p.Str()
		}
	} else if p.Count() != 0 {
		p.Fail()
	}
	if some := p.Bool(); some {
		w.IOLoggingAPIKeyIDs = make([]int64, p.Count())
		for i := range w.IOLoggingAPIKeyIDs {
			w.IOLoggingAPIKeyIDs[i] = p.Varint()
		}
	} else if p.Count() != 0 {
		p.Fail()
	}
	w.IOLoggingSamplingRate = math.Float64frombits(p.Uint64())
	w.IsDataDiscountLoggingEnabled = p.Bool()
	w.IsObservabilityBroadcastEnabled = p.Bool()
	w.IsObservabilityIOLoggingEnabled = p.Bool()
	w.IncludeBYOKInBudgets = p.Bool()
	w.CreatedAt = p.Time()
	if p.Bool() {
		t := p.Time()
		w.UpdatedAt = &t
	}
	if n := p.Count(); n > 0 {
		w.Budgets = make(map[BudgetInterval]*WorkspaceBudget, n)
		for range n {
			iv := BudgetInterval(p.Str())
			w.Budgets[iv] = &WorkspaceBudget{ID: p.Str(), Interval: BudgetInterval(p.Str()), Limit: money.Amount(p.Varint()),
				CreatedAt: p.Time(), UpdatedAt: p.Time()}
		}
	}
	if n := p.Count(); n > 0 {
		w.Members = make(map[string]*WorkspaceMember, n)
		for range n {
			id := p.Str()
			w.Members[id] = &WorkspaceMember{UserID: p.Str(), Role: MemberRole(p.Str()), CreatedAt: p.Time()}
		}
	}
	return p.Done(true)
}
