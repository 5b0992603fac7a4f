package openai_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/dialecttest"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

const openAIError = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`

func TestConformance(t *testing.T) {
	for _, api := range []string{dialect.APIResponses, dialect.APIChat} {
		t.Run("openai/"+api, func(t *testing.T) {
			dialecttest.Run(t, dialecttest.Case{Module: new(openai.Module), Options: dialect.Options{Name: "o", API: api},
				ErrorStatus: 429, ErrorBody: []byte(openAIError)})
		})
	}
	t.Run("azure", func(t *testing.T) {
		dialecttest.Run(t, dialecttest.Case{Module: &openai.AzureModule{Deployment: "gpt4o", APIVersion: "2024-10-21"},
			Options: dialect.Options{Name: "az"}, ErrorStatus: 429, ErrorBody: []byte(openAIError)})
	})
}
