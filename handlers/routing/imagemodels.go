package routing

import (
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/images"
)

// imageParameters are the parameters POST /images takes of an image
// model, as the public API describes them (an enum's values, a range).
var imageParameters = map[string]any{
	"n": map[string]any{"type": "range", "min": 1, "max": images.MaxImages},
	"size": map[string]any{"type": "enum", "values": []string{"1024x1024", "1536x1024", "1024x1536", "1792x1024", "1024x1792",
		"256x256", "512x512", "auto"}},
	"aspect_ratio":       map[string]any{"type": "enum", "values": []string{"1:1", "3:2", "2:3", "auto"}},
	"quality":            map[string]any{"type": "enum", "values": []string{"auto", "low", "medium", "high"}},
	"background":         map[string]any{"type": "enum", "values": []string{"auto", "transparent", "opaque"}},
	"output_format":      map[string]any{"type": "enum", "values": []string{"png", "jpeg", "webp"}},
	"output_compression": map[string]any{"type": "range", "min": 0, "max": 100},
}

// imageArchitecture is an image model's modalities: its catalog entry's
// input (else text), image out.
func imageArchitecture(pub gjson.Result) map[string]any {
	in := []string{"text"}
	if v := pub.Get("architecture.input_modalities"); v.IsArray() && len(v.Array()) > 0 {
		in = in[:0]
		for _, s := range v.Array() {
			in = append(in, s.Str)
		}
	}
	return map[string]any{"input_modalities": in, "output_modalities": []string{"image"}}
}

// imageModelList is GET /images/models: the catalog's image models.
func imageModelList(c *catalog.Catalog) []map[string]any {
	out := []map[string]any{}
	if c == nil {
		return out
	}
	for _, m := range c.Models() {
		if !images.OutputsImages(m) {
			continue
		}
		pub := gjson.ParseBytes(m.Public)
		out = append(out, map[string]any{
			"id": m.ID, "name": m.Name, "description": pub.Get("description").Str, "created": pub.Get("created").Int(),
			"architecture": imageArchitecture(pub), "supported_parameters": imageParameters, "supports_streaming": false,
			"endpoints": admin.APIPrefix + "/images/models/" + m.ID + "/endpoints",
		})
	}
	return out
}

// imageEndpoints is GET /images/models/{author}/{slug}/endpoints: each
// provider of m with its billable lines (per image, per prompt token,
// per request).
func imageEndpoints(m *catalog.Model) map[string]any {
	endpoints := make([]map[string]any, 0, len(m.Providers))
	for _, p := range m.Providers {
		pricing := m.Pricing
		if p.Pricing != nil {
			pricing = *p.Pricing
		}
		lines := []map[string]any{}
		for _, l := range []struct {
			billable, unit string
			price          billing.Price
		}{{"output_image", "image", pricing.ImageOutput}, {"input_token", "token", pricing.Prompt}, {"request", "request", pricing.Request}} {
			if l.price > 0 {
				cost, _ := strconv.ParseFloat(l.price.String(), 64)
				lines = append(lines, map[string]any{"billable": l.billable, "unit": l.unit, "cost_usd": cost})
			}
		}
		endpoints = append(endpoints, map[string]any{
			"provider_name": p.Name, "provider_slug": p.Name, "provider_tag": p.Name,
			"supported_parameters": imageParameters, "allowed_passthrough_parameters": []string{},
			"supports_streaming": false, "pricing": lines,
		})
	}
	return map[string]any{"id": m.ID, "endpoints": endpoints}
}
