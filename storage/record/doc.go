// Package record holds the records the stores keep that other packages
// read whole (a generation, feedback on it) and their encodings: what a
// field of one is, and how it is written and read back, is in one place.
package record
