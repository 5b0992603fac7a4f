// Package analytics keeps the usage rollup the analytics queries read:
// per account, one cell of sums per UTC hour and combination of a
// generation's dimensions, built when the store opens from the sealed
// hours and the generations not yet sealed, kept current from settled
// requests, and sealed hour by hour into records of its own that outlive
// the generations they count.
package analytics
