package caddyfileopt

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want caddy.Duration
		err  string
	}{
		{in: "timeout 90s", want: caddy.Duration(90 * time.Second)},
		{in: "timeout 1d", want: caddy.Duration(24 * time.Hour)},
		{in: "timeout", err: "wrong argument count"},
		{in: "timeout 1s 2s", err: "wrong argument count"},
		{in: "timeout soon", err: `timeout: invalid duration "soon"`},
		{in: "timeout 0s", err: `timeout: invalid duration "0s"`},
		{in: "timeout -5s", err: `timeout: invalid duration "-5s"`},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		got, err := Duration(d)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got error %v; want one containing %q", tc.in, err, tc.err)
		}
	}
}

func TestSwitch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
		err  string
	}{
		{in: "sync_writes", want: true},
		{in: "sync_writes on", want: true},
		{in: "sync_writes off", want: false},
		{in: "sync_writes maybe", err: `sync_writes: expected on or off, got "maybe"`},
		{in: "sync_writes on off", err: "wrong argument count"},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		got, err := Switch(d)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got error %v; want one containing %q", tc.in, err, tc.err)
		}
	}
}
