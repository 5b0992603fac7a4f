package integration

import (
	"fmt"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// withImageModels adds OpenAI-style image models priced 0.04 credits per
// image, served by the mock's strict images API through p: gpt-image-1,
// dall-e-3 (one image, its own sizes) and one that returns an image
// fewer than asked for.
func withImageModels(t *testing.T, p *countingProxy) func(string) string {
	return func(cfg string) string {
		block := ""
		for _, m := range []string{"gpt-image-1", "dall-e-3", "gpt-image-1-images-fewer"} {
			block += fmt.Sprintf("\t\tmodel openai/%s {\n\t\t\tpricing {\n\t\t\t\tprompt 0\n\t\t\t\tcompletion 0\n\t\t\t\timage_output 0.04\n\t\t\t}\n"+
				"\t\t\tprovider openai http://%s/v1 {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n", m, p.addr(), m)
		}
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

func imagesBody(model string, n int, extra string) string {
	return fmt.Sprintf(`{"model":%q,"prompt":"a red panda astronaut","n":%d%s}`, model, n, extra)
}

func TestImages(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withImageModels(t, proxy)(withCountingProxy(proxy)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"images"}`)
	image := money.Amount(40_000_000) // 0.04 credits

	t.Run("generated, priced per image", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/images", key, imagesBody("openai/gpt-image-1", 2, `,"size":"1024x1536","quality":"high","output_format":"png"`), nil).expect(t, 200)
		j := r.JSON
		if j.Get("data.#").Int() != 2 || j.Get("data.0.b64_json").Str == "" || j.Get("data.0.media_type").Str != "image/png" || j.Get("created").Int() == 0 {
			t.Fatalf("answer %s", r.Body)
		}
		if got := creditAmount(t, j.Get("usage.cost")); got != 2*image {
			t.Fatalf("usage.cost %s", got)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 2*image, "two images")
		id := r.Header.Get("X-Generation-Id")
		g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("model").Str != "openai/gpt-image-1" || creditAmount(t, g.Get("total_cost")) != 2*image {
			t.Fatalf("generation %s", g.Raw)
		}
	})

	t.Run("charged on the images returned", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/images", key, imagesBody("openai/gpt-image-1-images-fewer", 3, ""), nil).expect(t, 200)
		if r.JSON.Get("data.#").Int() != 2 {
			t.Fatalf("answer %s", r.Body)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 2*image, "fewer images")
	})

	t.Run("a count or size the model does not offer is a 400 naming it", func(t *testing.T) {
		for body, field := range map[string]string{
			imagesBody("openai/dall-e-3", 2, ""):                          "n:",
			imagesBody("openai/dall-e-3", 1, `,"size":"1536x1024"`):       "size:",
			imagesBody("openai/gpt-image-1", 11, ""):                      "n:",
			imagesBody("openai/gpt-image-1", 1, `,"size":"512x512"`):      "size:",
			imagesBody("openai/gpt-image-1", 1, `,"quality":"ultra"`):     "quality:",
			`{"model":"openai/gpt-image-1"}`:                              "prompt:",
			imagesBody("tollgate-mock", 1, ""):                            "model:",
			imagesBody("openai/gpt-image-1", 1, `,"aspect_ratio":"21:9"`): "aspect_ratio:",
		} {
			before := c.snapshot(key, tn.MgmtKey)
			calls := proxy.calls.Load()
			c.mustPost("/images", key, body, nil).expectError(t, 400, field)
			if proxy.calls.Load() != calls {
				t.Fatalf("%s reached the provider", body)
			}
			expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, body)
		}
	})

	t.Run("image models and their endpoints", func(t *testing.T) {
		list := c.api("GET", "/images/models", "", nil).expect(t, 200).JSON.Get("data")
		if list.Get("#").Int() != 3 || list.Get("0.id").Str != "openai/gpt-image-1" || list.Get("0.supports_streaming").Bool() ||
			list.Get("0.endpoints").Str != "/api/v1/images/models/openai/gpt-image-1/endpoints" ||
			list.Get("0.architecture.output_modalities").Raw != `["image"]` || list.Get("0.supported_parameters.quality.type").Str != "enum" {
			t.Fatalf("image models %s", list.Raw)
		}
		eps := c.api("GET", "/images/models/openai/gpt-image-1/endpoints", "", nil).expect(t, 200).JSON
		if eps.Get("id").Str != "openai/gpt-image-1" || eps.Get("endpoints.0.provider_name").Str != "openai" ||
			eps.Get("endpoints.0.pricing.0.billable").Str != "output_image" || eps.Get("endpoints.0.pricing.0.cost_usd").Num != 0.04 {
			t.Fatalf("endpoints %s", eps.Raw)
		}
		c.api("GET", "/images/models/tollgate-mock/x/endpoints", "", nil).expectError(t, 404, "Model not found")
	})

	t.Run("a key cap that fits one image refuses the second", func(t *testing.T) {
		capped, _ := c.newKey(tn.MgmtKey, fmt.Sprintf(`{"name":"one image","limit":%s}`, image+image/2))
		one := imagesBody("openai/gpt-image-1", 1, "")
		refused(t, c, proxy, tn, capped, "/images", imagesBody("openai/gpt-image-1", 2, ""), "service_key_limit", "", false)
		c.mustPost("/images", capped, one, nil).expect(t, 200)
		refused(t, c, proxy, tn, capped, "/images", one, "service_key_limit", "", false)
	})
}
