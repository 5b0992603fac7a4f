// Package bedrock is Amazon Bedrock's Converse API as a provider dialect
// (style bedrock): Converse and ConverseStream, for the Anthropic, Llama,
// Mistral, Nova and other models Bedrock serves, every request signed
// with AWS Signature V4 (the AWS SDK for Go v2's signer). Every route
// reaches it through chat completions.
package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// Style is the dialect's name in provider blocks.
const Style = "bedrock"

func init() { caddy.RegisterModule(Module{}) }

// Parameters are the chat parameters Converse takes.
var Parameters = []string{"max_tokens", "temperature", "top_p", "top_k", "stop", "tools", "tool_choice"}

// ThinkingParameters are those an Anthropic model takes: Parameters, and
// a reasoning effort as its extended thinking (a Messages request's
// thinking reaches it so), its reasoning answered.
var ThinkingParameters = append(Parameters[:len(Parameters):len(Parameters)], "reasoning", "include_reasoning")

var region = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-\d$`)

// Dialect is one Bedrock provider: a model in a region.
type Dialect struct {
	region           string
	converse, stream string // URIs
	signer           *v4.Signer
	// thinks: the model is Anthropic's (Claude), whose extended thinking
	// a reasoning effort enables.
	thinks bool
	// embed is the model's InvokeModel URI; family its embedding API
	// (embedTitan, embedTitanImage, embedCohere), "" for a model that
	// does not embed.
	embed, family string
}

// New is the dialect of one provider block: aws_region (o.Settings) is
// required.
func New(o dialect.Options) (dialect.Dialect, error) {
	m := &Module{AWSRegion: o.Settings["aws_region"]}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m.New(o)
}

// Module is the bedrock dialect as a guest module: a model in a region.
type Module struct {
	// AWSRegion is the region of the Bedrock endpoint, e.g. us-east-1.
	AWSRegion string `json:"aws_region,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + Style, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `bedrock { aws_region <region> }`.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, Style, map[string]*string{"aws_region": &m.AWSRegion})
}

// Validate checks the region.
func (m *Module) Validate() error {
	switch r := m.AWSRegion; {
	case r == "":
		return errors.New("aws_region: required for style bedrock, e.g. us-east-1")
	case !region.MatchString(r):
		return fmt.Errorf("aws_region: %q is not an AWS region", r)
	}
	return nil
}

// New implements dialect.Module.
func (m *Module) New(o dialect.Options) (dialect.Dialect, error) {
	p := url.PathEscape(o.Model)
	return &Dialect{region: m.AWSRegion, converse: "/model/" + p + "/converse", stream: "/model/" + p + "/converse-stream", signer: v4.NewSigner(),
		thinks: strings.Contains(o.Model, "claude"), embed: "/model/" + p + "/invoke", family: embeddingFamily(o.Model)}, nil
}

var (
	_ dialect.Module        = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return Style }

// Native implements dialect.Dialect: no route is Converse.
func (d *Dialect) Native(dialect.Kind) bool { return false }

// Serves implements dialect.Dialect: the generation routes.
func (d *Dialect) Serves(k dialect.Kind) bool { return k != dialect.Other }

// Adapt implements dialect.Dialect (never native).
func (d *Dialect) Adapt(_ dialect.Kind, body []byte, _ int64) ([]byte, error) { return body, nil }

// FromChat implements dialect.Dialect.
func (d *Dialect) FromChat(chat []byte, _ int64) ([]byte, error) { return fromChat(chat, d.thinks) }

// ToChat implements dialect.Dialect.
func (d *Dialect) ToChat(w http.ResponseWriter, model string, limit int) dialect.AnswerReader {
	return newToChat(w, model, limit)
}

// URI implements dialect.Dialect: the model's converse or converse-stream.
func (d *Dialect) URI(_ dialect.Kind, _ bool, _ string, stream bool) string {
	if stream {
		return d.stream
	}
	return d.converse
}

// SetHeaders implements dialect.Dialect.
func (d *Dialect) SetHeaders(h http.Header) {
	dialect.ClearCredentials(h)
	delete(h, "X-Amz-Date")
	delete(h, "X-Amz-Security-Token")
}

// SetKey implements dialect.Dialect: the key signs the request (Sign).
func (d *Dialect) SetKey(http.Header, string) {}

// Credentials reads a provider key: "<access key id>:<secret access key>"
// with an optional ":<session token>".
func Credentials(key string) (aws.Credentials, error) {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return aws.Credentials{}, errors.New("bedrock: the key is <access key id>:<secret access key>[:<session token>]")
	}
	c := aws.Credentials{AccessKeyID: parts[0], SecretAccessKey: parts[1]}
	if len(parts) == 3 {
		c.SessionToken = parts[2]
	}
	return c, nil
}

// Sign implements dialect.Signer: AWS Signature V4 of the request as sent
// (its host, path, query, headers and body's SHA-256), for service
// bedrock in the provider's region.
func (d *Dialect) Sign(req *http.Request, body []byte, key string) error {
	creds, err := Credentials(key)
	if err != nil {
		return err
	}
	// Signed: the host, the path and query, the content type and the
	// x-amz-* headers, not the forwarding headers (X-Forwarded-For, Via)
	// a proxy on the way may change.
	signed := &http.Request{Method: req.Method, URL: req.URL, Host: req.Host,
		Header: http.Header{"Content-Type": req.Header.Values("Content-Type")}}
	sum := sha256.Sum256(body)
	if err := d.signer.SignHTTP(context.Background(), creds, signed, hex.EncodeToString(sum[:]), "bedrock", d.region, time.Now()); err != nil {
		return err
	}
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := signed.Header.Values(h); v != nil {
			req.Header[h] = v
		}
	}
	return nil
}

// OutputLimitField implements dialect.Dialect: the chat body's
// max_tokens, sent as inferenceConfig.maxTokens.
func (d *Dialect) OutputLimitField(dialect.Kind, bool) string { return "max_tokens" }

// RequiresOutputLimit implements dialect.Dialect.
func (d *Dialect) RequiresOutputLimit() bool { return false }

// Parameters implements dialect.Dialect.
func (d *Dialect) Parameters() []string {
	if d.thinks {
		return ThinkingParameters
	}
	return Parameters
}

// SearchFamily implements dialect.Dialect.
func (d *Dialect) SearchFamily() string { return "" }

// RequiresKey implements dialect.KeyRequirer: every request is signed.
func (d *Dialect) RequiresKey() bool { return true }

// Failure implements dialect.Dialect: {"message"} with the error type in
// the x-amzn-ErrorType header (ThrottlingException, ...), the provider's
// code.
func (d *Dialect) Failure(_ int, h http.Header, body []byte) (any, string) {
	code, msg := dialect.ErrorBody(body)
	if m := gjson.GetBytes(body, "message").Str; m != "" {
		msg = m
	}
	if t, _, _ := strings.Cut(h.Get("X-Amzn-Errortype"), ":"); t != "" {
		code = t
	}
	return code, msg
}
