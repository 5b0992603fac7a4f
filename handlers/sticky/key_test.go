package sticky

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
)

func keyOf(t *testing.T, account, model, session string, kind dialect.Kind, body string) (affinity.Key, bool) {
	t.Helper()
	f, apiErr := reqbody.ParseObject([]byte(body))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return KeyOf(account, model, session, kind, f)
}

// Every turn of a conversation has its first turn's key; another
// conversation, account or model another.
func TestKeyOfStableAcrossTurns(t *testing.T) {
	for _, c := range []struct {
		kind                  dialect.Kind
		turn1, turn3, another string
	}{
		{dialect.Chat,
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`,
			`{"model":"m","temperature":0.5,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"More"},{"role":"assistant","content":"Sure"},{"role":"user","content":"Again"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Bye"}]}`},
		{dialect.Messages,
			`{"model":"m","max_tokens":10,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","max_tokens":10,"system":"Be brief.","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"More"}]}`,
			`{"model":"m","max_tokens":10,"system":"Be long.","messages":[{"role":"user","content":"Hi"}]}`},
		{dialect.Responses,
			`{"model":"m","instructions":"Be brief.","input":"Hi"}`,
			`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"Hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]},{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":"More"}]}`,
			`{"model":"m","instructions":"Be brief.","input":"Bye"}`},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			k1, ok1 := keyOf(t, "acct-1", "m", "", c.kind, c.turn1)
			k3, ok3 := keyOf(t, "acct-1", "m", "", c.kind, c.turn3)
			if !ok1 || !ok3 || k1 != k3 {
				t.Fatalf("turns 1 and 3: %x %v, %x %v; want one key", k1, ok1, k3, ok3)
			}
			if k, _ := keyOf(t, "acct-1", "m", "", c.kind, c.another); k == k1 {
				t.Error("another conversation has the same key")
			}
			if k, _ := keyOf(t, "acct-2", "m", "", c.kind, c.turn1); k == k1 {
				t.Error("another account's conversation has the same key")
			}
			if k, _ := keyOf(t, "acct-1", "m2", "", c.kind, c.turn1); k == k1 {
				t.Error("the conversation with another model has the same key")
			}
			// A session id keys it whatever its messages.
			s1, _ := keyOf(t, "acct-1", "m", "s-1", c.kind, c.turn1)
			s2, _ := keyOf(t, "acct-1", "m", "s-1", c.kind, c.another)
			if s1 != s2 || s1 == k1 {
				t.Errorf("session keys %x, %x (derived %x): want one key, not the derived", s1, s2, k1)
			}
		})
	}
}

func TestKeyOfNone(t *testing.T) {
	for _, c := range []struct {
		kind dialect.Kind
		body string
	}{
		{dialect.Other, `{"model":"m","prompt":"Hi"}`},
		{dialect.Chat, `{"model":"m","messages":[]}`},
		{dialect.Responses, `{"model":"m"}`},
	} {
		if _, ok := keyOf(t, "a", "m", "", c.kind, c.body); ok {
			t.Errorf("%s %s: keyed without a session id or a message", c.kind, c.body)
		}
		if _, ok := keyOf(t, "a", "m", "s", c.kind, c.body); !ok {
			t.Errorf("%s %s: a session id does not key it", c.kind, c.body)
		}
	}
}

// Only maxPrefixBytes are hashed: a long first message costs no more,
// and two conversations whose prefixes agree that far share a key.
func TestKeyOfBounded(t *testing.T) {
	long := strings.Repeat("x", 2*maxPrefixBytes)
	a, _ := keyOf(t, "a", "m", "", dialect.Chat, `{"messages":[{"role":"system","content":"`+long+`"},{"role":"user","content":"one"}]}`)
	b, _ := keyOf(t, "a", "m", "", dialect.Chat, `{"messages":[{"role":"system","content":"`+long+`"},{"role":"user","content":"two"}]}`)
	if a != b {
		t.Error("prefixes equal past the bound have different keys")
	}
}

func TestKeyOfAllocatesNothing(t *testing.T) {
	f, _ := reqbody.ParseObject([]byte(`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":"Hello"}]}`))
	if n := testing.AllocsPerRun(100, func() { KeyOf("acct", "m", "", dialect.Chat, f) }); n != 0 {
		t.Errorf("KeyOf allocates %v times", n)
	}
}
