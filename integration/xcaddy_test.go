package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// xcaddyManifest is xcaddy.json: what `xcaddy build` must be given to build
// the production gateway; cmd/caddy is that build plus the demo provider.
type xcaddyManifest struct {
	CaddyVersion string `json:"caddy_version"`
	Plugins      []struct {
		Module  string `json:"module"`
		Version string `json:"version,omitempty"`
		Replace string `json:"replace,omitempty"`
	} `json:"plugins"`
}

// cmd/caddy, go.mod and the README's xcaddy line must agree with xcaddy.json.
func TestXcaddyManifestMatchesBuild(t *testing.T) {
	raw, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m xcaddyManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	gomod, _ := os.ReadFile("../go.mod")
	main, _ := os.ReadFile("../cmd/caddy/main.go")
	readme, _ := os.ReadFile("../README.md")

	caddyReq := regexp.MustCompile(`(?m)^\s*github\.com/caddyserver/caddy/v2 (v\S+)`).FindSubmatch(gomod)
	if caddyReq == nil || string(caddyReq[1]) != m.CaddyVersion {
		t.Errorf("go.mod requires caddy %s, xcaddy.json says %s", caddyReq, m.CaddyVersion)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	imports := regexp.MustCompile(`_ "([^"]+)"`).FindAllSubmatch(main, -1)
	imported := map[string]bool{}
	for _, im := range imports {
		imported[string(im[1])] = true
	}
	if !imported["github.com/caddyserver/caddy/v2/modules/standard"] {
		t.Error("cmd/caddy does not import Caddy's standard modules")
	}
	withArgs := []string{}
	for _, p := range m.Plugins {
		if !imported[p.Module] {
			t.Errorf("cmd/caddy does not import plugin %s", p.Module)
		}
		if p.Module != string(module[1]) && !strings.Contains(string(gomod), p.Module+" ") {
			t.Errorf("go.mod does not require plugin %s", p.Module)
		}
		arg := "--with " + p.Module
		if p.Version != "" {
			arg += "@" + p.Version
		}
		if p.Replace != "" {
			arg += "=" + p.Replace
		}
		withArgs = append(withArgs, arg)
	}
	// cmd/caddy is the xcaddy build plus the demo provider.
	demo := string(module[1]) + "/standin"
	if !imported[demo] {
		t.Errorf("cmd/caddy does not import the demo provider %s", demo)
	}
	if len(imported) != len(m.Plugins)+2 {
		t.Errorf("cmd/caddy imports %d modules; xcaddy.json lists %d plugins, plus standard and the demo", len(imported), len(m.Plugins))
	}
	want := "xcaddy build " + m.CaddyVersion + " " + strings.Join(withArgs, " ")
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show the build line %q", want)
	}
}
