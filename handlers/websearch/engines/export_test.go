package engines

// Limits the external tests check requests against.
const (
	ParallelObjectiveMaxChars = parallelObjectiveMaxChars
	ParallelQueryMaxChars     = parallelQueryMaxChars
)
