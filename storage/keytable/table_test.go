package keytable

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// hashSecret is a key's hash as the store makes it: SHA-256 in hex.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func tableKey(r *rand.Rand, i int) record.APIKey {
	secret := fmt.Sprintf("%s%016x%016x", record.APIKeyPrefix, r.Uint64(), r.Uint64())
	hash, label := hashSecret(secret), secret[:12]+"..."
	if i%17 == 0 {
		hash = fmt.Sprintf("odd-%d", i) // a hash written by hand
	}
	t := time.Date(2026, 11, 25, 4, 0, 0, int(r.Int32N(1e9)), time.UTC)
	k := record.APIKey{
		Hash: hash, AccountID: fmt.Sprintf("acct-%d", i%7), WorkspaceID: fmt.Sprintf("ws-%d", i%3),
		Name: fmt.Sprintf("key %d", i), Label: label, Disabled: i%5 == 0,
		LimitReset:         []money.Interval{money.IntervalNone, money.IntervalDaily, money.IntervalMonthly}[i%3],
		IncludeBYOKInLimit: i%2 == 0, CreatedAt: t, UpdatedAt: t.Add(time.Second), Seq: uint64(i + 1),
		Usage:     money.UsageCounters{Total: money.Amount(i), Daily: money.Windowed{Period: 3, Value: money.Amount(i)}},
		BYOKUsage: money.UsageCounters{Monthly: money.Windowed{Period: 9, Value: 4}},
	}
	if i%3 == 0 {
		l := money.Amount(r.Int64N(1e9))
		k.Limit = &l
		k.LimitByAdmin = i%9 == 0
	}
	k.DisabledByAdmin = i%10 == 0
	if i%4 == 0 {
		c := fmt.Sprintf("user-%d", i%11)
		k.CreatorUserID = &c
	}
	if i%6 == 0 {
		e := t.AddDate(1, 0, 0)
		k.ExpiresAt = &e
	}
	if i%9 == 0 {
		x := "ext"
		k.ExternalUser = &x
		k.Connect = &record.ConnectApp{ID: int64(i), Name: "app", Origin: "https://app.example"}
	}
	if i%4 == 0 {
		k.RateLimits = &record.RateLimits{RequestsPerMinute: int64(i) + 1, RequestsPerDay: 2, PromptTokensPerMinute: 3, CompletionTokensPerMinute: 4, ConcurrentRequests: 5}
	}
	return k
}

// TestKeyTableMatchesMap runs random puts, replacements, counter updates
// and removals on the table and on a map of records, and compares them.
func TestKeyTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tab := New()
	ref := map[string]record.APIKey{}
	var hashes []string
	for i := range 20000 {
		switch op := r.IntN(10); {
		case op < 5 || len(hashes) == 0:
			k := tableKey(r, i)
			tab.Put(&k)
			if _, ok := ref[k.Hash]; !ok {
				hashes = append(hashes, k.Hash)
			}
			ref[k.Hash] = k
		case op < 7: // rewrite a key: the arena fills with dead records
			h := hashes[r.IntN(len(hashes))]
			k := ref[h]
			k.Name = fmt.Sprintf("renamed %d with a longer name to waste arena space", i)
			k.Disabled = !k.Disabled
			tab.Put(&k)
			ref[h] = k
		case op < 8:
			h := hashes[r.IntN(len(hashes))]
			k := ref[h]
			k.Usage.Total += 7
			if !tab.SetCounters(h, k.Usage, k.BYOKUsage) {
				t.Fatalf("setCounters(%q) found no key", h)
			}
			ref[h] = k
		default:
			j := r.IntN(len(hashes))
			h := hashes[j]
			hashes[j] = hashes[len(hashes)-1]
			hashes = hashes[:len(hashes)-1]
			if _, acct, seq, ok := tab.Remove(h); !ok || acct != ref[h].AccountID || seq != ref[h].Seq {
				t.Fatalf("remove(%q) = %q %d %v", h, acct, seq, ok)
			}
			delete(ref, h)
			if tab.Has(h) {
				t.Fatalf("removed key %q still there", h)
			}
		}
	}
	if tab.Len() != len(ref) {
		t.Fatalf("table holds %d keys, want %d", tab.Len(), len(ref))
	}
	for h, want := range ref {
		got, ok := tab.Get(h)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("get(%q):\n got %+v\nwant %+v", h, got, want)
		}
		if a, _ := tab.AccountOf(h); a != want.AccountID {
			t.Fatalf("accountOf(%q) = %q, want %q", h, a, want.AccountID)
		}
	}
	n := 0
	tab.Each(func(slot uint32) bool {
		k := tab.At(slot)
		if !reflect.DeepEqual(k, ref[k.Hash]) || tab.SlotHash(slot) != k.Hash {
			t.Fatalf("slot %d: %+v, want %+v", slot, k, ref[k.Hash])
		}
		n++
		return true
	})
	if n != len(ref) {
		t.Fatalf("each visited %d keys, want %d", n, len(ref))
	}
	if tab.Has("0000000000000000000000000000000000000000000000000000000000000000") || tab.Has("nope") {
		t.Fatal("an unknown hash was found")
	}
}

// TestKeyTableMaterializedRecordsStay: a record read before its key
// changed keeps its values (the arena's bytes are never rewritten).
func TestKeyTableMaterializedRecordsStay(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tab := New()
	k := tableKey(r, 1)
	tab.Put(&k)
	before, _ := tab.Get(k.Hash)
	want := before.Name
	for i := range 100000 { // enough rewrites to compact the arena many times
		c := k
		c.Name = fmt.Sprintf("name %d %0100d", i, i)
		tab.Put(&c)
	}
	if before.Name != want {
		t.Fatalf("a materialized name changed to %q", before.Name)
	}
	if len(tab.cold) > 4<<20 {
		t.Fatalf("the arena holds %d bytes for one key: not compacted", len(tab.cold))
	}
}

// BenchmarkKeyTableGet is the per-request materialization of a key.
func BenchmarkKeyTableGet(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	tab := New()
	var hashes []string
	for i := range 100000 {
		k := tableKey(r, i*17+1)
		tab.Put(&k)
		hashes = append(hashes, k.Hash)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var k record.APIKey
	for i := 0; b.Loop(); i++ {
		// As authentication reads it: into a record the caller holds.
		h := hashes[i%len(hashes)]
		slot, ok := tab.Lookup(h)
		if !ok {
			b.Fatal("missing")
		}
		tab.Read(slot, h, &k)
	}
}

// TestKeyTableSortedLoadProbesShort: a load inserts keys in their hashes'
// order (the database's); the index must not pile them up, which would
// make each insert walk a long run of full buckets.
func TestKeyTableSortedLoadProbesShort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	hashes := make([]string, 50_000)
	for i := range hashes {
		hashes[i] = fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
	}
	slices.Sort(hashes)
	tb := New()
	probes := 0
	for _, h := range hashes {
		id, _ := keyID(h)
		mask := len(tb.index) - 1
		for i := bucket(&id, len(tb.index)); tb.index[i] != 0; i = (i + 1) & mask {
			probes++
		}
		tb.Put(&record.APIKey{Hash: h, AccountID: "a"})
	}
	if avg := float64(probes) / float64(len(hashes)); avg > 4 {
		t.Fatalf("inserting keys in their hashes' order probed %.1f full buckets a key", avg)
	}
}

// hexDigit is a lowercase hex digit's value; 0xff for any other byte.
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()

// keyIDByTable is keyID one digit at a time from hexDigit, the reference
// for its word-at-a-time decoding.
func keyIDByTable(hash string) (id [32]byte, odd bool) {
	if len(hash) == 64 {
		var bad byte
		for i := range id {
			hi, lo := hexDigit[hash[2*i]], hexDigit[hash[2*i+1]]
			bad |= hi | lo
			id[i] = hi<<4 | lo
		}
		if bad < 16 {
			return id, false
		}
	}
	return sha256.Sum256([]byte("odd key hash:" + hash)), true
}

// TestKeyIDMatchesTable: keyID decodes as the table does, and calls the
// same hashes odd, for every byte value at every place of a hash (over
// three hashes), every pair of byte values at three pairs of places of a
// word, and random hashes and words.
func TestKeyIDMatchesTable(t *testing.T) {
	check := func(h string) {
		t.Helper()
		id, odd := keyID(h)
		wantID, wantOdd := keyIDByTable(h)
		if id != wantID || odd != wantOdd {
			t.Fatalf("keyID(%q) = %x, %t; want %x, %t", h, id, odd, wantID, wantOdd)
		}
	}
	for _, base := range []string{hashSecret("a"), strings.Repeat("0", 64), strings.Repeat("f", 64), "0123456789abcdef9876543210fedcba0123456789abcdef9876543210fedcba"} {
		check(base)
		check(base[:63])
		check(strings.ToUpper(base))
		for p := range 64 {
			for c := range 256 {
				check(base[:p] + string([]byte{byte(c)}) + base[p+1:])
			}
		}
	}
	base := []byte(hashSecret("b"))
	for c := range 256 {
		for d := range 256 {
			for _, p := range [][2]int{{0, 1}, {9, 15}, {62, 58}} {
				h := slices.Clone(base)
				h[p[0]], h[p[1]] = byte(c), byte(d)
				check(string(h))
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	const digits = "0123456789abcdef"
	for range 100000 {
		var h [64]byte
		for i := range h {
			h[i] = digits[r.IntN(16)]
		}
		check(string(h[:]))
		h[r.IntN(64)] = byte(r.Uint32())
		check(string(h[:]))
		var x uint64
		for i := range 8 {
			x |= uint64(byte(r.Uint32())) << (8 * i)
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		check(string(w[:]) + string(h[8:]))
	}
}

func BenchmarkKeyID(b *testing.B) {
	h := hashSecret("bench")
	for b.Loop() {
		keyID(h)
	}
}
