package mockprovider

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		input      string
		wantErr    bool
		latency    time.Duration
		chunkDelay time.Duration
	}{
		{name: "bare", input: `tollgate_mock_provider`},
		{name: "empty block", input: "tollgate_mock_provider {\n}"},
		{
			name:       "both",
			input:      "tollgate_mock_provider {\n\tlatency 20ms\n\tchunk_delay 5ms\n}",
			latency:    20 * time.Millisecond,
			chunkDelay: 5 * time.Millisecond,
		},
		{name: "caddy duration units", input: "tollgate_mock_provider {\n\tlatency 1d\n}", latency: 24 * time.Hour},
		{name: "unknown subdirective", input: "tollgate_mock_provider {\n\tjitter 5ms\n}", wantErr: true},
		{name: "missing value", input: "tollgate_mock_provider {\n\tlatency\n}", wantErr: true},
		{name: "extra value", input: "tollgate_mock_provider {\n\tlatency 1s 2s\n}", wantErr: true},
		{name: "bad duration", input: "tollgate_mock_provider {\n\tchunk_delay soon\n}", wantErr: true},
		{name: "negative", input: "tollgate_mock_provider {\n\tlatency -1s\n}", wantErr: true},
		{name: "inline argument", input: `tollgate_mock_provider 20ms`, wantErr: true},
		{name: "prompt tokens", input: "tollgate_mock_provider {\n\tprompt_tokens bytes\n}"},
		{name: "prompt tokens unknown", input: "tollgate_mock_provider {\n\tprompt_tokens runes\n}", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := httpcaddyfile.Helper{Dispenser: caddyfile.NewTestDispenser(tc.input)}
			got, err := parseCaddyfile(h)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, ok := got.(*Handler)
			if !ok {
				t.Fatalf("got %T, want *Handler", got)
			}
			if m.Latency != caddy.Duration(tc.latency) || m.ChunkDelay != caddy.Duration(tc.chunkDelay) {
				t.Errorf("latency %v, chunk_delay %v; want %v, %v",
					time.Duration(m.Latency), time.Duration(m.ChunkDelay), tc.latency, tc.chunkDelay)
			}
		})
	}
}

func TestUnmarshalCaddyfileStrict(t *testing.T) {
	h := httpcaddyfile.Helper{Dispenser: caddyfile.NewTestDispenser("tollgate_mock_provider {\n\tstrict\n}")}
	got, err := parseCaddyfile(h)
	if err != nil || !got.(*Handler).Strict {
		t.Fatalf("%+v %v", got, err)
	}
	h = httpcaddyfile.Helper{Dispenser: caddyfile.NewTestDispenser("tollgate_mock_provider {\n\tstrict yes\n}")}
	if _, err := parseCaddyfile(h); err == nil {
		t.Fatal("strict takes no argument")
	}
}

func TestUnmarshalCaddyfileReasoningAndSystem(t *testing.T) {
	h := httpcaddyfile.Helper{Dispenser: caddyfile.NewTestDispenser("tollgate_mock_provider {\n\tstrict\n\tnon_reasoning_models gpt-4o gpt-4.1\n\tno_system_messages\n}")}
	got, err := parseCaddyfile(h)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.(*Handler); !m.NoSystemMessages || len(m.NonReasoningModels) != 2 || m.NonReasoningModels[1] != "gpt-4.1" {
		t.Fatalf("%+v", m)
	}
	for _, bad := range []string{"non_reasoning_models", "no_system_messages yes"} {
		h = httpcaddyfile.Helper{Dispenser: caddyfile.NewTestDispenser("tollgate_mock_provider {\n\t" + bad + "\n}")}
		if _, err := parseCaddyfile(h); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
