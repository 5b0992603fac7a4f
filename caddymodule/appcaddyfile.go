package caddymodule

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
	"github.com/tollgate-dev/caddy-tollgate/internal/caddyfileopt"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// parseGlobalOption makes the tollgate app of the global option (see
// App.UnmarshalCaddyfile).
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{
		Name:  gateway.AppName,
		Value: caddyconfig.JSON(app, nil),
	}, nil
}

// UnmarshalCaddyfile sets up the app from the tollgate global option:
//
//	tollgate {
//		data_dir     <path>
//		brand        <name>
//		gc_interval  <duration>
//		generation_retention <duration>
//		sync_writes  [on|off]
//		free_model {
//			per_minute     <n>
//			per_day        <n>
//			per_day_paid   <n>
//			paid_threshold <credits>
//		}
//		in_flight {
//			fraction          <0..1>
//			ceiling           <credits>
//			per_request_cap   <credits>
//			settlement_window <duration>
//			balance_threshold <credits>
//			established_usage <credits>
//		}
//		web_search {
//			default_engine <name>
//			native_price   <credits per result>
//			engine <exa|firecrawl|parallel|searxng> {
//				base_url         <url>
//				api_key          <key or {env.VAR}>
//				username         <user>
//				price_per_result <credits>
//				max_results      <1..25>
//				timeout          <duration>
//			}
//		}
//		moderation {
//			base_url <url>
//			api_key  <key or {env.VAR}>
//			model    <moderation model>
//			name     <provider name reported>
//			price    <credits per moderation call>
//			timeout  <duration>
//			fail_open
//		}
//		models_file <path>
//		byok_encryption_key <base64 32-byte key or {env.VAR}>
//		customer_egress {
//			allow <cidr or ip>...
//		}
//		metrics_per_key <max keys>
//		storage redis {
//			address    <host:port>
//			username   <ACL user>
//			password   <password or {env.VAR}>
//			db         <n>
//			tls
//			key_prefix <prefix>
//			hold_lease <duration>
//		}
//		model <id> {
//			name                  <name>
//			context_length        <tokens>
//			max_completion_tokens <tokens>
//			tokenizer             o200k_base|cl100k_base|bytes
//			moderation
//			pricing {
//				prompt     <credits per token>
//				completion <credits per token>
//				request    <credits per request>
//				web_search <credits per result>
//			}
//			provider <name> <base_url> {
//				search_family <openai|anthropic|x|none>
//				model   <upstream model id>
//				api_key <key or {env.VAR}>
//				style   openai
//				api     chat|responses
//				max_tokens_field max_tokens|max_completion_tokens
//				zdr
//				data_collection allow|deny
//				publication     allow|deny
//				region          global|europe|us
//				quantization    <int4|int8|fp4|mxfp4|nvfp4|fp6|fp8|mxfp8|fp16|bf16|fp32|unknown>
//				supported_parameters <parameter>...
//				dial_timeout            <duration>
//				response_header_timeout <duration>
//				first_byte_timeout      <duration>
//				pricing {
//					prompt     <credits per token>
//					completion <credits per token>
//					...        (as the model's pricing)
//				}
//			}
//			distillable_text
//		}
//	}
//
// Values are checked where a line can be named (durations, counts,
// amounts); the rest is checked by Provision and Validate when the config
// loads.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "data_dir":
			if !d.AllArgs(&a.DataDir) {
				return d.ArgErr()
			}
		case "storage":
			raw, err := parseStorage(d)
			if err != nil {
				return err
			}
			a.StorageRaw = raw
		case "brand":
			if !d.AllArgs(&a.BrandName) {
				return d.ArgErr()
			}
		case "sync_writes":
			on, err := caddyfileopt.Switch(d)
			if err != nil {
				return err
			}
			a.SyncWrites = on
		case "gc_interval":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return err
			}
			a.GCInterval = dur
		case "generation_retention":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return err
			}
			if err := checkGenerationRetention(dur); err != nil {
				return d.Err(err.Error())
			}
			a.GenerationRetention = dur
		case "connect_code_ttl":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return err
			}
			a.CodeTTL = dur
		case "free_model":
			for inner := d.Nesting(); d.NextBlock(inner); {
				opt := d.Val()
				var err error
				switch opt {
				case "per_minute":
					a.FreeModel.PerMinute, err = positiveIntArg(d)
				case "per_day":
					a.FreeModel.PerDay, err = positiveIntArg(d)
				case "per_day_paid":
					a.FreeModel.PerDayPaid, err = positiveIntArg(d)
				case "paid_threshold":
					a.FreeModel.PaidThreshold, err = amountArg(d)
				default:
					return suggest.UnknownOption(d, "free_model", []string{"per_minute", "per_day", "per_day_paid", "paid_threshold"})
				}
				if err != nil {
					return err
				}
			}
		case "rate_limits":
			if a.RateLimits == nil {
				a.RateLimits = new(storage.RateLimits)
			}
			for inner := d.Nesting(); d.NextBlock(inner); {
				opt := d.Val()
				n, err := positiveIntArg(d)
				if err != nil {
					return err
				}
				if !a.RateLimits.Set(opt, n) {
					return suggest.UnknownOption(d, "rate_limits", storage.RateLimitNames)
				}
			}
		case "in_flight":
			cfg, err := parseInFlight(d)
			if err != nil {
				return err
			}
			a.InFlight = cfg
		case "models_file":
			if !d.AllArgs(&a.ModelsFile) {
				return d.ArgErr()
			}
		case "byok_encryption_key":
			if !d.AllArgs(&a.BYOKKey) {
				return d.ArgErr()
			}
		case "web_search":
			cfg, err := parseWebSearchOption(d)
			if err != nil {
				return err
			}
			a.WebSearch = cfg
		case "moderation":
			cfg, err := parseModeration(d)
			if err != nil {
				return err
			}
			a.Moderation = cfg
		case "customer_egress":
			cfg, err := parseEgress(d)
			if err != nil {
				return err
			}
			a.CustomerEgress = cfg
		case "metrics_per_key":
			n, err := positiveIntArg(d)
			if err != nil {
				return err
			}
			if n > MaxMetricsPerKey {
				return d.Errf("metrics_per_key: expected at most %d keys, got %d", MaxMetricsPerKey, n)
			}
			a.MetricsPerKey = int(n)
		case "model":
			m, err := parseModel(d)
			if err != nil {
				return err
			}
			a.Models = append(a.Models, m)
		default:
			return suggest.UnknownOption(d, "tollgate", tollgateOptions)
		}
	}
	return nil
}

// tollgateOptions are the tollgate global option's options, for suggestions.
var tollgateOptions = []string{"data_dir", "storage", "brand", "sync_writes", "gc_interval", "generation_retention", "free_model", "rate_limits", "in_flight",
	"models_file", "byok_encryption_key", "web_search", "customer_egress", "metrics_per_key", "model", "moderation",
	"connect_code_ttl"}

// providerOptions are a model's provider's options, for suggestions.
var providerOptions = []string{"search_family", "model", "api_key", "style", "api", "max_tokens_field", "zdr",
	"data_collection", "publication", "region", "quantization", "supported_parameters", "system_messages", "pricing",
	"dial_timeout", "response_header_timeout", "first_byte_timeout",
	"deployment", "api_version", "auth", "aws_region"} // the last: dialects' own (dialect.Settings)

// parseModeration parses the moderation block.
func parseModeration(d *caddyfile.Dispenser) (*moderation.Config, error) {
	cfg := new(moderation.Config)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch d.Val() {
		case "base_url":
			dst = &cfg.BaseURL
		case "api_key":
			dst = &cfg.APIKey
		case "model":
			dst = &cfg.Model
		case "name":
			dst = &cfg.Name
		case "price":
			dst = &cfg.Price
		case "timeout":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return nil, err
			}
			cfg.Timeout = dur
			continue
		case "fail_open":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			cfg.FailOpen = true
			continue
		default:
			return nil, suggest.UnknownOption(d, "moderation", []string{"base_url", "api_key", "model", "name", "price", "timeout", "fail_open"})
		}
		if !d.AllArgs(dst) {
			return nil, d.ArgErr()
		}
	}
	if cfg.BaseURL == "" {
		return nil, d.Err("moderation: base_url is required")
	}
	if _, err := cfg.PriceAmount(); err != nil {
		return nil, d.Err(err.Error())
	}
	return cfg, nil
}

// parseInFlight parses the in_flight block; values are checked as the
// app's Validate does, so that errors point at the line.
func parseInFlight(d *caddyfile.Dispenser) (*InFlightConfig, error) {
	cfg := new(InFlightConfig)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var dst *string
		switch opt {
		case "fraction":
			dst = &cfg.Fraction
		case "ceiling":
			dst = &cfg.Ceiling
		case "per_request_cap":
			dst = &cfg.PerRequestCap
		case "balance_threshold":
			dst = &cfg.BalanceThreshold
		case "established_usage":
			dst = &cfg.EstablishedUsage
		case "settlement_window":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return nil, err
			}
			cfg.SettlementWindow = dur
			continue
		default:
			return nil, suggest.UnknownOption(d, "in_flight", []string{"fraction", "ceiling", "per_request_cap", "balance_threshold", "established_usage", "settlement_window"})
		}
		if !d.AllArgs(dst) {
			return nil, d.ArgErr()
		}
		if err := checkInFlightField(opt, *dst); err != nil {
			return nil, d.Err(err.Error())
		}
	}
	return cfg, nil
}

// parseModel parses one `model <id> { ... }` block of the tollgate option.
func parseModel(d *caddyfile.Dispenser) (ModelConfig, error) {
	var m ModelConfig
	if !d.NextArg() {
		return m, d.ArgErr()
	}
	m.ID = d.Val()
	file, line := d.File(), d.Line()
	if d.NextArg() {
		return m, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "name":
			if !d.AllArgs(&m.Name) {
				return m, d.ArgErr()
			}
		case "moderation":
			if d.NextArg() {
				return m, d.ArgErr()
			}
			m.Moderation = true
		case "context_length":
			n, err := positiveIntArg(d)
			if err != nil {
				return m, err
			}
			m.ContextLength = n
		case "max_completion_tokens":
			n, err := positiveIntArg(d)
			if err != nil {
				return m, err
			}
			m.MaxCompletionTokens = n
		case "tokenizer":
			if !d.AllArgs(&m.Tokenizer) {
				return m, d.ArgErr()
			}
		case "pricing":
			if err := parsePricing(d, &m.Pricing); err != nil {
				return m, err
			}
		case "distillable_text":
			if d.NextArg() {
				return m, d.ArgErr()
			}
			m.DistillableText = true
		case "provider":
			var p ProviderConfig
			if !d.Args(&p.Name, &p.BaseURL) || d.NextArg() {
				return m, d.ArgErr()
			}
			// The dialect's style and its own options, in the block or
			// the style's (`style X { ... }`), for the dialect's
			// UnmarshalCaddyfile once the block is read.
			var style string
			var dialectOpts []caddyfile.Token
			for inner := d.Nesting(); d.NextBlock(inner); {
				var dst *string
				switch d.Val() {
				case "search_family":
					dst = &p.SearchFamily
				case "model":
					dst = &p.Model
				case "api_key":
					dst = &p.APIKey
				case "style":
					if !d.NextArg() {
						return m, d.ArgErr()
					}
					style = d.Val()
					if d.NextArg() {
						return m, d.ArgErr()
					}
					for nest := d.Nesting(); d.NextBlock(nest); {
						dialectOpts = append(dialectOpts, d.NextSegment()...)
					}
					continue
				case "api":
					dst = &p.API
				case "max_tokens_field":
					dst = &p.MaxTokensField
				case "zdr":
					if d.NextArg() {
						return m, d.ArgErr()
					}
					p.ZDR = true
					continue
				case "data_collection":
					dst = &p.DataCollection
				case "publication":
					dst = &p.Publication
				case "region":
					dst = &p.Region
				case "quantization":
					dst = &p.Quantization
				case "system_messages":
					dst = &p.SystemMessages
				case "supported_parameters":
					p.SupportedParameters = d.RemainingArgs()
					if len(p.SupportedParameters) == 0 {
						return m, d.ArgErr()
					}
					continue
				case "pricing":
					p.Pricing = new(PricingConfig)
					if err := parsePricing(d, p.Pricing); err != nil {
						return m, err
					}
					continue
				case "dial_timeout", "response_header_timeout", "first_byte_timeout":
					dst := map[string]*caddy.Duration{"dial_timeout": &p.DialTimeout, "response_header_timeout": &p.ResponseHeaderTimeout,
						"first_byte_timeout": &p.FirstByteTimeout}[d.Val()]
					dur, err := caddyfileopt.Duration(d)
					if err != nil {
						return m, err
					}
					*dst = dur
					continue
				default:
					// A dialect's own option; its style reads it.
					if slices.Contains(dialect.Settings(), d.Val()) {
						dialectOpts = append(dialectOpts, d.NextSegment()...)
						continue
					}
					return m, suggest.UnknownOption(d, "provider", providerOptions)
				}
				if !d.AllArgs(dst) {
					return m, d.ArgErr()
				}
			}
			if style != "" || len(dialectOpts) > 0 {
				if err := unmarshalDialect(&p, style, dialectOpts); err != nil {
					return m, err
				}
			}
			if _, err := p.provider(); err != nil {
				return m, d.Err(err.Error())
			}
			m.Providers = append(m.Providers, p)
		default:
			return m, suggest.UnknownOption(d, "model", []string{"name", "context_length", "max_completion_tokens", "tokenizer", "moderation", "pricing", "distillable_text", "provider"})
		}
	}
	// What Provision would refuse, refused here at the model's line.
	if err := m.check(); err != nil {
		return m, fmt.Errorf("%v, at %s:%d", err, file, line)
	}
	return m, nil
}

// parsePricing parses a `pricing { ... }` block, of a model or of one of
// its providers.
func parsePricing(d *caddyfile.Dispenser, pc *PricingConfig) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for inner := d.Nesting(); d.NextBlock(inner); {
		var dst *string
		switch d.Val() {
		case "prompt":
			dst = &pc.Prompt
		case "completion":
			dst = &pc.Completion
		case "request":
			dst = &pc.Request
		case "web_search":
			dst = &pc.WebSearch
		case "input_cache_read":
			dst = &pc.InputCacheRead
		case "input_cache_write":
			dst = &pc.InputCacheWrite
		case "input_cache_write_1h":
			dst = &pc.InputCacheWrite1h
		case "override":
			o, err := parsePricingOverride(d)
			if err != nil {
				return err
			}
			pc.Overrides = append(pc.Overrides, o)
			continue
		case "search_unit":
			dst = &pc.SearchUnit
		case "document":
			dst = &pc.Document
		case "image_output":
			dst = &pc.ImageOutput
		case "character":
			dst = &pc.Character
		case "audio_second":
			dst = &pc.AudioSecond
		default:
			return suggest.UnknownOption(d, "pricing", []string{"prompt", "completion", "request", "web_search", "input_cache_read", "input_cache_write", "input_cache_write_1h", "override",
				"search_unit", "document", "image_output", "character", "audio_second"})
		}
		if !d.AllArgs(dst) {
			return d.ArgErr()
		}
	}
	return nil
}

// parsePricingOverride parses an `override { ... }` block of a pricing:
// its conditions (min_prompt_tokens, utc_start, utc_end) and prices.
func parsePricingOverride(d *caddyfile.Dispenser) (PricingOverrideConfig, error) {
	var o PricingOverrideConfig
	if d.NextArg() {
		return o, d.ArgErr()
	}
	for inner := d.Nesting(); d.NextBlock(inner); {
		var price *string
		var cond **float64
		key := d.Val()
		switch key {
		case "min_prompt_tokens":
			cond = &o.MinPromptTokens
		case "utc_start":
			cond = &o.UTCStart
		case "utc_end":
			cond = &o.UTCEnd
		case "prompt":
			price = &o.Prompt
		case "completion":
			price = &o.Completion
		case "input_cache_read":
			price = &o.InputCacheRead
		case "input_cache_write":
			price = &o.InputCacheWrite
		case "input_cache_write_1h":
			price = &o.InputCacheWrite1h
		default:
			return o, suggest.UnknownOption(d, "override", []string{"min_prompt_tokens", "utc_start", "utc_end", "prompt", "completion", "input_cache_read", "input_cache_write", "input_cache_write_1h"})
		}
		if price != nil {
			if !d.AllArgs(price) {
				return o, d.ArgErr()
			}
			continue
		}
		var v string
		if !d.AllArgs(&v) {
			return o, d.ArgErr()
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return o, d.Errf("%s: %q is not a number", key, v)
		}
		*cond = &f
	}
	return o, nil
}

// unmarshalDialect sets p's dialect: style's module (openai's when
// empty) with opts, the lines of its options, read by its own
// UnmarshalCaddyfile as the block of `style { ... }`. A style that no
// module registers is kept in the older fields, for the provider's check
// to refuse where it always did.
func unmarshalDialect(p *ProviderConfig, style string, opts []caddyfile.Token) error {
	if style == "" {
		style = "openai"
	}
	info, err := caddy.GetModule(dialect.Namespace + "." + style)
	if err != nil {
		p.Style = style
		return nil
	}
	mod := info.New()
	unm, ok := mod.(caddyfile.Unmarshaler)
	if !ok {
		return fmt.Errorf("dialect %s: its module %s reads no Caddyfile", style, info.ID)
	}
	tokens := []caddyfile.Token{{Text: style}}
	if len(opts) > 0 {
		// The option lines keep their places, for errors; the style and
		// its braces stand on a line of their own, before them.
		tokens = append(tokens, caddyfile.Token{Text: "{"})
		tokens = append(tokens, opts...)
		tokens = append(tokens, caddyfile.Token{File: opts[len(opts)-1].File, Line: opts[len(opts)-1].Line + 1, Text: "}"})
	}
	if err := unm.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
		return err
	}
	var warnings []caddyconfig.Warning
	p.DialectRaw = caddyconfig.JSONModuleObject(mod, "style", style, &warnings)
	if len(warnings) > 0 {
		return fmt.Errorf("dialect %s: %s", style, warnings[0].Message)
	}
	return nil
}
