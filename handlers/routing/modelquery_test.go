package routing

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
)

// queryModel is a model with the public fields the filters read.
func queryModel(id, name string, created, context int64, in, out, params, tokenizer string, prompt, completion string, providers ...*catalog.Provider) *catalog.Model {
	price := func(s string) billing.Price {
		p, err := billing.ParsePrice(s)
		if err != nil {
			panic(err)
		}
		return p
	}
	return &catalog.Model{ID: id, Name: name, ContextLength: context,
		Pricing:   billing.Pricing{Prompt: price(prompt), Completion: price(completion)},
		Providers: providers,
		Public: []byte(fmt.Sprintf(`{"id":%q,"name":%q,"created":%d,"context_length":%d,"architecture":{"input_modalities":%s,"output_modalities":%s,"tokenizer":%q},"supported_parameters":%s}`,
			id, name, created, context, in, out, tokenizer, params))}
}

func queryCatalog(now time.Time) []*catalog.Model {
	day := int64(24 * time.Hour / time.Second)
	zdr := func() *catalog.Provider {
		return &catalog.Provider{Name: "Zero", DataPolicy: catalog.DataPolicy{ZDR: true, Region: "europe"}}
	}
	us := func() *catalog.Provider {
		return &catalog.Provider{Name: "acme-us", DataPolicy: catalog.DataPolicy{Region: "us"}}
	}
	plain := func() *catalog.Provider { return &catalog.Provider{Name: "plain"} }
	models := []*catalog.Model{
		queryModel("openai/gpt-x", "GPT X", now.Unix()-400*day, 128000, `["text","image","file"]`, `["text"]`, `["tools","temperature"]`, "GPT", "0.000002", "0.000008", plain(), zdr()),
		queryModel("openai/embed", "Embed", now.Unix()-10*day, 8192, `["text"]`, `["embeddings"]`, `[]`, "GPT", "0.0000001", "0", plain()),
		queryModel("acme/draw", "Acme Draw", now.Unix()-30*day, 4096, `["text"]`, `["image","text"]`, `["temperature"]`, "Other", "0.000001", "0.00004", us()),
		queryModel("meta/llama-9", "Llama 9", now.Unix()-2*day, 32000, `["text"]`, `["text"]`, `["tools","top_k"]`, "Llama3", "0", "0", us(), plain()),
	}
	models[3].Distillable = true
	return models
}

func queryIDs(t *testing.T, query string, models []*catalog.Model) string {
	t.Helper()
	v, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	mq, apiErr := parseModelQuery(v, false)
	if apiErr != nil {
		t.Fatalf("%q: %s", query, apiErr.Message)
	}
	var ids []string
	for _, m := range mq.filter(models) {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

func TestModelQueryFilters(t *testing.T) {
	models := queryCatalog(time.Now())
	for _, tt := range []struct{ query, ids string }{
		// output_modalities is text unless the query says otherwise
		{"", "openai/gpt-x,acme/draw,meta/llama-9"},
		{"output_modalities=all", "openai/gpt-x,openai/embed,acme/draw,meta/llama-9"},
		{"output_modalities=embeddings", "openai/embed"},
		{"output_modalities=image,embeddings", "openai/embed,acme/draw"},
		{"input_modalities=image", "openai/gpt-x"},
		{"input_modalities=text,file", "openai/gpt-x"},
		{"supported_parameters=tools", "openai/gpt-x,meta/llama-9"},
		{"supported_parameters=tools,temperature", "openai/gpt-x"},
		{"q=LLAMA", "meta/llama-9"},
		{"q=acme", "acme/draw"},
		{"context=32000", "openai/gpt-x,meta/llama-9"},
		{"max_price=1", "acme/draw,meta/llama-9"},
		{"min_price=1&max_price=1.5", "acme/draw"},
		{"min_price=2", "openai/gpt-x"},
		{"min_output_price=10", "acme/draw"},
		{"max_output_price=8", "openai/gpt-x,meta/llama-9"},
		{"arch=gpt", "openai/gpt-x"},
		{"model_authors=meta,ACME", "acme/draw,meta/llama-9"},
		{"providers=zero", "openai/gpt-x"},
		{"providers=acme-us,Zero", "openai/gpt-x,acme/draw,meta/llama-9"},
		{"distillable=true", "meta/llama-9"},
		{"distillable=false", "openai/gpt-x,acme/draw"},
		{"zdr=true", "openai/gpt-x"},
		{"region=eu", "openai/gpt-x"},
		{"region=us", "acme/draw,meta/llama-9"},
		{"min_age_days=30", "openai/gpt-x,acme/draw"},
		{"max_age_days=30", "acme/draw,meta/llama-9"},
		{"use_rss=false&use_rss_chat_links=false", "openai/gpt-x,acme/draw,meta/llama-9"},
		// sorts, stable
		{"sort=pricing-low-to-high", "meta/llama-9,openai/gpt-x,acme/draw"},
		{"sort=pricing-high-to-low", "acme/draw,openai/gpt-x,meta/llama-9"},
		{"sort=context-high-to-low&output_modalities=all", "openai/gpt-x,meta/llama-9,openai/embed,acme/draw"},
		{"sort=newest&output_modalities=all", "meta/llama-9,openai/embed,acme/draw,openai/gpt-x"},
		// unmeasured: the catalog's order
		{"sort=latency-low-to-high", "openai/gpt-x,acme/draw,meta/llama-9"},
		{"sort=throughput-high-to-low", "openai/gpt-x,acme/draw,meta/llama-9"},
		// empty values are omitted ones
		{"category=&sort=&q=&zdr=", "openai/gpt-x,acme/draw,meta/llama-9"},
	} {
		if got := queryIDs(t, tt.query, models); got != tt.ids {
			t.Errorf("%q: %s, want %s", tt.query, got, tt.ids)
		}
	}
}

func TestModelQueryMeasuredSorts(t *testing.T) {
	now := time.Now()
	models := queryCatalog(now)
	// Each model's providers are measured under its own ids.
	for i, m := range models {
		for _, p := range m.Providers {
			p.Stats = routestats.For(fmt.Sprintf("modelquery-test/%d", i), p.Name)
		}
	}
	// gpt-x: 2s, 40 tokens/s; draw: 0.5s, 10 tokens/s; llama unmeasured.
	models[0].Providers[0].Stats.ObserveLatency(2*time.Second, now)
	models[0].Providers[0].Stats.ObserveThroughput(40, now)
	models[2].Providers[0].Stats.ObserveLatency(500*time.Millisecond, now)
	models[2].Providers[0].Stats.ObserveThroughput(10, now)
	if got := queryIDs(t, "sort=latency-low-to-high", models); got != "acme/draw,openai/gpt-x,meta/llama-9" {
		t.Errorf("latency: %s", got)
	}
	if got := queryIDs(t, "sort=throughput-high-to-low", models); got != "openai/gpt-x,acme/draw,meta/llama-9" {
		t.Errorf("throughput: %s", got)
	}
}

func TestModelQueryRefusals(t *testing.T) {
	for _, tt := range []struct{ query, message string }{
		{"category=programming", "category: the gateway assigns its models no use-case category"},
		{"category=nope", `category: unknown category "nope"`},
		{"output_modalities=video", `output_modalities: unknown modality "video" (expected text, image, audio, embeddings)`},
		{"output_modalities=,", "output_modalities: expected text, image, audio, embeddings"},
		{"input_modalities=embeddings", `input_modalities: unknown modality "embeddings" (expected text, image, audio, file)`},
		{"sort=most-popular", `sort: "most-popular": the gateway does not rank models by popularity`},
		{"sort=top-weekly", `sort: "top-weekly": the gateway does not rank models by popularity`},
		{"sort=intelligence-high-to-low", `sort: "intelligence-high-to-low": the gateway has no benchmark indices`},
		{"sort=design-arena-elo-high-to-low", `sort: "design-arena-elo-high-to-low": the gateway has no benchmark rankings`},
		{"sort=cheapest", `sort: unknown sort "cheapest"`},
		{"use_rss=true", "use_rss: the gateway does not serve the model list as an RSS feed"},
		{"use_rss_chat_links=true", "use_rss_chat_links: the gateway does not serve the model list as an RSS feed"},
		{"use_rss=1", "use_rss: expected true or false"},
		{"context=0", "context: expected a positive integer"},
		{"context=1.5", "context: expected a positive integer"},
		{"min_price=-1", "min_price: expected a non-negative number (credits per million tokens)"},
		{"max_price=x", "max_price: expected a non-negative number (credits per million tokens)"},
		{"min_output_price=NaN", "min_output_price: expected a non-negative number (credits per million tokens)"},
		{"max_output_price=Inf", "max_output_price: expected a non-negative number (credits per million tokens)"},
		{"distillable=yes", "distillable: expected true or false"},
		{"zdr=false", "zdr: expected true"},
		{"region=asia", "region: expected eu or us"},
		{"min_age_days=-1", "min_age_days: expected a non-negative integer"},
		{"max_age_days=x", "max_age_days: expected a non-negative integer"},
		{"min_intelligence_index=1", "min_intelligence_index: the gateway has no benchmark indices"},
		{"max_coding_index=1", "max_coding_index: the gateway has no benchmark indices"},
		{"min_agentic_index=0", "min_agentic_index: the gateway has no benchmark indices"},
		{"max_tool_success_rate=1", "max_tool_success_rate: the gateway does not measure tool-calling success"},
	} {
		v, _ := url.ParseQuery(tt.query)
		_, apiErr := parseModelQuery(v, false)
		if apiErr == nil || apiErr.Status != 400 || apiErr.Message != tt.message {
			t.Errorf("%q: %+v, want 400 %q", tt.query, apiErr, tt.message)
		}
	}
	// The count reads output_modalities only.
	v, _ := url.ParseQuery("category=programming&output_modalities=all")
	if mq, apiErr := parseModelQuery(v, true); apiErr != nil || mq.output != nil {
		t.Errorf("count query: %+v %+v", mq, apiErr)
	}
}

func TestOtherParams(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "",
		"offset=1&limit=2":              "",
		"limit=2&q=gpt%204&sort=newest": "&q=gpt%204&sort=newest",
		"q=a&offset=3&&zdr=true":        "&q=a&zdr=true",
	} {
		if got := otherParams(in); got != want {
			t.Errorf("otherParams(%q) = %q, want %q", in, got, want)
		}
	}
}
