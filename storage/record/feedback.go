package record

import "time"

// Feedback is an account's structured feedback on one of its generations.
// It carries the generation's dimensions, so that the analytics rollup
// counts it on the generation's cell without reading the generation again.
type Feedback struct {
	ID           string         `json:"id"`
	AccountID    string         `json:"account_id"`
	GenerationID string         `json:"generation_id"`
	Category     string         `json:"category"`
	Comment      *string        `json:"comment"`
	CreatedAt    time.Time      `json:"created_at"`
	Generation   GenerationDims `json:"generation"`
}
