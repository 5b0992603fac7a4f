package engines

import "testing"

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    client
		want string
	}{
		{NameExa, NewExa(Config{}).c, ExaDefaultBaseURL},
		{NameFirecrawl, NewFirecrawl(Config{}).c, FirecrawlDefaultBaseURL},
		{NameParallel, NewParallel(Config{}).c, ParallelDefaultBaseURL},
	} {
		if tc.c.baseURL != tc.want {
			t.Errorf("%s default base URL %q, want %q", tc.name, tc.c.baseURL, tc.want)
		}
	}
	if got := NewExa(Config{}).c.timeout; got != DefaultTimeout {
		t.Errorf("default timeout %v", got)
	}
}
