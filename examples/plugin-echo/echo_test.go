package echo_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	echo "github.com/tollgate-dev/caddy-tollgate/examples/plugin-echo"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{Plugin: &echo.Echo{Header: "X-Echo"}, Kind: dialect.Chat,
		Asks: `{"model":"m","messages":[{"role":"user","content":"hi"}],"plugins":[{"id":"echo","value":"abc"}]}`})
}
