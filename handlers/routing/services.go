package routing

import (
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/audio"
	"github.com/tollgate-dev/caddy-tollgate/handlers/images"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/rerank"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// services are the inference routes whose API is no chat one, by path
// below /api/v1: each checks its request into an upstream.Service.
var services = map[string]func(*reqbody.Fields) (upstream.Service, *apierror.Error){
	"/rerank": rerank.New,
	"/images": images.New,
	// OpenAI's path of the same call (its SDK's images.generate).
	"/images/generations": images.New,

	"/audio/speech":         audio.NewSpeech,
	"/audio/transcriptions": audio.NewTranscription,
}

// serviceFor is the service of the route at sub, with f its request's
// fields; nil for a route without one.
func serviceFor(sub string, f *reqbody.Fields) (upstream.Service, *apierror.Error) {
	if check := services[sub]; check != nil {
		return check(f)
	}
	return nil, nil
}
