package storage

import "github.com/tollgate-dev/caddy-tollgate/storage/seal"

// Secrets at rest are sealed by package seal.
type Sealer = seal.Sealer

// SealerKeySize is the size of a Sealer's key: AES-256.
const SealerKeySize = seal.KeySize

// ErrUnseal is returned by Open for a value that was tampered with, sealed
// under another key or for another record.
var ErrUnseal = seal.ErrUnseal

// NewSealer returns a Sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) { return seal.New(key) }
