package handlers

import "strings"

// APIPrefix is where every route of the public API lives.
const APIPrefix = "/api/v1"

// routeKind says which key may call a route.
type routeKind int

const (
	routeUnknown    routeKind = iota
	routePublic               // no key needed; a key, when given, is checked
	routeInference            // regular keys only
	routeAnyKey               // regular or management key (GET /key)
	routeManagement           // management keys only
)

// managementRoutes are the administrative route groups of SPEC.md 4.5,
// relative to APIPrefix. A group matches itself and everything below it.
var managementRoutes = []string{
	"/activity", "/analytics", "/keys", "/byok", "/credits", "/end-users",
	"/generation/feedback", "/guardrails", "/observability", "/organization",
	"/private-endpoints", "/scim", "/workspaces",
}

// inferenceRoutes are the routes that reach a model provider, plus the
// per-key model list.
var inferenceRoutes = []string{
	"/chat/completions", "/completions", "/responses", "/embeddings", "/messages",
	"/models/user", "/generation",
}

// classifyRoute returns the route's kind and its path below APIPrefix; paths
// outside APIPrefix are routeUnknown with ok false.
func classifyRoute(path string) (kind routeKind, sub string, ok bool) {
	sub, ok = strings.CutPrefix(path, APIPrefix)
	if !ok || (sub != "" && sub[0] != '/') {
		return routeUnknown, "", false
	}
	sub = strings.TrimSuffix(sub, "/")
	switch {
	case sub == "/key":
		return routeAnyKey, sub, true
	case matchesGroup(sub, managementRoutes): // before inference: /generation/feedback
		return routeManagement, sub, true
	case matchesGroup(sub, inferenceRoutes):
		return routeInference, sub, true
	case sub == "/models" || strings.HasPrefix(sub, "/models/"):
		return routePublic, sub, true
	}
	return routeUnknown, sub, true
}

func matchesGroup(sub string, groups []string) bool {
	for _, g := range groups {
		if sub == g || strings.HasPrefix(sub, g+"/") {
			return true
		}
	}
	return false
}
