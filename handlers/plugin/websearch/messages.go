package websearch

import (
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// The Messages route's web search: Anthropic's own search tool becomes
// the gateway's server tool, and the query is the last user text.

// anthropicSearchTools turns Anthropic's web search tool in a Messages
// request ({"type":"web_search_20250305","name":"web_search",
// allowed_domains, blocked_domains, ...}, as Claude Code sends it) into the
// gateway's web search server tool, which the gateway's engines serve
// whatever the provider: allowed_domains stay, blocked_domains become
// excluded_domains; max_uses and user_location have no use there (the
// gateway searches once, before the model answers).
func anthropicSearchTools(body []byte, brand string) ([]byte, *apierror.Error) {
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() || !strings.Contains(tools.Raw, "web_search_") {
		return body, nil
	}
	out := body
	var err error
	tools.ForEach(func(i, t gjson.Result) bool {
		if !strings.HasPrefix(t.Get("type").Str, "web_search_") {
			return true
		}
		params := []byte(`{}`)
		for _, f := range [][2]string{{"allowed_domains", "allowed_domains"}, {"blocked_domains", "excluded_domains"}} {
			if v := t.Get(f[0]); v.Exists() && v.Type != gjson.Null {
				if params, err = sjson.SetRawBytes(params, f[1], []byte(v.Raw)); err != nil {
					return false
				}
			}
		}
		tool := `{"type":` + string(jsonstr.Quote(brand+":web_search")) + `,"parameters":` + string(params) + `}`
		out, err = sjson.SetRawBytes(out, "tools."+i.String(), []byte(tool))
		return err == nil
	})
	if err != nil {
		return nil, apierror.BadRequest("tools: " + err.Error())
	}
	return out, nil
}

// lastMessagesUserText is the text of the last user message of a Messages
// request that has any: an agent's last user turn often holds only tool
// results.
func lastMessagesUserText(body []byte) string {
	msgs := gjson.GetBytes(body, "messages").Array()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Get("role").Str != "user" {
			continue
		}
		if text := strings.TrimSpace(reqbody.ContentText(msgs[i].Get("content"))); text != "" {
			return text
		}
	}
	return ""
}
