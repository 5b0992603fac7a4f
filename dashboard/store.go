package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// The dashboard's records are a domain store of package storage kept
// here, with the service, as SCIM's is: in memory under the kernel's one
// lock, written through the kernel, so that replicas on one Redis share
// them (a change is applied alone on the other replicas: the kinds have a
// Remove).
//
//	ds/<session hash>   a session (the cookie's SHA-256; the cookie itself is stored nowhere)
//	dl/<link hash>      an unused sign-in link (the token's SHA-256)
//	df/<flash hash>     what a page shows once after a redirect (a new key)
const (
	prefixSession = "ds/"
	prefixLink    = "dl/"
	prefixFlash   = "df/"
	domainName    = "dashboard"
)

// now is the store's and the handler's clock; tests move it.
var now = time.Now

// Errors of the sign-in links, each with its own page.
var (
	// ErrLinkInvalid: no link has this token (forged, or already used).
	ErrLinkInvalid = errors.New("this sign-in link is not valid: it was already used, or it was never issued")
	// ErrLinkExpired: the link was issued but its time is over.
	ErrLinkExpired = errors.New("this sign-in link has expired")
)

func init() {
	storage.RegisterDomain(storage.DomainInfo{
		Name: domainName,
		New:  func(st *storage.Store) storage.Domain { return newStore(st) },
	})
}

// Store keeps the dashboard's sessions and unused sign-in links.
type Store struct {
	k        *kernel.Kernel
	st       *storage.Store
	org      storage.Locked
	sessions map[string]*sessionRecord // by hash
	links    map[string]*linkRecord    // by hash
	flashes  map[string]*flashRecord   // by hash
	// claim, on the shared backend, makes a link's or a flash's use
	// atomic across replicas (the first to claim name owns it); nil on
	// Badger, where the kernel's lock is.
	claim func(name string, ttl time.Duration) (bool, error)
	// recent indexes the latest generations (recentOf).
	recentOnce sync.Once
	recent     *recentIndex
}

// StoreOf returns the dashboard store of st.
func StoreOf(st *storage.Store) *Store {
	s, _ := st.Domain(domainName).(*Store)
	return s
}

func newStore(st *storage.Store) *Store {
	s := &Store{k: st.Kernel(), st: st, org: st.Locked(), sessions: map[string]*sessionRecord{}, links: map[string]*linkRecord{},
		flashes: map[string]*flashRecord{}}
	// A deactivated member's sessions end with the deactivation, in its
	// batch, on every replica.
	st.OnMemberDeactivated(func(accountID, memberID string) { s.endMemberSessionsLocked(accountID, memberID) })
	if c, ok := st.Kernel().Claimer(); ok {
		s.claim = c.Claim
	}
	return s
}

// Kinds are the sessions' and the links' (storage.Domain).
func (s *Store) Kinds() []kernel.Kind {
	return []kernel.Kind{
		{Prefix: prefixSession, Load: s.loadSession, Reset: func() { clear(s.sessions) },
			Snapshot: func(key string) any { return snapshotOf(s.sessions, key[len(prefixSession):]) },
			Remove:   func(key string) { delete(s.sessions, key[len(prefixSession):]) }},
		{Prefix: prefixLink, Load: s.loadLink, Reset: func() { clear(s.links) },
			Snapshot: func(key string) any { return snapshotOf(s.links, key[len(prefixLink):]) },
			Remove:   func(key string) { delete(s.links, key[len(prefixLink):]) }},
		{Prefix: prefixFlash, Load: s.loadFlash, Reset: func() { clear(s.flashes) },
			Snapshot: func(key string) any { return snapshotOf(s.flashes, key[len(prefixFlash):]) },
			Remove:   func(key string) { delete(s.flashes, key[len(prefixFlash):]) },
			Expires:  flashExpiry},
	}
}

func snapshotOf[T any](m map[string]*T, id string) any {
	if v, ok := m[id]; ok {
		return *v
	}
	return nil
}

func (s *Store) loadSession(_, v []byte) error {
	r := new(sessionRecord)
	if err := json.Unmarshal(v, r); err != nil {
		return err
	}
	s.sessions[r.Hash] = r
	return nil
}

func (s *Store) loadLink(_, v []byte) error {
	r := new(linkRecord)
	if err := json.Unmarshal(v, r); err != nil {
		return err
	}
	s.links[r.Hash] = r
	return nil
}

// sessionRecord is a stored session: who, and until when.
type sessionRecord struct {
	Hash      string    `json:"hash"`
	Principal Principal `json:"principal"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// linkRecord is an issued, unused sign-in link.
type linkRecord struct {
	Hash      string    `json:"hash"`
	Principal Principal `json:"principal"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Link is an issued sign-in link, as the operator API answers it.
type Link struct {
	Principal Principal `json:"principal"`
	ExpiresAt time.Time `json:"expires_at"`
}

// randomToken returns 256 random bits, base64url, and their hash.
func randomToken() (token, hash string) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, hashToken(token)
}

// hashToken is what the store keeps of a cookie or a link token.
func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// LinkPrefix starts every sign-in link token, so that one is recognised
// in a secret scanner or a support ticket.
const LinkPrefix = "tgl_"

// MaxLinkTTL bounds a sign-in link's life.
const MaxLinkTTL = 24 * time.Hour

// checkPrincipal validates who a link or session signs in: an existing
// account, and for an organization's member an active member of it; an
// operator alone needs no account.
func (s *Store) checkPrincipal(p *Principal) error {
	if p.AccountID == "" {
		if !p.Operator {
			return fmt.Errorf("%w: account: required (or an operator link)", storage.ErrInvalid)
		}
		if p.MemberID != "" {
			return fmt.Errorf("%w: member: needs an account", storage.ErrInvalid)
		}
		p.Role = RoleOperator
		return nil
	}
	acct, ok := s.org.Account(p.AccountID)
	if !ok {
		return fmt.Errorf("%w: account %s", storage.ErrNotFound, p.AccountID)
	}
	switch {
	case p.MemberID != "":
		if acct.Kind != storage.AccountOrganization {
			return fmt.Errorf("%w: member: %s is a personal account, which has no members", storage.ErrInvalid, p.AccountID)
		}
		m, ok := s.org.Member(p.AccountID, p.MemberID)
		if !ok || !m.Active {
			return fmt.Errorf("%w: member %s of %s", storage.ErrNotFound, p.MemberID, p.AccountID)
		}
		p.Role = RoleMember
		if m.Role == storage.RoleAdmin {
			p.Role = RoleAdmin
		}
	default:
		// The account's owner: a personal account's person, or an
		// organization's bootstrap (the operator speaking for it).
		p.Role = RoleOwner
	}
	return nil
}

// IssueLink stores a one-time sign-in link for p, valid for ttl (at most
// MaxLinkTTL), and returns its token, which exists nowhere else.
func (s *Store) IssueLink(p Principal, ttl time.Duration) (string, Link, error) {
	if ttl <= 0 || ttl > MaxLinkTTL {
		return "", Link{}, fmt.Errorf("%w: expires_in: must be positive and at most %s", storage.ErrInvalid, MaxLinkTTL)
	}
	token, _ := randomToken()
	token = LinkPrefix + token
	hash := hashToken(token)
	s.k.Lock()
	if err := s.checkPrincipal(&p); err != nil {
		s.k.Unlock()
		return "", Link{}, err
	}
	p.Method = "link"
	t := now().UTC()
	rec := &linkRecord{Hash: hash, Principal: p, CreatedAt: t, ExpiresAt: t.Add(ttl)}
	s.links[hash] = rec
	b := s.k.MarkDirty(prefixLink + hash)
	s.pruneLocked(t)
	s.k.Unlock()
	return token, Link{Principal: p, ExpiresAt: rec.ExpiresAt}, b.Wait()
}

// ConsumeLink uses a sign-in link: it returns whom the link signs in and
// deletes it, once. ErrLinkInvalid for a token that matches no unused
// link, ErrLinkExpired for an expired one (deleted too). Of several
// requests with one token, on one replica or several sharing Redis,
// exactly one gets the principal.
func (s *Store) ConsumeLink(token string) (Principal, error) {
	if !strings.HasPrefix(token, LinkPrefix) || len(token) > 128 {
		return Principal{}, ErrLinkInvalid
	}
	hash := hashToken(token)
	s.k.Lock()
	rec, ok := s.links[hash]
	if !ok {
		s.k.Unlock()
		return Principal{}, ErrLinkInvalid
	}
	if s.claim != nil {
		// Another replica may hold the same link in memory: the first
		// to set the claim in Redis owns it. The lock is released for
		// the round trip; a second request here finds the claim taken.
		s.k.Unlock()
		won, err := s.claim("dashboard-link-used/"+hash, MaxLinkTTL+time.Hour)
		if err != nil {
			return Principal{}, fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
		}
		s.k.Lock()
		if !won {
			s.k.Unlock()
			return Principal{}, ErrLinkInvalid
		}
	}
	delete(s.links, hash)
	b := s.k.MarkDirty(prefixLink + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return Principal{}, err
	}
	if !now().Before(rec.ExpiresAt) {
		return Principal{}, ErrLinkExpired
	}
	p := rec.Principal
	// The member may have been deactivated, or made admin, since.
	s.k.RLock()
	err := s.checkPrincipal(&p)
	s.k.RUnlock()
	if err != nil {
		return Principal{}, ErrLinkInvalid
	}
	return p, nil
}

// createSession stores a new session for p and returns its cookie value.
func (s *Store) createSession(p Principal, ttl time.Duration) (string, sessionRecord, error) {
	token, hash := randomToken()
	s.k.Lock()
	if err := s.checkPrincipal(&p); err != nil {
		s.k.Unlock()
		return "", sessionRecord{}, err
	}
	t := now().UTC()
	rec := &sessionRecord{Hash: hash, Principal: p, CreatedAt: t, ExpiresAt: t.Add(ttl)}
	s.sessions[hash] = rec
	b := s.k.MarkDirty(prefixSession + hash)
	s.pruneLocked(t)
	s.k.Unlock()
	return token, *rec, b.Wait()
}

// session returns the live session of a cookie value.
func (s *Store) session(token string) (sessionRecord, bool) {
	if token == "" || len(token) > 128 {
		return sessionRecord{}, false
	}
	hash := hashToken(token)
	s.k.RLock()
	rec, ok := s.sessions[hash]
	s.k.RUnlock()
	if !ok || !now().Before(rec.ExpiresAt) {
		return sessionRecord{}, false
	}
	return *rec, true
}

// liveSession returns the live session of a cookie value with its rights
// as they are now: the member's record (role, active) is read again at
// every request, so that a demotion takes effect at the next request and a
// deactivation, or the account's or member's removal, ends the session
// (and every other session of the member). The session record keeps only
// who signed in; what they may do follows the member.
func (s *Store) liveSession(token string, logger func(error)) (sessionRecord, bool) {
	rec, ok := s.session(token)
	if !ok {
		return sessionRecord{}, false
	}
	p := &rec.Principal
	if p.AccountID == "" {
		return rec, true // the operator alone: no record to follow
	}
	if _, ok := s.st.Account(p.AccountID); !ok {
		// The session ends here either way; a failed delete only leaves a
		// record that can no longer sign anyone in, and the log says so.
		if err := s.deleteSession(token); err != nil {
			logger(err)
		}
		return sessionRecord{}, false
	}
	if p.MemberID == "" {
		return rec, true
	}
	m, ok, err := s.st.CurrentMember(p.AccountID, p.MemberID)
	if err != nil {
		// The shared database did not answer: memory's record decides,
		// and changes are refused meanwhile (the handler checks the
		// database before any state-changing request).
		logger(err)
	}
	if !ok || !m.Active {
		if err := s.endMemberSessions(p.AccountID, p.MemberID); err != nil {
			logger(err)
		}
		return sessionRecord{}, false
	}
	p.Role = RoleMember
	if m.Role == storage.RoleAdmin {
		p.Role = RoleAdmin
	}
	return rec, true
}

// endMemberSessions ends every session of a member.
func (s *Store) endMemberSessions(accountID, memberID string) error {
	s.k.Lock()
	b := s.endMemberSessionsLocked(accountID, memberID)
	s.k.Unlock()
	if b == nil {
		return nil
	}
	return b.Wait()
}

// endMemberSessionsLocked deletes every session of a member; nil when it
// had none. Callers hold Lock.
func (s *Store) endMemberSessionsLocked(accountID, memberID string) *kernel.Batch {
	var b *kernel.Batch
	for h, r := range s.sessions {
		if r.Principal.AccountID == accountID && r.Principal.MemberID == memberID {
			delete(s.sessions, h)
			b = s.k.MarkDirty(prefixSession + h)
		}
	}
	return b
}

// deleteSession ends the session of a cookie value (sign-out, rotation);
// no error when there is none.
func (s *Store) deleteSession(token string) error {
	if token == "" || len(token) > 128 {
		return nil
	}
	hash := hashToken(token)
	s.k.Lock()
	if _, ok := s.sessions[hash]; !ok {
		s.k.Unlock()
		return nil
	}
	delete(s.sessions, hash)
	b := s.k.MarkDirty(prefixSession + hash)
	s.k.Unlock()
	return b.Wait()
}

// pruneLocked deletes expired sessions and links, so that they do not
// pile up; their deletion commits with the caller's batch. Callers hold
// Lock.
func (s *Store) pruneLocked(t time.Time) {
	for h, r := range s.sessions {
		if !t.Before(r.ExpiresAt) {
			delete(s.sessions, h)
			s.k.MarkDirty(prefixSession + h)
		}
	}
	for h, r := range s.flashes {
		if !t.Before(r.ExpiresAt) {
			delete(s.flashes, h)
			s.k.MarkDirty(prefixFlash + h)
		}
	}
	for h, r := range s.links {
		// An expired link is kept an hour, so that its page says
		// "expired" rather than "not valid".
		if !t.Before(r.ExpiresAt.Add(time.Hour)) {
			delete(s.links, h)
			s.k.MarkDirty(prefixLink + h)
		}
	}
}
