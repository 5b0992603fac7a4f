package answer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// chatAnswers are chat answers of every shape the one-pass send must
// treat as the two steps do; onePass: the ones it takes itself.
var chatAnswers = []struct {
	body    string
	onePass bool
}{
	{string(benchJSONAnswer), true},
	{string(benchMockAnswer), true},
	{string(benchLongAnswer), true},
	{` { "id" : "c1" , "model" : "m-up", "choices" : [ ] , "usage" : { "prompt_tokens" : 1 } } ` + "\n", true},
	// members missing, or in another order; the provider's own provider
	{`{"choices":[],"usage":{"prompt_tokens":1}}`, true},
	{`{"usage":{"prompt_tokens":1},"model":"m","provider":"p","id":"x"}`, true},
	{`{"provider":"p","usage":{}}`, true},
	{`{"id":"x","usage":{ },"model":"m"}`, true},
	{`{"id":"x","usage":{` + "\n\t" + `}}`, true},
	// duplicates: the first of each
	{`{"id":"a","id":"b","model":"m1","model":"m2","usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`, true},
	// nested members of those names are not the answer's
	{`{"choices":[{"id":"n","model":"n","provider":"n","usage":{"x":1},"finish_reason":"stop"}],"usage":{"completion_tokens":2},"meta":{"provider":"q"}}`, true},
	// escapes in values, and values of other types
	{`{"id":"a\"b\\","model":"\u006d","choices":[{"message":{"content":"x \"]} (\\"}}],"usage":{"prompt_tokens":1}}`, true},
	{`{"id":17,"model":null,"provider":{"name":"p"},"usage":{"prompt_tokens":1},"n":-1.5e+3,"t":true,"f":false}`, true},
	{`{"id":[1,{"a":"}"}],"usage":{"prompt_tokens":1}}`, true},
	// not plain: the two steps
	{`{"i\u0064":"x","usage":{"prompt_tokens":1}}`, false},
	{`{"provid\u0065r":"x","usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","choices":[(],"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","choices":[)],"usage":{"prompt_tokens":1},"model":"m"}`, false},
	{`{"id":"x","odd":tru"e","usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","odd":nul,"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","odd":0x1,"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","odd":.5,"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","odd":e1,"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","odd":NaN,"usage":{"prompt_tokens":1}}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1}} trailing`, false},
	{`{"id":"x","usage":{"prompt_tokens":1},"model":"m",}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1,"cost":3}}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1,"cost_details":{}}}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1,"is_byok":true}}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1,"\u0063ost":3}}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1]}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1}`, false},
	{`{"id":"x","usage":{"prompt_tokens":1},"model":"m"`, false},
	{`{"usage":{"prompt_tokens":1},"id":"x","model":"m","extra":"unterminated}`, false},
	// no usage: the two steps
	{`{"id":"x","choices":[{"message":{"content":"hi"}}]}`, false},
	{`{"id":"x","usage":null}`, false},
}

// testAmount is the amount s names.
func testAmount(s string) money.Amount {
	a, err := money.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// heldChatAnswer is a Writer that has held body and read its usage.
func heldChatAnswer(body string, billed bool) (*Writer, bool) {
	route := &upstream.Route{Model: &catalog.Model{ID: "vendor/m"}, Provider: &catalog.Provider{Name: "prov"}}
	mw := NewWriter(newWriteLog(), "chat")
	mw.RewriteIdentity("gen-1", route)
	mw.WriteHeader(http.StatusOK)
	_, _ = mw.Write([]byte(body))
	if !mw.UsableJSON() {
		return mw, false
	}
	if billed {
		bill := NewUsageBill(1_500_000_000, billing.Pricing{Prompt: 1_000_000_000}, billing.Usage{PromptTokens: 1}, false)
		mw.Bill = &bill
	}
	return mw, true
}

// onePassDiff compares appendChatAnswer with the two steps on body; ""
// when they agree. taken reports whether the one pass took the body.
func onePassDiff(body string, billed bool) (diff string, taken bool) {
	mw, ok := heldChatAnswer(body, billed)
	if !ok {
		return "", false
	}
	held := mw.Body.Bytes()
	orig := bytes.Clone(held)
	out, taken := mw.appendChatAnswer([]byte("prefix"), held, testAmount("0.5"))
	var buf, idBuf []byte
	want := mw.rewriteAnswer(held, testAmount("0.5"), &buf, &idBuf)
	switch {
	case !bytes.Equal(held, orig):
		return "the held answer changed: " + string(held), taken
	case !taken && string(out) != "prefix":
		return "not taken, yet appended: " + string(out), taken
	case taken && string(out) != "prefix"+string(want):
		return "one pass:\n " + strings.TrimPrefix(string(out), "prefix") + "\ntwo steps:\n " + string(want), taken
	}
	// The layout's walk reads the members the meter keeps as the walk
	// without it does.
	var l answerLayout
	a, b := readAnswerMembers(held, false, &l), readAnswerMembers(held, false, nil)
	for i, r := range [][2]gjson.Result{{a.id, b.id}, {a.usage, b.usage}, {a.finish, b.finish}} {
		if r[0].Raw != r[1].Raw || r[0].Index != r[1].Index || r[0].Type != r[1].Type || r[0].Str != r[1].Str {
			return fmt.Sprintf("member %d read with a layout %+v, without %+v", i, r[0], r[1]), taken
		}
	}
	return "", taken
}

func TestChatAnswerOnePassMatchesTwoSteps(t *testing.T) {
	for _, c := range chatAnswers {
		for _, billed := range []bool{true, false} {
			diff, taken := onePassDiff(c.body, billed)
			if diff != "" {
				t.Errorf("%s (billed %v): %s", c.body, billed, diff)
			}
			if taken != c.onePass {
				t.Errorf("%s (billed %v): one pass %v, want %v", c.body, billed, taken, c.onePass)
			}
		}
	}
}

// The client gets the answer with its identity and the bill, whichever way
// it was built.
func TestSendJSONChatAnswer(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"c","object":"chat.completion","model":"up","choices":[],"usage":{"prompt_tokens":1},"system_fingerprint":"fp"}`,
			`{"provider":"prov","id":"gen-1","object":"chat.completion","model":"vendor/m","choices":[],"usage":{"prompt_tokens":1,"cost":0.5},"system_fingerprint":"fp"}`},
		{`{"usage":{},"provider":"p"}`, `{"id":"gen-1","model":"vendor/m","usage":{"cost":0.5},"provider":"prov"}`},
		{`{"i\u0064":"c","usage":{"cost":1}}`, `{"model":"vendor/m","provider":"prov","i\u0064":"gen-1","usage":{"cost":0.5}}`},
	} {
		mw, ok := heldChatAnswer(c.in, false)
		if !ok {
			t.Fatalf("%s: not usable", c.in)
		}
		log := mw.ResponseWriter.(*writeLog)
		if err := mw.SendJSON(testAmount("0.5"), "gen-1"); err != nil {
			t.Fatal(err)
		}
		if log.body() != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, log.body(), c.want)
		}
	}
}

func FuzzChatAnswerOnePassMatchesTwoSteps(f *testing.F) {
	for _, c := range chatAnswers {
		f.Add(c.body, true)
	}
	f.Fuzz(func(t *testing.T, body string, billed bool) {
		if diff, _ := onePassDiff(body, billed); diff != "" {
			t.Fatalf("%q: %s", body, diff)
		}
	})
}

// The one pass agrees with the two steps on answers built at random from
// the pieces that matter: the members it splices, escaped keys and
// strings, literals gjson reads otherwise, parentheses, mismatched and
// missing brackets, the gateway's own usage members, spacing, trailing
// bytes.
func TestChatAnswerOnePassOnGeneratedAnswers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for range 20000 {
		doc := genAnswerObject(r, 0)
		if !strings.Contains(doc, `"usage"`) {
			doc = strings.Replace(doc, "{", `{"usage":{"total_tokens":2},`, 1)
		}
		diff, tk := onePassDiff(doc, r.IntN(2) == 0)
		if diff != "" {
			t.Fatalf("%s: %s", doc, diff)
		}
		if tk {
			taken++
		}
	}
	if taken < 1000 {
		t.Errorf("the one pass took %d answers: the generator misses it", taken)
	}
}

func pick(r *rand.Rand, s ...string) string { return s[r.IntN(len(s))] }

func genAnswerValue(r *rand.Rand, depth int) string {
	if depth > 2 || r.IntN(3) > 0 {
		return pick(r, `"x"`, `"a\"b"`, `"\\"`, `"(\u0028)"`, `1`, `-2.5e+3`, `true`, `false`, `null`,
			`nul`, `tru"e"`, `.5`, `NaN`, `(`, `)`, `x`, `""`)
	}
	if r.IntN(2) == 0 {
		return genAnswerObject(r, depth+1)
	}
	parts := make([]string, r.IntN(3))
	for i := range parts {
		parts[i] = genAnswerValue(r, depth+1)
	}
	if r.IntN(10) == 0 {
		parts = append(parts, "(")
	}
	return "[" + strings.Join(parts, ",") + pick(r, "]", "]", "]", "]", "}")
}

func genAnswerObject(r *rand.Rand, depth int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range r.IntN(5) {
		if i > 0 {
			b.WriteString(pick(r, ",", ",", ", ", " ,\n", ""))
		}
		b.WriteString(pick(r, `"id"`, `"model"`, `"provider"`, `"usage"`, `"choices"`, `"i\u0064"`, `"provid\u0065r"`,
			`"x"`, `"provider\q"`, `"cost"`, `"prompt_tokens"`, `"finish_reason"`))
		b.WriteString(pick(r, ":", " : ", ":"))
		if r.IntN(3) == 0 {
			b.WriteString(`{"prompt_tokens":1` + pick(r, "", `,"cost":2`, `,"x":"\u0063"`, " ") + "}")
		} else {
			b.WriteString(genAnswerValue(r, depth))
		}
	}
	b.WriteString(pick(r, "}", "}", "} ", "", "}x"))
	return b.String()
}

// usageOfDiff compares usageOf with gjson's lookups of the token counts on
// the usage object raw, for both APIs; "" when they agree.
func usageOfDiff(raw string) string {
	u := gjson.Parse(raw)
	for _, responses := range []bool{false, true} {
		in, out := "prompt_tokens", "completion_tokens"
		if responses {
			in, out = "input_tokens", "output_tokens"
		}
		got := usageOf(u, responses)
		if want := [2]int64{u.Get(in).Int(), u.Get(out).Int()}; [2]int64{got.Prompt, got.Completion} != want {
			return fmt.Sprintf("%s (responses %v): %d, %d; lookups %d, %d", raw, responses, got.Prompt, got.Completion, want[0], want[1])
		}
	}
	return ""
}

var usageObjects = []string{
	`{"prompt_tokens":27,"completion_tokens":13,"total_tokens":40}`,
	`{ "input_tokens" : 3 , "output_tokens":007 }`,
	`{"prompt_tokens":1,"prompt_tokens":2,"completion_tokens":-3}`,
	`{"prompt_tokens":1.9,"completion_tokens":1e3}`,
	`{"prompt_tokens":123456789012345,"completion_tokens":1234567890123456789}`,
	`{"prompt_tokens":99999999999999999999,"completion_tokens":"12"}`,
	`{"prompt_tokens":true,"completion_tokens":null,"output_tokens":[1]}`,
	`{"prompt_tokens":{"n":1},"completion_tokens":"x"}`,
	`{"details":{"prompt_tokens":5},"completion_tokens":2}`,
	`{"prompt_\u0074okens":5,"completion_tokens":2}`,
	`{"x":(1),"prompt_tokens":5}`,
	`{"x":[(],"prompt_tokens":5}`,
	`{"x":tru"prompt_tokens":5,"prompt_tokens":6}`,
	`{"prompt_tokens":5`,
	`{"prompt_tokens":5,}`,
	`{}`,
	`{"input_tokens":4,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}}`,
}

func TestUsageOfMatchesLookups(t *testing.T) {
	for _, raw := range usageObjects {
		if diff := usageOfDiff(raw); diff != "" {
			t.Error(diff)
		}
	}
}

func FuzzUsageOfMatchesLookups(f *testing.F) {
	for _, raw := range usageObjects {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !gjson.Parse(raw).IsObject() {
			return // usageOf reads objects only
		}
		if diff := usageOfDiff(raw); diff != "" {
			t.Fatal(diff)
		}
	})
}

// readAnswerMembersSkipping is readAnswerMembers as it was before
// readChoices: the choices array skipped, then its first element read
// again. The reference the one walk must agree with on any bytes.
func readAnswerMembersSkipping(body []byte, responses bool) answerMembers {
	p := newMemberPicker(responses)
	doc := string(body)
	ok := jsonpeek.EachTopMember(body, func(keyStart, keyEnd int, escaped bool, start, end int) bool {
		k := jsonpeek.MemberKey(doc, keyStart, keyEnd, escaped)
		switch {
		case k == p.finishKey && p.finishRest != "" && !p.seen[2] && body[start] == '[':
			if v, found := firstChoiceFinish(body, start, end); found {
				p.m.finish, p.seen[2] = v, true
			}
		case k == "id" || k == "usage" || k == p.finishKey:
			v := gjson.Parse(doc[start:end])
			v.Index = start
			p.take(k, v)
		}
		return !p.done()
	})
	if ok {
		return p.m
	}
	return pickByGJSON(doc, responses)
}

// layoutBySkipping is the layout of body as a walk that skips every
// member and tests each value with jsonpeek.PlainValue finds it; ok is false when
// the walk does not reach the end of the top level.
func layoutBySkipping(body []byte) (l answerLayout, ok bool) {
	l.plain = true
	doc := string(body)
	ok = jsonpeek.EachTopMember(body, func(keyStart, keyEnd int, escaped bool, start, end int) bool {
		l.record(jsonpeek.MemberKey(doc, keyStart, keyEnd, escaped), span{start, end})
		l.plain = l.plain && !escaped && jsonpeek.PlainValue(body[start:end])
		return true
	})
	l.plain = l.plain && ok
	return l, ok
}

// oneWalkDiff compares readAnswerMembers, with and without a layout, with
// readAnswerMembersSkipping on body, and the layout with
// layoutBySkipping's; "" when they agree.
func oneWalkDiff(body []byte) string {
	for _, responses := range []bool{false, true} {
		want := readAnswerMembersSkipping(body, responses)
		var l answerLayout
		for _, layout := range []*answerLayout{nil, &l} {
			got := readAnswerMembers(body, responses, layout)
			for i, r := range [][2]gjson.Result{{got.id, want.id}, {got.usage, want.usage}, {got.finish, want.finish}} {
				if r[0].Raw != r[1].Raw || r[0].Index != r[1].Index || r[0].Type != r[1].Type || r[0].Str != r[1].Str {
					return fmt.Sprintf("%s (responses %v, layout %v): member %d %+v, want %+v", body, responses, layout != nil, i, r[0], r[1])
				}
			}
		}
		if wantLayout, ok := layoutBySkipping(body); ok && l != wantLayout {
			return fmt.Sprintf("%s (responses %v): layout %+v, want %+v", body, responses, l, wantLayout)
		}
	}
	return ""
}

var choicesAnswers = []string{
	`{"id":"a","choices":[{"index":0,"message":{"content":"x \"]}"},"finish_reason":"stop"},{"finish_reason":"length"}],"usage":{}}`,
	`{"choices":[ { "finish_reason" : "stop" } ] ,"id":"a","usage":{}}`,
	`{"choices":[{"logprobs":null,"n":-1e3,"t":true}],"usage":{}}`,
	`{"choices":[{"x":a"b,"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"x":a{b,"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"x":a[b,"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"finish_reason":x}],"usage":{}}`,
	`{"choices":[{"finish_reason":"stop","x":}],"usage":{}}`,
	`{"choices":[{"finish_reason":"stop"},"unterminated],"usage":{}}`,
	`{"choices":[{"finish_reason":"stop"}],"choices":[{"finish_reason":"length"}],"usage":{}}`,
	`{"choices":[],"choices":[{"finish_reason":"length"}]}`,
	`{"choices":[1,{"finish_reason":"stop"}]}`,
	`{"choices":[{"fin\u0069sh_reason":"e"}],"\u0075sage":{}}`,
	`{"choices":[{"finish_reason":"stop"}`,
	`{"choices":[{"finish_reason":"stop"]}]}`,
	`{"choices":[{"a":{"b":[1,{"c":"]"}]},"finish_reason":"stop"} ] }`,
	`{"id":"x","usage":{},"choices":[{"finish_reason":"stop"}],"tail":[}`,
	`{"id":"x","usage":{},"choices":[`,
	`{"choices":[ `,
	`{"choices":`,
	`{"choices":[{"message":{"content":"(a)"},"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"message":{"content":"a"},"x":(1),"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"message":{"content":"a","y":[(]},"finish_reason":"stop"}],"usage":{}}`,
	`{"choices":[{"finish_reason":"stop"},{"z":")"},()],"usage":{}}`,
	`{"choices":[{"finish_reason":"stop"},{"z":")"},"("],"usage":{}}`,
	`{"choices":[{"n":1(,"finish_reason":"stop"}],"usage":{}}`,
}

func TestReadAnswerMembersOneWalk(t *testing.T) {
	for _, c := range append(choicesAnswers, string(benchJSONAnswer), string(benchMockAnswer)) {
		if diff := oneWalkDiff([]byte(c)); diff != "" {
			t.Error(diff)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		if diff := oneWalkDiff([]byte(genAnswerObject(r, 0))); diff != "" {
			t.Fatal(diff)
		}
	}
}

func FuzzReadAnswerMembersOneWalk(f *testing.F) {
	for _, c := range choicesAnswers {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if diff := oneWalkDiff(body); diff != "" {
			t.Fatal(diff)
		}
	})
}
