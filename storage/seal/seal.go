// Package seal encrypts the store's secrets at rest (BYOK credentials,
// destinations' and private endpoints' settings), each bound to its
// record.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the size of a Sealer's key: AES-256.
const KeySize = 32

// sealVersion is the first byte of every sealed value, so that the format
// (or the key, on rotation) can change without guessing.
const sealVersion byte = 1

// ErrUnseal is returned by Open for a value that was tampered with, sealed
// under another key or for another record.
var ErrUnseal = errors.New("sealed value cannot be opened: wrong key, wrong record or tampered")

// Sealer encrypts secrets at rest with AES-256-GCM. A sealed value is
// version || nonce || ciphertext+tag; the nonce is random per seal, and the
// caller's additional data (the record id) binds a value to its record, so
// that a sealed secret copied into another record does not open.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for a 32-byte key. The key is not kept other
// than inside the cipher.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext bound to ad.
func (s *Sealer) Seal(plaintext, ad []byte) []byte {
	ns := s.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1 : 1+ns]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return s.aead.Seal(out, out[1:1+ns], plaintext, ad)
}

// Open decrypts a value sealed with the same key and ad.
func (s *Sealer) Open(sealed, ad []byte) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(sealed) < 1+ns+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrUnseal
	}
	pt, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], ad)
	if err != nil {
		return nil, ErrUnseal
	}
	return pt, nil
}

// Mask is the public label of a provider key: a few characters of
// each end of a long key, fewer of a short one, so that the label never
// gives away a meaningful part of the key.
func Mask(secret string) string {
	r := []rune(secret)
	switch n := len(r); {
	case n >= 16:
		return string(r[:3]) + "..." + string(r[n-4:])
	case n >= 8:
		return "..." + string(r[n-2:])
	}
	return "..."
}
