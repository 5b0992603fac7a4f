package dashboard

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// A flash is what a page shows once after the redirect that answers a
// POST (a new key): the POST stores it under a random id, the redirect's
// GET names the id and reads it, once. It is stored sealed with a key
// derived from the session's cookie, which the store never holds: only
// that session can open it, and the store (Redis, a backup) holds no key
// in the clear. It lasts flashTTL; the database drops it then if it was
// never read.

// flashTTL is how long a flash waits for its GET.
const flashTTL = 10 * time.Minute

// flash is what a flash carries: a new key, shown once.
type flash struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// flashRecord is a stored flash.
type flashRecord struct {
	Hash      string    `json:"hash"`    // the id's SHA-256
	Session   string    `json:"session"` // the session's (its cookie's SHA-256)
	Sealed    []byte    `json:"sealed"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Store) loadFlash(_, v []byte) error {
	r := new(flashRecord)
	if err := json.Unmarshal(v, r); err != nil {
		return err
	}
	s.flashes[r.Hash] = r
	return nil
}

// flashExpiry is a flash record's expiry for the database (Kind.Expires).
func flashExpiry(_ string, v []byte) int64 {
	var r struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	if json.Unmarshal(v, &r) != nil || r.ExpiresAt.IsZero() {
		return 0
	}
	return r.ExpiresAt.UnixMilli()
}

// flashAEAD is the cipher of a session's flashes, keyed from its cookie.
func flashAEAD(cookie string) cipher.AEAD {
	k := sha256.Sum256([]byte("tollgate-dashboard-flash\x00" + cookie))
	block, _ := aes.NewCipher(k[:]) // a 32-byte key: no error
	aead, _ := cipher.NewGCM(block)
	return aead
}

// putFlash stores f for the session of cookie and returns its id.
func (s *Store) putFlash(cookie string, f flash) (string, error) {
	plain, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	id, hash := randomToken()
	aead := flashAEAD(cookie)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	t := now().UTC()
	rec := &flashRecord{Hash: hash, Session: hashToken(cookie), Sealed: aead.Seal(nonce, nonce, plain, []byte(hash)),
		ExpiresAt: t.Add(flashTTL)}
	s.k.Lock()
	s.flashes[hash] = rec
	b := s.k.MarkDirty(prefixFlash + hash)
	s.pruneLocked(t)
	s.k.Unlock()
	return id, b.Wait()
}

// errFlashGone: no flash of this session has the id (read already,
// expired, another session's, or never stored).
var errFlashGone = errors.New("dashboard: no such flash")

// takeFlash reads the flash id of the session of cookie and deletes it:
// of several reads, on one replica or several, one gets it.
func (s *Store) takeFlash(cookie, id string) (flash, error) {
	if id == "" || len(id) > 128 {
		return flash{}, errFlashGone
	}
	hash := hashToken(id)
	s.k.RLock()
	rec, ok := s.flashes[hash]
	s.k.RUnlock()
	if !ok && s.claim != nil {
		// Written by another replica whose change has not reached this
		// one yet: the database has it.
		r := new(flashRecord)
		err := s.k.Get(prefixFlash+hash, func(v []byte) error { return json.Unmarshal(v, r) })
		switch {
		case err == nil:
			rec, ok = r, true
		case !errors.Is(err, kernel.ErrNotFound):
			return flash{}, fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
		}
	}
	if !ok || rec.Session != hashToken(cookie) || !now().Before(rec.ExpiresAt) {
		return flash{}, errFlashGone
	}
	if s.claim != nil {
		won, err := s.claim("dashboard-flash-used/"+hash, flashTTL+time.Minute)
		if err != nil {
			return flash{}, fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
		}
		if !won {
			return flash{}, errFlashGone
		}
	}
	s.k.Lock()
	_, mine := s.flashes[hash]
	if s.claim == nil && !mine {
		s.k.Unlock()
		return flash{}, errFlashGone // another request of this replica read it first
	}
	delete(s.flashes, hash)
	b := s.k.MarkDirty(prefixFlash + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return flash{}, err
	}
	nonce, sealed := rec.Sealed, []byte(nil)
	aead := flashAEAD(cookie)
	if len(nonce) < aead.NonceSize() {
		return flash{}, errFlashGone
	}
	nonce, sealed = nonce[:aead.NonceSize()], nonce[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, sealed, []byte(hash))
	if err != nil {
		return flash{}, errFlashGone
	}
	var f flash
	if err := json.Unmarshal(plain, &f); err != nil {
		return flash{}, errFlashGone
	}
	return f, nil
}
