package presets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// Named returns the slug of the preset an inference body names, and the
// member that names it: "model" for a model "@preset/<slug>", "preset"
// for the preset member. slug is "" when it names none; a body that
// mentions no preset costs two scans and no allocation. A malformed
// preset member, or a model and a preset member naming two presets, is
// an error naming the member.
func Named(body []byte) (slug, field string, err error) {
	if !bytes.Contains(body, []byte(ModelPrefix)) && !bytes.Contains(body, []byte(`"preset"`)) {
		return "", "", nil
	}
	var fromModel, fromMember string
	rawjson.EachMember(rawjson.View(body), func(key, val string) bool {
		switch key {
		case "model":
			if v := rawjson.Member(val, true); v.Type == gjson.String && IsPresetModel(v.Str) {
				fromModel = v.Str[len(ModelPrefix):]
				if fromModel == "" {
					err = fmt.Errorf("model: %q names no preset", v.Str)
				}
			}
		case "preset":
			v := rawjson.Member(val, true)
			switch {
			case v.Type == gjson.Null:
			case v.Type != gjson.String || v.Str == "":
				err = fmt.Errorf("preset: expected a preset's slug")
			default:
				fromMember = v.Str
			}
		}
		return err == nil
	})
	switch {
	case err != nil:
		return "", "", err
	case fromModel != "" && fromMember != "" && fromModel != fromMember:
		return "", "", fmt.Errorf("preset: %q differs from the model's preset %q", fromMember, fromModel)
	case fromModel != "":
		return fromModel, "model", nil
	case fromMember != "":
		return fromMember, "preset", nil
	}
	return "", "", nil
}

// Apply merges a preset's version into an inference body of kind (the
// body names it: Named). The request's own members win; the preset gives
// what it leaves out:
//
//   - the model: the preset's model and models, unless the request names
//     a model of its own (not "@preset/...") or models;
//   - provider preferences: member by member, the request's winning;
//   - the output limit: the preset's, under the name the request's API
//     gives it, unless the request sets one (any of max_tokens,
//     max_completion_tokens, max_output_tokens); stop sequences likewise;
//   - any other member the request's API defines, when the request does
//     not send it (a null member counts as not sent);
//   - the system prompt goes before the request's own: a first system
//     message (chat), the start of system (Messages) or of instructions
//     (Responses).
//
// The preset member is removed. A body left without a model is an error
// naming it.
func Apply(kind dialect.Kind, body []byte, v *Version) ([]byte, error) {
	type kv struct{ key, val string }
	var req []kv
	has := map[string]bool{}
	rawjson.EachMember(rawjson.View(body), func(key, val string) bool {
		req = append(req, kv{key, val})
		if val != "null" {
			has[key] = true
		}
		return true
	})
	ownModel := false
	if m, ok := find(req, "model"); ok {
		if mv := rawjson.Member(m, true); mv.Type == gjson.String && !IsPresetModel(mv.Str) && mv.Str != "" {
			ownModel = true
		}
	}
	ownModel = ownModel || has["models"]
	var cfg []kv
	rawjson.EachMember(v.Config, func(key, val string) bool {
		cfg = append(cfg, kv{key, val})
		return true
	})

	out := make([]byte, 0, len(body)+len(v.Config)+64)
	out = append(out, '{')
	add := func(key, val string) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, val...)
	}
	sys := ""
	if v.SystemPrompt != nil {
		sys = *v.SystemPrompt
	}
	for _, m := range req {
		if m.val == "null" {
			// not sent: the preset's member (under its name for the API)
			// or the system prompt may take its place
			if _, known := memberNamed(m.key); known || sys != "" && (m.key == "system" || m.key == "instructions") {
				continue
			}
		}
		switch {
		case m.key == "preset":
			continue
		case m.key == "model" && !ownModel:
			continue // the preset's, below
		case m.key == "provider" && has["provider"]:
			if p, ok := find(cfg, "provider"); ok {
				add(m.key, mergeObjects(m.val, p))
				continue
			}
		case sys != "" && kind == dialect.Chat && m.key == "messages":
			add(m.key, prependSystemMessage(m.val, sys))
			continue
		case sys != "" && kind == dialect.Messages && m.key == "system" && m.val != "null":
			add(m.key, prependSystem(m.val, sys))
			continue
		case sys != "" && kind == dialect.Responses && m.key == "instructions" && m.val != "null":
			add(m.key, prependInstructions(m.val, sys))
			continue
		}
		add(m.key, m.val)
	}
	setsLimit := slices.ContainsFunc(outputLimits, func(k string) bool { return has[k] })
	setsStop := slices.ContainsFunc(stops, func(k string) bool { return has[k] })
	limitDone, stopDone := false, false
	for _, c := range cfg {
		switch {
		case c.key == "model" || c.key == "models":
			if !ownModel {
				add(c.key, c.val)
			}
		case slices.Contains(outputLimits, c.key):
			if setsLimit || limitDone {
				continue
			}
			add(outputLimitName(kind, c.key), c.val)
			limitDone = true
		case slices.Contains(stops, c.key):
			if setsStop || stopDone || kind == dialect.Responses {
				continue
			}
			name, val := stopFor(kind, c.val)
			add(name, val)
			stopDone = true
		case c.key == "provider" && has["provider"]:
			// merged above
		default:
			mem, ok := memberNamed(c.key)
			if ok && mem.in(kind) && !has[c.key] {
				add(c.key, c.val)
			}
		}
	}
	if sys != "" {
		switch kind {
		case dialect.Messages:
			if !has["system"] {
				s, _ := json.Marshal(sys)
				add("system", string(s))
			}
		case dialect.Responses:
			if !has["instructions"] {
				s, _ := json.Marshal(sys)
				add("instructions", string(s))
			}
		case dialect.Chat:
			if _, ok := find(req, "messages"); !ok {
				add("messages", prependSystemMessage("[]", sys))
			}
		}
	}
	out = append(out, '}')
	if !ownModel {
		if _, ok := find(cfg, "model"); !ok {
			if _, ok := find(cfg, "models"); !ok {
				return nil, fmt.Errorf("model: the preset %q names no model, and the request none", v.Slug)
			}
		}
	}
	return out, nil
}

func find[T interface{ ~struct{ key, val string } }](list []T, key string) (string, bool) {
	for _, e := range list {
		x := struct{ key, val string }(e)
		if x.key == key {
			return x.val, true
		}
	}
	return "", false
}

// mergeObjects is the object req with the members of preset it lacks.
func mergeObjects(req, preset string) string {
	if !gjson.Parse(req).IsObject() {
		return req
	}
	have := map[string]bool{}
	out := []byte{'{'}
	rawjson.EachMember(req, func(k, val string) bool {
		have[k] = true
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(append(append(out, kb...), ':'), val...)
		return true
	})
	rawjson.EachMember(preset, func(k, val string) bool {
		if !have[k] {
			if len(out) > 1 {
				out = append(out, ',')
			}
			kb, _ := json.Marshal(k)
			out = append(append(append(out, kb...), ':'), val...)
		}
		return true
	})
	return string(append(out, '}'))
}

// prependSystemMessage puts a system message with sys first in a chat
// request's messages.
func prependSystemMessage(messages, sys string) string {
	if !gjson.Parse(messages).IsArray() {
		return messages
	}
	m, _ := json.Marshal(map[string]string{"role": "system", "content": sys})
	rest := rawjson.SkipSpace(messages, 0) + 1 // past '['
	if gjson.Parse(messages).Get("#").Int() == 0 {
		return "[" + string(m) + "]"
	}
	return "[" + string(m) + "," + messages[rest:]
}

// prependSystem puts sys before a Messages request's system (a string or
// text blocks).
func prependSystem(system, sys string) string {
	v := gjson.Parse(system)
	switch {
	case v.Type == gjson.String:
		s, _ := json.Marshal(sys + "\n\n" + v.Str)
		return string(s)
	case v.IsArray():
		b, _ := json.Marshal(map[string]string{"type": "text", "text": sys})
		if v.Get("#").Int() == 0 {
			return "[" + string(b) + "]"
		}
		return "[" + string(b) + "," + system[rawjson.SkipSpace(system, 0)+1:]
	}
	return system
}

// prependInstructions puts sys before a Responses request's instructions.
func prependInstructions(instructions, sys string) string {
	v := gjson.Parse(instructions)
	if v.Type != gjson.String {
		return instructions
	}
	s, _ := json.Marshal(sys + "\n\n" + v.Str)
	return string(s)
}

// outputLimitName is the name kind's API gives an output limit.
func outputLimitName(kind dialect.Kind, name string) string {
	switch kind {
	case dialect.Messages:
		return "max_tokens"
	case dialect.Responses:
		return "max_output_tokens"
	}
	if name == "max_output_tokens" {
		return "max_tokens"
	}
	return name
}

// stopFor is a stop member as kind's API names it: chat's stop (a string
// or strings), Messages' stop_sequences (strings).
func stopFor(kind dialect.Kind, val string) (string, string) {
	if kind == dialect.Messages {
		if v := gjson.Parse(val); v.Type == gjson.String {
			b, _ := json.Marshal([]string{v.Str})
			return "stop_sequences", string(b)
		}
		return "stop_sequences", val
	}
	return "stop", val
}
