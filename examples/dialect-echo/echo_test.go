package echo_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/dialecttest"
	echo "github.com/tollgate-dev/caddy-tollgate/examples/dialect-echo"
)

func TestConformance(t *testing.T) {
	dialecttest.Run(t, dialecttest.Case{Module: &echo.Module{Greeting: "hello"}, Options: dialect.Options{Name: "echo"},
		ErrorStatus: 500, ErrorBody: []byte(`{"error":{"message":"echo failed"}}`)})
}
