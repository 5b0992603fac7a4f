package caddymodule_test

import (
	"os/exec"
	"path"
	"strings"
	"testing"

	// The golden Caddyfiles use the mock provider's directive; the tests
	// may import the stand-ins, the package may not.
	_ "github.com/tollgate-dev/caddy-tollgate/standin"
)

const module = "github.com/tollgate-dev/caddy-tollgate"

// TestProductionPathImportsNoStandIn lists every package of the module
// with the packages it imports, directly or not (tests excluded), and
// fails if one on the production path imports the stand-in tree. Only
// cmd/caddy (the quickstart's build) and the stand-ins themselves may; the
// root package, which `xcaddy build --with` links, may not.
func TestProductionPathImportsNoStandIn(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	isStandIn := func(p string) bool { return p == module+"/standin" || strings.HasPrefix(p, module+"/standin/") }
	// testOnly: the fixtures under testkit, and the packages
	// named as Go names its own test helpers (httptest, fstest): the
	// seams' conformance suites. pdftest, which writes PDFs, also serves
	// the demo's mock provider.
	testOnly := func(p string) bool {
		if p == module+"/testkit" || strings.HasPrefix(p, module+"/testkit/") {
			return true
		}
		return strings.HasPrefix(p, module+"/") && strings.HasSuffix(path.Base(p), "test") && p != module+"/pdftext/pdftest"
	}
	allowed := map[string]bool{module + "/cmd/caddy": true}
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, deps := fields[0], fields[1:]
		seen[pkg] = true
		var imported []string
		for _, d := range deps {
			if isStandIn(d) {
				imported = append(imported, d)
			}
			// The shared test fixtures and the seams' conformance suites are
			// for test files only: no package but their own kind may link them.
			if testOnly(d) && !testOnly(pkg) && !strings.HasPrefix(pkg, module+"/integration") {
				t.Errorf("%s imports the test-only package %s outside a test file", pkg, d)
			}
		}
		switch {
		case isStandIn(pkg) || strings.HasPrefix(pkg, module+"/integration") || strings.HasPrefix(pkg, module+"/bench/"):
			// The stand-ins themselves, the tests and the benchmark's tools
			// (bench/upstream serves the mock provider) are not the gateway.
		case allowed[pkg]:
			if len(imported) == 0 {
				t.Errorf("%s no longer imports the stand-ins: the quickstart's mock provider is gone from the default build", pkg)
			}
		case len(imported) > 0:
			t.Errorf("%s is on the production path but imports %s", pkg, strings.Join(imported, ", "))
		}
	}
	for _, pkg := range []string{module + "/handlers", module + "/storage", module + "/caddymodule", module + "/billing", module} {
		if !seen[pkg] {
			t.Errorf("go list did not list %s", pkg)
		}
	}
}
