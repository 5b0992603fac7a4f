package contentfilter

import (
	"regexp"
	"strings"
	"testing"
)

// The strings a prefilter looks for, per pattern: lowercased, one of
// them in every match; none where nothing is certain.
func TestRequiredLiterals(t *testing.T) {
	for p, want := range map[string]string{
		`\bPROJ-[0-9]{4}\b`:                "proj-",
		`(?i)strictly confidential`:        "strictly confidential",
		`(?i)project (falcon|eagle)`:       "project eagle,project falcon",
		`sk-[a-zA-Z0-9]{48}`:               "sk-",
		`\bab[0-9]+`:                       "", // too short to be worth looking for
		`ghp_[A-Za-z0-9]{36}`:              "ghp_",
		`(?i)password\s*[:=]`:              "password",
		`\bxox[baprs]-[0-9A-Za-z-]{10,}`:   "xox", // five letters: too many to multiply out
		`\b[A-Z]{2}[0-9]{6}\b`:             "",
		`(alpha|be)ta`:                     "alphata,beta",
		`(?:foo)+bar`:                      "foo",
		`a.*secret`:                        "secret",
		`(secret)?code`:                    "code",
		`(?i)kelvin`:                       "kelvin",
		`(?i)straße`:                       "",
		`x{2,}yz`:                          "", // "yz" is too short
		`(?:alpha|beta)\d+(?:gamma|delta)`: "delta,gamma",
		`[ab][cd][ef]`:                     "ace,acf,ade,adf,bce,bcf,bde,bdf",
		`(?i)[k]ey`:                        "",
	} {
		if got := strings.Join(required(p), ","); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}

// A text a pattern matches always gets through its prefilter.
func FuzzPrefilterSound(f *testing.F) {
	for _, seed := range [][2]string{
		{`\bPROJ-[0-9]{4}\b`, "see PROJ-1234 now"},
		{`(?i)project (falcon|eagle)`, "PROJECT Eagle"},
		{`(?i)kelvin`, "\u212Aelvin"},
		{`(?:alpha|beta)\d+(?:gamma|delta)`, "beta9delta"},
		{`[ab][cd][ef]`, "xbcfx"},
		{`a+b|c`, "c"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, text string) {
		re, err := regexp.Compile(p)
		if err != nil || !re.MatchString(text) {
			return
		}
		need := required(p)
		if mayMatch(need, lowerASCII(text)) {
			return
		}
		// The only misses allowed are the non-ASCII case folds that the
		// folded copy makes ASCII.
		if f, changed := fold(text, false); changed && !isASCII(text) && re.MatchString(f.s) && mayMatch(need, lowerASCII(f.s)) {
			return
		}
		t.Fatalf("pattern %q matches %q but its prefilter %q refuses it", p, text, need)
	})
}

// The one-pass scan of a guard's prefilters finds what looking for each
// string in the lowercased text finds.
func FuzzLitScan(f *testing.F) {
	for _, seed := range [][3]string{
		{`\bPROJ-[0-9]{4}\b`, `(?i)project (falcon|eagle)`, "see PROJ-1234 about Project EAGLE"},
		{`(?i)password\s*[:=]`, `sk-[a-z]{4}`, "pa pas PASSWORD= sk-abcd"},
		{`abcabd`, `(?i)bca`, "abcabcabd"},
		{`xyz`, `xyzxyz`, "xy"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, p1, p2, text string) {
		l := &litScan{}
		var needs [][]string
		var ids [][]int32
		for _, p := range []string{p1, p2} {
			if need := required(p); need != nil {
				needs = append(needs, need)
				ids = append(ids, l.add(need))
			}
		}
		var found [litWords]uint64
		l.scan(text, found[:])
		for i, need := range needs {
			if got, want := mayHold(ids[i], found[:]), mayMatch(need, lowerASCII(text)); got != want {
				t.Fatalf("prefilter %q on %q: scan says %v, lookup %v", need, text, got, want)
			}
		}
	})
}
