package engines_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines/enginetest"
)

func TestConformance(t *testing.T) {
	for _, c := range []enginetest.Case{
		{Module: new(engines.ExaModule), Answer: `{"results":[` +
			`{"title":"A one","url":"https://a.example/1","publishedDate":"2025-01-01","highlights":["a one"]},` +
			`{"title":"B two","url":"https://b.example/2","text":"b two"},` +
			`{"title":"A three","url":"https://a.example/3","highlights":["a three"]}]}`},
		{Module: new(engines.FirecrawlModule), Answer: `{"success":true,"data":{"web":[` +
			`{"title":"A one","url":"https://a.example/1","description":"a one"},` +
			`{"title":"B two","url":"https://b.example/2","description":"b two"},` +
			`{"title":"A three","url":"https://a.example/3","description":"a three"}]}}`},
		{Module: new(engines.ParallelModule), Answer: `{"search_id":"s1","results":[` +
			`{"title":"A one","url":"https://a.example/1","excerpts":["a one"]},` +
			`{"title":"B two","url":"https://b.example/2","excerpts":["b two"]},` +
			`{"title":"A three","url":"https://a.example/3","excerpts":["a three"]}]}`},
		{Module: new(engines.SearXNGModule), Answer: `{"query":"golang","results":[` +
			`{"title":"A one","url":"https://a.example/1","content":"a one"},` +
			`{"title":"B two","url":"https://b.example/2","content":"b two"},` +
			`{"title":"A three","url":"https://a.example/3","content":"a three"}]}`},
	} {
		t.Run(c.Module.CaddyModule().ID.Name(), func(t *testing.T) { enginetest.Run(t, c) })
	}
}
