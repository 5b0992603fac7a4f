package storage

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/textlimit"
)

// FeedbackStore records feedback on generations.
type FeedbackStore struct {
	k *kernel.Kernel
	// stats counts feedback into the analytics rollup.
	stats feedbackCounter
}

// feedbackCounter is what the feedback asks of the analytics; it takes no
// kernel lock (see Store).
type feedbackCounter interface {
	// CountFeedback adds durable feedback to the analytics rollup.
	CountFeedback(f Feedback)
}

func (s *FeedbackStore) kinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefixFeedback, Append: true}}
}

// FeedbackCategories are the categories of generation feedback.
var FeedbackCategories = []string{"latency", "incoherence", "incorrect_response", "formatting", "billing", "api_error", "other"}

// MaxFeedbackComment bounds a feedback comment (characters).
const MaxFeedbackComment = textlimit.MaxCommentLen

// Feedback is an account's structured feedback on one of its generations
// (package record).
type Feedback = record.Feedback

// prefixFeedback keys feedback records, append-only: f/<generation id>/<feedback id>.
const prefixFeedback = "f/"

// AddFeedback stores feedback on g, a generation of the caller's account,
// and returns once it is durable.
func (s *FeedbackStore) AddFeedback(g Generation, category string, comment *string) (Feedback, error) {
	valid := false
	for _, c := range FeedbackCategories {
		valid = valid || c == category
	}
	if !valid {
		return Feedback{}, fmt.Errorf("%w: category: unknown category %q", ErrInvalid, category)
	}
	t := now().UTC()
	f := Feedback{
		ID: newID("fb_"), AccountID: g.AccountID, GenerationID: g.ID, Category: category,
		Comment: comment, CreatedAt: t, Generation: record.DimsOf(&g),
	}
	s.k.Lock()
	b := s.k.Append(prefixFeedback+g.ID+"/"+f.ID, f)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return Feedback{}, err
	}
	s.stats.CountFeedback(f)
	return f, nil
}

// loadFeedback counts the stored feedback into the rollup (at Open).
func (s *FeedbackStore) loadFeedback() error {
	return s.k.Scan(prefixFeedback, func(key, v []byte) (bool, error) {
		var f Feedback
		if err := json.Unmarshal(v, &f); err != nil {
			return false, fmt.Errorf("loading feedback %q: %w", key, err)
		}
		s.stats.CountFeedback(f)
		return true, nil
	})
}
