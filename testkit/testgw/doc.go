// Package testgw holds the fixtures the tests of package handlers, of its
// subpackages and of the mock provider share: a [gateway.Gateway] over an in-memory store, the
// fixture catalogs, accounts with keys, a way to serve a request and check
// its answer, and a real listener for the mock provider's tests.
//
// Only test files import it (TestProductionPathImportsNoStandIn checks
// this): it is no part of the plugin.
package testgw
