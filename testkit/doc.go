// Package testkit holds, in its sub-packages, the fixtures that tests share
// across packages: a gateway on loopback ports, a real redis-server, an
// OIDC issuer and free ports. Only test files import them, so no
// production build links them.
package testkit
