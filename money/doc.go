// Package money holds the gateway's units of account: Amount, an exact
// quantity of credits in nano-credits, and the UTC calendar windows
// (Interval, Windowed, UsageCounters) in which spending caps and request
// counters reset. It depends on nothing else in the module, so that
// billing arithmetic and storage share one definition of money.
package money
