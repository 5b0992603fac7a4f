package record

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Generation is the record of one inference request. Credits is the part
// of a BYOK generation's Cost paid in credits (a gateway-side web search).
//
//codec:json=Generation sums=AccountID,KeyHash,WorkspaceID,Model,Provider,PromptTokens,CompletionTokens,Cost,BYOK,Credits,Status,LatencyMS,User,CreatedAt,ContentFlags
type Generation struct {
	ID            string `json:"id"`
	AccountID     string `json:"account_id"`
	KeyHash       string `json:"key_hash"`
	WorkspaceID   string `json:"workspace_id,omitempty"`
	Model         string `json:"model"`
	Provider      string `json:"provider"`
	UpstreamModel string `json:"upstream_model,omitempty"`
	// UpstreamID is the provider's id of the answer (chatcmpl-..., resp_...).
	UpstreamID string `json:"upstream_id,omitempty"`
	// UpstreamIDHidden: the client never saw UpstreamID (a chat answer
	// carries the generation id instead), so no lookup by it is indexed:
	// one write less per request.
	UpstreamIDHidden bool  `json:"-"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Of PromptTokens, those the provider read from or wrote to its
	// prompt cache, charged at the model's cache prices.
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// Of CacheWriteTokens, those kept for an hour (input_cache_write_1h).
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
	// CacheDiscount is what the cache's reads and writes cost less than
	// at the prompt price (negative when writes cost more).
	CacheDiscount  money.Amount `json:"cache_discount,omitempty"`
	SearchResults  int64        `json:"search_results,omitempty"`
	Cost           money.Amount `json:"cost"`
	BYOK           bool         `json:"byok,omitempty"`
	Credits        money.Amount `json:"credits,omitempty"`
	Status         string       `json:"status"` // completed, incomplete, aborted, error
	Streamed       bool         `json:"streamed"`
	FinishReason   string       `json:"finish_reason,omitempty"`
	UsageEstimated bool         `json:"usage_estimated,omitempty"`
	LatencyMS      int64        `json:"latency_ms"`
	User           string       `json:"user,omitempty"`
	CreatedAt      time.Time    `json:"created_at"`
	// ContentFlags are the flagging content filters that matched the
	// request (never the text they matched).
	ContentFlags []ContentFlag `json:"content_flags,omitempty"`
	// Attempts are the provider calls, in order, the last the one that
	// answered; Routing says how the endpoints were ranked.
	Attempts []ProviderAttempt `json:"attempts,omitempty"`
	Routing  string            `json:"routing,omitempty"`
	// SessionID is the request's session_id (or x-session-id header),
	// which groups a conversation's generations.
	SessionID string `json:"session_id,omitempty"`
	// Router is the auto model the request named, which chose Model.
	Router string `json:"router,omitempty"`
	// PresetID is the id of the preset the request named, if any.
	PresetID string `json:"preset_id,omitempty"`
	// ResponseCacheSourceID is, for an answer served from the response
	// cache, the generation whose answer it replayed.
	ResponseCacheSourceID string `json:"response_cache_source_id,omitempty"`
}

// ContentFlag is a flagging content filter that matched a request: its
// guardrail, its label and, for a builtin, its slug.
type ContentFlag struct {
	GuardrailID string `json:"guardrail_id"`
	Label       string `json:"label"`
	Builtin     string `json:"builtin,omitempty"`
}

// ProviderAttempt is one provider call of a generation.
type ProviderAttempt struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Status    int    `json:"status"` // 0: no answer (unreachable, broken)
	LatencyMS int64  `json:"latency_ms"`
	BYOK      bool   `json:"byok,omitempty"`
}

// NewGenerationID returns an id that sorts by creation time.
func NewGenerationID(t time.Time) string {
	var b [8]byte
	g := idRand.Get().(*mrand.ChaCha8)
	binary.LittleEndian.PutUint64(b[:], g.Uint64())
	idRand.Put(g)
	id := make([]byte, 0, 30)
	id = append(id, "gen-"...)
	var msb [20]byte
	ms := strconv.AppendInt(msb[:0], t.UnixMilli(), 10)
	for range 13 - len(ms) {
		id = append(id, '0')
	}
	id = append(id, ms...)
	id = append(id, '-')
	return string(hex.AppendEncode(id, b[:6]))
}

// idRand holds the generators of generation ids' random part: ChaCha8,
// cryptographically strong, each seeded once from crypto/rand, so that ids
// stay unguessable without a getrandom system call per request (0.4 µs of
// CPU in profiles of bench/run.sh's chain).
var idRand = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return mrand.NewChaCha8(seed)
}}

// GenerationDims are the dimensions of a generation the analytics count
// it by, as stored with feedback too.
type GenerationDims struct {
	KeyHash     string    `json:"key_hash"`
	Model       string    `json:"model"`
	Provider    string    `json:"provider"`
	User        string    `json:"user,omitempty"`
	WorkspaceID string    `json:"workspace_id,omitempty"`
	Status      string    `json:"status"`
	BYOK        bool      `json:"byok,omitempty"`
	CreatedAt   time.Time `json:"generation_created_at"`
}

// DimsOf is g's dimensions.
func DimsOf(g *Generation) GenerationDims {
	return GenerationDims{KeyHash: g.KeyHash, Model: g.Model, Provider: g.Provider, User: g.User,
		WorkspaceID: g.WorkspaceID, Status: g.Status, BYOK: g.BYOK, CreatedAt: g.CreatedAt}
}
