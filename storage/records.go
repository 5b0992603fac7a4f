package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The account and key records are package record's.
type (
	AccountKind   = record.AccountKind
	Billing       = record.Billing
	Account       = record.Account
	Purchase      = record.Purchase
	ManagementKey = record.ManagementKey
	APIKey        = record.APIKey
	ConnectApp    = record.ConnectApp
	RateLimits    = record.RateLimits
)

// Account kinds and billing modes.
const (
	AccountPersonal     = record.AccountPersonal
	AccountOrganization = record.AccountOrganization

	BillingPrepaid      = record.BillingPrepaid
	BillingEnterprise   = record.BillingEnterprise
	BillingSubscription = record.BillingSubscription
	BillingInvoiced     = record.BillingInvoiced
)

// Key string prefixes make a leaked key recognizable to secret scanners.
const (
	APIKeyPrefix        = record.APIKeyPrefix
	ManagementKeyPrefix = record.ManagementKeyPrefix
)

// ParseBilling accepts the billing names.
func ParseBilling(s string) (Billing, bool) { return record.ParseBilling(s) }

// newSecret returns a fresh key string (256 random bits) with its public hash
// and masked label.
func newSecret(prefix string) (secret, hash, label string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	body := hex.EncodeToString(b[:])
	secret = prefix + body
	return secret, HashSecret(secret), prefix + body[:3] + "..." + body[len(body)-3:]
}

// HashSecret is the SHA-256 digest of a key string in hex: the only form in
// which keys are stored, and the public `hash` identifier.
func HashSecret(secret string) string {
	// Hashed in place and encoded into one buffer: a secret is longer than
	// the stack copy []byte(secret) would get, and EncodeToString
	// allocates twice; this runs on every request.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(secret), len(secret)))
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return string(hexSum[:])
}

// newID returns a random identifier with a type prefix, e.g. "org_5f0c...".
func newID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}

// RateLimitNames are the rate limits' JSON names, in order.
var RateLimitNames = record.RateLimitNames

// MaxRateLimit bounds every rate limit.
const MaxRateLimit = record.MaxRateLimit
