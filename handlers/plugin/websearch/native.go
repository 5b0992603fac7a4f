package websearch

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	search "github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
)

// nativeTranslate writes the provider family's own web search into a body
// whose server tool was removed:
//
//   - openai: chat completions get web_search_options (search_context_size
//     and user_location passed on); the Responses API gets the
//     {"type":"web_search","filters":{"allowed_domains":[...]}} tool. OpenAI
//     has no excluded domains, and its chat search no domain filter at all:
//     those give 400 (a gateway-side engine can serve them).
//   - anthropic: the {"type":"web_search_20250305","name":"web_search",
//     "max_uses":n} tool with allowed_domains or blocked_domains (not both,
//     as Anthropic requires); max_uses defaults to 1.
//   - x: chat completions get the vendor's search_parameters (live search)
//     with a web source and, only with x_search, an X source; the Responses
//     API gets its web_search tool and, only with x_search, its x_search tool.
func nativeTranslate(body []byte, kind dialect.Kind, family string, spec *search.Spec) ([]byte, *apierror.Error) {
	switch family {
	case "openai":
		if len(spec.ExcludeDomains) > 0 {
			return nil, apierror.BadRequest("excluded_domains: not supported by this model's native web search; choose engine exa, firecrawl, parallel or searxng")
		}
		if kind == dialect.Chat {
			if len(spec.IncludeDomains) > 0 {
				return nil, apierror.BadRequest("allowed_domains: not supported by this model's native web search in chat completions; use the Responses API or a gateway engine")
			}
			opts := `{}`
			opts = withExtra(opts, spec, "search_context_size", "user_location")
			return setRaw(body, "web_search_options", opts)
		}
		tool := `{"type":"web_search"}`
		if len(spec.IncludeDomains) > 0 {
			// sjson fails only on a malformed path, and these are well-formed.
			tool, _ = sjson.Set(tool, "filters.allowed_domains", spec.IncludeDomains)
		}
		tool = withExtra(tool, spec, "search_context_size", "user_location")
		return appendTool(body, tool)
	case "anthropic":
		if len(spec.IncludeDomains) > 0 && len(spec.ExcludeDomains) > 0 {
			return nil, apierror.BadRequest("excluded_domains: cannot be combined with allowed_domains for this model's native web search")
		}
		tool := `{"type":"web_search_20250305","name":"web_search","max_uses":1}`
		tool = withExtra(tool, spec, "max_uses", "user_location")
		if len(spec.IncludeDomains) > 0 {
			tool, _ = sjson.Set(tool, "allowed_domains", spec.IncludeDomains)
		}
		if len(spec.ExcludeDomains) > 0 {
			tool, _ = sjson.Set(tool, "blocked_domains", spec.ExcludeDomains)
		}
		return appendTool(body, tool)
	case "x":
		if kind == dialect.Chat {
			web := `{"type":"web"}`
			if len(spec.IncludeDomains) > 0 {
				web, _ = sjson.Set(web, "allowed_websites", spec.IncludeDomains)
			}
			if len(spec.ExcludeDomains) > 0 {
				web, _ = sjson.Set(web, "excluded_websites", spec.ExcludeDomains)
			}
			params := `{"mode":"on","return_citations":true}`
			params, _ = sjson.Set(params, "max_search_results", spec.MaxResults)
			params, _ = sjson.SetRaw(params, "sources.-1", web)
			if x := spec.XSearch; x != nil {
				src := `{"type":"x"}`
				if len(x.AllowedXHandles) > 0 {
					src, _ = sjson.Set(src, "included_x_handles", x.AllowedXHandles)
				}
				if len(x.ExcludedXHandles) > 0 {
					src, _ = sjson.Set(src, "excluded_x_handles", x.ExcludedXHandles)
				}
				src = xFlags(src, x)
				params, _ = sjson.SetRaw(params, "sources.-1", src)
				if x.FromDate != "" {
					params, _ = sjson.Set(params, "from_date", x.FromDate)
				}
				if x.ToDate != "" {
					params, _ = sjson.Set(params, "to_date", x.ToDate)
				}
			}
			return setRaw(body, "search_parameters", params)
		}
		tool := `{"type":"web_search"}`
		if len(spec.IncludeDomains) > 0 {
			tool, _ = sjson.Set(tool, "filters.allowed_domains", spec.IncludeDomains)
		}
		if len(spec.ExcludeDomains) > 0 {
			tool, _ = sjson.Set(tool, "filters.excluded_domains", spec.ExcludeDomains)
		}
		out, apiErr := appendTool(body, tool)
		if apiErr != nil || spec.XSearch == nil {
			return out, apiErr
		}
		x := spec.XSearch
		xt := `{"type":"x_search"}`
		if len(x.AllowedXHandles) > 0 {
			xt, _ = sjson.Set(xt, "allowed_x_handles", x.AllowedXHandles)
		}
		if len(x.ExcludedXHandles) > 0 {
			xt, _ = sjson.Set(xt, "excluded_x_handles", x.ExcludedXHandles)
		}
		if x.FromDate != "" {
			xt, _ = sjson.Set(xt, "from_date", x.FromDate)
		}
		if x.ToDate != "" {
			xt, _ = sjson.Set(xt, "to_date", x.ToDate)
		}
		return appendTool(out, xFlags(xt, x))
	}
	return nil, apierror.BadRequest("engine: native web search is not available for this model")
}

func xFlags(obj string, x *search.XSearch) string {
	if x.EnableImageUnderstanding {
		// sjson fails only on a malformed path, and these are well-formed.
		obj, _ = sjson.Set(obj, "enable_image_understanding", true)
	}
	if x.EnableVideoUnderstanding {
		obj, _ = sjson.Set(obj, "enable_video_understanding", true)
	}
	return obj
}

// withExtra copies the named pass-through parameters of the request into obj.
func withExtra(obj string, spec *search.Spec, names ...string) string {
	for _, n := range names {
		if raw, ok := spec.Extra[n]; ok && json.Valid(raw) {
			// sjson fails only on a malformed path, and these are well-formed.
			obj, _ = sjson.SetRaw(obj, n, string(raw))
		}
	}
	return obj
}

func setRaw(body []byte, key, raw string) ([]byte, *apierror.Error) {
	out, err := sjson.SetRawBytes(body, key, []byte(raw))
	if err != nil {
		return nil, apierror.BadRequest("Request body is not valid JSON")
	}
	return out, nil
}

// appendTool adds tool at the end of tools (created when absent).
func appendTool(body []byte, tool string) ([]byte, *apierror.Error) {
	if gjson.GetBytes(body, "tools").IsArray() {
		return setRaw(body, "tools.-1", tool)
	}
	return setRaw(body, "tools", "["+tool+"]")
}
