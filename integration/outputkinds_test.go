package integration

// Charging streams that end without usage, for every kind of output a
// model produces, on every route: the mock streams the answer as text,
// tool-call arguments, reasoning, refusals, audio, images or a legacy
// function call, and either stalls until the client leaves (client abort)
// or cuts the connection (provider cut) after three output chunks.

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// outputKinds are the mock's kinds of output (standin/mockprovider's
// mockShape) and the routes that can ask for each: audio, images and
// legacy function calls exist only in Chat Completions requests.
var outputKinds = []struct {
	kind   string
	routes []string
}{
	{"text", []string{"chat", "responses", "messages"}},
	{"tools", []string{"chat", "responses", "messages"}},
	{"reasoning", []string{"chat", "responses", "messages"}},
	{"reasoning_content", []string{"chat", "responses", "messages"}},
	{"refusal", []string{"chat", "responses", "messages"}},
	{"audio", []string{"chat"}},
	{"image", []string{"chat"}},
	{"function_call", []string{"chat", "responses"}},
}

// outputFaults: the client leaves while the provider stalls, or the
// provider cuts the stream.
var outputFaults = []string{"stream-stall", "stream-break"}

func outputModel(kind, fault string) string { return "mock-out-" + kind + "-" + fault }

// withMockModels adds every name as withModel does.
func withMockModels(t *testing.T, names ...string) func(string) string {
	return func(cfg string) string {
		for _, n := range names {
			cfg = withModel(t, n)(cfg)
		}
		return cfg
	}
}

// producedBytes is the model output (the gateway's rule: a string's
// bytes, those of ids, types and other protocol members aside) of the
// mock's first three output chunks of kind in the provider's dialect
// (chat for the Messages route, translated), with the call's name for
// calls. The answer starts "Mock answer from".
func producedBytes(kind, dialect string) int {
	words := []string{"Mock", " answer", " from"}
	n := 0
	for _, w := range words {
		switch kind {
		case "audio":
			n += len(w) + base64.StdEncoding.EncodedLen(len(w))
		case "image":
			n += len("data:image/png;base64,") + base64.StdEncoding.EncodedLen(len(w))
		default:
			n += len(w)
		}
	}
	switch kind {
	case "tools":
		n += len(`{"q":"`) + len("mock_tool")
	case "function_call":
		n += len(`{"q":"`) + len("mock_fn")
		if dialect == "responses" {
			n += len("mock_tool") - len("mock_fn") // a function_call item of mock_tool
		}
	}
	return n
}

// outputBody is a streamed request of route for model that asks for
// kind, with an output limit of 500 tokens.
func outputBody(route, kind, model string) (path, body string) {
	extra := ""
	switch {
	case kind == "tools" && route == "chat", kind == "tools" && route == "responses" || kind == "function_call" && route == "responses":
		if route == "chat" {
			extra = `,"tools":[{"type":"function","function":{"name":"mock_tool","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
		} else {
			extra = `,"tools":[{"type":"function","name":"mock_tool","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`
		}
	case kind == "tools" && route == "messages":
		extra = `,"tools":[{"name":"mock_tool","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	case kind == "function_call":
		extra = `,"functions":[{"name":"mock_fn","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	case kind == "audio":
		extra = `,"modalities":["text","audio"],"audio":{"voice":"alloy","format":"pcm16"}`
	case kind == "image":
		extra = `,"modalities":["image","text"]`
	}
	switch route {
	case "responses":
		return "/responses", fmt.Sprintf(`{"model":%q,"stream":true,"max_output_tokens":500,"input":"produce output please"%s}`, model, extra)
	case "messages":
		return "/messages", fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":500,"messages":[{"role":"user","content":"produce output please"}]%s}`, model, extra)
	}
	return "/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":500,"messages":[{"role":"user","content":"produce output please"}]%s}`, model, extra)
}

// TestChargeEveryOutputKind: a stream without usage is charged its prompt
// estimate plus one token per four bytes of the output the provider
// produced, whatever its kind, whether the client left or the provider
// cut it; the generation record says so and the key's usage rose by
// exactly its cost; no hold is left.
func TestChargeEveryOutputKind(t *testing.T) {
	var models []string
	for _, k := range outputKinds {
		for _, f := range outputFaults {
			models = append(models, outputModel(k.kind, f))
		}
	}
	startInProcessWith(t, withMockModels(t, models...))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"kinds","limit":50}`)

	for _, k := range outputKinds {
		for _, route := range k.routes {
			for _, fault := range outputFaults {
				name := route + "/" + k.kind + "/" + fault
				t.Run(name, func(t *testing.T) {
					model := outputModel(k.kind, fault)
					path, body := outputBody(route, k.kind, model)
					before := c.snapshot(key, org.MgmtKey)
					res, err := c.send(path, key, body, nil)
					if err != nil {
						t.Fatal(err)
					}
					if res.StatusCode != 200 {
						var b strings.Builder
						_, _ = bufio.NewReader(res.Body).WriteTo(&b)
						res.Body.Close()
						t.Fatalf("status %d: %s", res.StatusCode, b.String())
					}
					if fault == "stream-stall" {
						// The mock sent its three chunks in one write before
						// stalling: once an event arrives, the gateway has
						// read them all. The client leaves.
						if _, err := readEvent(bufio.NewReader(res.Body)); err != nil {
							t.Fatalf("no event before the stall: %v", err)
						}
						res.Body.Close()
					} else {
						evs, _ := readStream(res.Body)
						res.Body.Close()
						for _, ev := range evs {
							if gjson.Get(ev.Data, "usage.prompt_tokens").Exists() || gjson.Get(ev.Data, "response.usage").IsObject() {
								t.Fatalf("a cut stream reported usage: %s", ev.Data)
							}
						}
					}
					after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
					g := c.generationOf(t, key, res.Header)
					dialect := route
					if route == "messages" {
						dialect = "chat" // translated for the chat-only mock
					}
					wantCompletion := textEstimate(producedBytes(k.kind, dialect))
					if g.completion != wantCompletion {
						t.Fatalf("completion tokens %d, want %d (%d bytes of %s output)", g.completion, wantCompletion, producedBytes(k.kind, dialect), k.kind)
					}
					if route != "messages" {
						if want := promptEstimate(body); g.prompt != want {
							t.Fatalf("prompt tokens %d, want the estimate %d", g.prompt, want)
						}
					} else if g.prompt <= 0 {
						t.Fatalf("prompt tokens %d: the prompt is not charged", g.prompt)
					}
					if want := tokenCost(g.prompt, g.completion); g.cost != want {
						t.Fatalf("generation cost %s, want %s", g.cost, want)
					}
					expectCharged(t, before, after, g.cost, name)
				})
			}
		}
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// TestChargeAbortBeforeOutput: a client that leaves a stream the provider
// accepted, before any output, is charged the prompt.
func TestChargeAbortBeforeOutput(t *testing.T) {
	const model = "mock-stall-before-output"
	startInProcessWith(t, withModel(t, model))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"early","limit":50}`)

	for _, route := range []string{"chat", "responses", "messages"} {
		t.Run(route, func(t *testing.T) {
			path, body := outputBody(route, "text", model)
			before := c.snapshot(key, org.MgmtKey)
			res, err := c.send(path, key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readEvent(bufio.NewReader(res.Body)); err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
			g := c.generationOf(t, key, res.Header)
			if g.completion != 0 || g.prompt <= 0 || route != "messages" && g.prompt != promptEstimate(body) {
				t.Fatalf("charged %d prompt and %d completion tokens, want the prompt estimate %d and none", g.prompt, g.completion, promptEstimate(body))
			}
			if !generationJSON(t, c, key, res.Header).Get("cancelled").Bool() {
				t.Fatal("the generation is not recorded as cancelled")
			}
			expectCharged(t, before, after, g.cost, route+" abort before output")
		})
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// generationJSON is the generation record of an answer's X-Generation-Id.
func generationJSON(t *testing.T, c *client, key string, h http.Header) gjson.Result {
	t.Helper()
	return c.api("GET", "/generation?id="+h.Get("X-Generation-Id"), key, nil).expect(t, 200).JSON.Get("data")
}

// TestChargeNativeMessagesCut: an Anthropic-style provider that cuts a
// stream of a tool call, or of thinking and text, without usage, on every
// route: the output it produced is charged (on /messages, what the client
// received, every event passed as the provider sent it).
func TestChargeNativeMessagesCut(t *testing.T) {
	startInProcessWith(t, withNativeAnthropic(t, "anthropic/claude-cut", "claude-stream-break"))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"native","limit":50}`)

	bodies := map[string]string{
		"messages/tool_use": nativeMessagesBody("anthropic/claude-cut", "tool_use"),
		"messages/thinking": nativeMessagesBody("anthropic/claude-cut", "thinking"),
		"chat/tool_use": `{"model":"anthropic/claude-cut","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"` + nativeUser + `"}],` +
			`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			path := "/messages"
			if strings.HasPrefix(name, "chat/") {
				path = "/chat/completions"
			}
			before := c.snapshot(key, org.MgmtKey)
			res, err := c.send(path, key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := readStream(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %v", res.StatusCode, evs)
			}
			// The output received: tool names and arguments, thinking, text.
			received := 0
			for _, ev := range evs {
				d := gjson.Parse(ev.Data)
				if path == "/messages" {
					received += messagesOutputBytes(d)
					continue
				}
				for _, tc := range d.Get("choices.0.delta.tool_calls").Array() {
					received += len(tc.Get("function.name").Str) + len(tc.Get("function.arguments").Str)
				}
			}
			if received == 0 {
				t.Fatalf("no output before the cut: %v", evs)
			}
			after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
			g := c.generationOf(t, key, res.Header)
			if g.completion != textEstimate(received) || g.prompt <= 0 {
				t.Fatalf("charged %d prompt and %d completion tokens, want the prompt and %d (%d bytes)", g.prompt, g.completion, textEstimate(received), received)
			}
			expectCharged(t, before, after, g.cost, name)
		})
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// TestChargeTranslatedResponses: a Responses request served by a chat-only
// provider (`api chat`), whose refusals and reasoning the translation does
// not carry to the client: the output the provider produced is charged
// when it cuts the stream.
func TestChargeTranslatedResponses(t *testing.T) {
	kinds := []string{"text", "tools", "reasoning", "refusal"}
	var blocks strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&blocks, "\t\tmodel chatonly/%s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
			"\t\t\tprovider mock http://%s/v1 {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n\t\t\t\tapi chat\n\t\t\t}\n\t\t}\n", k, mockAddr, outputModel(k, "stream-break"))
	}
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", blocks.String()+"\t\tmodel tollgate-mock:free {\n")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"translated","limit":50}`)
	for _, k := range kinds {
		t.Run(k, func(t *testing.T) {
			_, body := outputBody("responses", k, "chatonly/"+k)
			before := c.snapshot(key, org.MgmtKey)
			res, err := c.send("/responses", key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := readStream(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %v", res.StatusCode, evs)
			}
			after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
			g := c.generationOf(t, key, res.Header)
			if want := textEstimate(producedBytes(k, "chat")); g.completion != want || g.prompt <= 0 {
				t.Fatalf("charged %d prompt and %d completion tokens, want the prompt and %d", g.prompt, g.completion, want)
			}
			expectCharged(t, before, after, g.cost, k)
		})
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// TestChargeNativeMessagesAbort: on /messages served by an Anthropic-style
// provider (passed through, no translation), a client that leaves a
// stream of a tool call, of thinking or of text before usage is charged
// the prompt and the output it received.
func TestChargeNativeMessagesAbort(t *testing.T) {
	startInProcessWith(t, withNativeAnthropic(t, "anthropic/claude-stall", "claude-stream-stall"))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"native-abort","limit":50}`)

	for _, name := range []string{"tool_use", "thinking", "text"} {
		body := nativeMessagesBody("anthropic/claude-stall", name)
		t.Run(name, func(t *testing.T) {
			before := c.snapshot(key, org.MgmtKey)
			res, err := c.send("/messages", key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 200 {
				res.Body.Close()
				t.Fatalf("status %d", res.StatusCode)
			}
			// Read up to the ping the mock sends once its first block's
			// output is out, then leave.
			r := bufio.NewReader(res.Body)
			received, deltas := 0, 0
			for {
				ev, err := readEvent(r)
				if err != nil {
					t.Fatalf("the stream ended before the stall: %v", err)
				}
				d := gjson.Parse(ev.Data)
				if d.Get("usage.output_tokens").Exists() && d.Get("type").Str == "message_delta" {
					t.Fatalf("a stalled stream reported usage: %s", ev.Data)
				}
				if d.Get("type").Str == "content_block_delta" {
					deltas++
				}
				received += messagesOutputBytes(d)
				if d.Get("type").Str == "ping" && deltas > 0 {
					break
				}
			}
			res.Body.Close()
			if received == 0 {
				t.Fatal("no output before the stall")
			}
			after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
			g := c.generationOf(t, key, res.Header)
			if g.completion != textEstimate(received) || g.prompt <= 0 {
				t.Fatalf("charged %d prompt and %d completion tokens, want the prompt and %d (%d bytes)", g.prompt, g.completion, textEstimate(received), received)
			}
			if !generationJSON(t, c, key, res.Header).Get("cancelled").Bool() {
				t.Fatal("the generation is not recorded as cancelled")
			}
			expectCharged(t, before, after, g.cost, name)
		})
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// nativeUser asks the Anthropic mock for a tool call when tools are given.
const nativeUser = "please call lookup now"

// withNativeAnthropic adds model id to the catalog, served by the Anthropic
// mock's model upstream as an Anthropic-style provider.
func withNativeAnthropic(t *testing.T, id, upstream string) func(string) string {
	block := fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
		"\t\t\tprovider anthropic http://%s/v1 {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n", id, mockAddr, upstream)
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// nativeMessagesBody is a streamed /messages request for model whose
// answer is a tool call (kind tool_use), thinking and text, or text.
func nativeMessagesBody(model, kind string) string {
	head := `{"model":"` + model + `","stream":true,`
	msgs := `"messages":[{"role":"user","content":"` + nativeUser + `"}]`
	switch kind {
	case "tool_use":
		return head + `"max_tokens":500,` + msgs + `,"tools":[{"name":"lookup","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}}]}`
	case "thinking":
		return head + `"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`
	}
	return head + `"max_tokens":500,` + msgs + `}`
}

// messagesOutputBytes is the model output a Messages stream event carries:
// a tool's name and input, thinking, text.
func messagesOutputBytes(d gjson.Result) int {
	return len(d.Get("content_block.name").Str) + len(d.Get("delta.partial_json").Str) +
		len(d.Get("delta.thinking").Str) + len(d.Get("delta.text").Str)
}
