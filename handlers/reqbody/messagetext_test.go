package reqbody

import "testing"

func TestLastUserText(t *testing.T) {
	for _, tt := range []struct {
		body      string
		responses bool
		want      string
	}{
		{`{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":" last "}]}`, false, "last"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]}`, false, "a b"},
		{`{"messages":[{"role":"system","content":"only system"}]}`, false, ""},
		{`{"input":"plain input"}`, true, "plain input"},
		{`{"input":[{"role":"user","content":"one"},{"role":"user","content":[{"type":"input_text","text":"two"}]}]}`, true, "two"},
		{`{"messages":[{"role":"user","content":"chat"}]}`, true, ""},
	} {
		if got := LastUserText([]byte(tt.body), tt.responses); got != tt.want {
			t.Errorf("LastUserText(%s, %v) = %q, want %q", tt.body, tt.responses, got, tt.want)
		}
	}
}
