package echo_test

import (
	"testing"

	echo "github.com/tollgate-dev/caddy-tollgate/examples/engine-echo"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines/enginetest"
)

func TestConformance(t *testing.T) {
	enginetest.Run(t, enginetest.Case{Module: new(echo.Module), Answer: `{"hits":[` +
		`{"title":"A one","link":"https://a.example/1","summary":"a one"},` +
		`{"title":"B two","link":"https://b.example/2","summary":"b two"},` +
		`{"title":"A three","link":"https://a.example/3","summary":"a three"}]}`})
}
