package mockprovider

import "strings"

// Scripted answers: a user message whose text holds "mock-answer:" is
// answered with exactly the text after the marker (one space after it
// dropped), line breaks and all, so that tests can make the model say
// what a real one sometimes does, such as broken JSON. It streams in
// pieces of a word each, a word counting one completion token as usual,
// and max tokens cut it after that many words.

// mockAnswerMarker starts a scripted answer.
const mockAnswerMarker = "mock-answer:"

// scriptedAnswer is the scripted answer of the user text, if it has one.
func scriptedAnswer(user string) (string, bool) {
	_, text, ok := strings.Cut(user, mockAnswerMarker)
	if !ok {
		return "", false
	}
	return strings.TrimPrefix(text, " "), true
}

// verbatimPieces splits text into pieces that concatenate to it: each a
// word with the space after it (the first also with the space that
// starts text).
func verbatimPieces(text string) []string {
	var pieces []string
	start := 0
	inWord := false
	for i, r := range text {
		space := r == ' ' || r == '\n' || r == '\t' || r == '\r'
		if !space && !inWord && i > 0 && strings.TrimSpace(text[start:i]) != "" {
			pieces = append(pieces, text[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(text) {
		pieces = append(pieces, text[start:])
	}
	return pieces
}
