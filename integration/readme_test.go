package integration

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// TestReadme runs the examples of README.md and of every page under docs/,
// in order, against a gateway started from Caddyfile.example by the
// README's own commands, so that the documentation cannot rot. The rules
// (stated at the end of the README's "Quickstart" too):
//
//   - Fenced blocks tagged sh, bash or shell run in one bash session
//     (set -eo pipefail: a failing command fails the test), so variables
//     carry from block to block and from page to page; curl runs with
//     --fail-with-body, so an HTTP error fails it too. JavaScript blocks
//     (js, javascript) run as ES modules with the SDKs of integration/sdk,
//     the shell variables they name (such as KEY) given as constants.
//     Other blocks (caddy, json, yaml, untagged) are not programs and are
//     not run.
//   - The README's blocks run first, then each page's, in the order the
//     README's map links them (TestDocsMap checks that it links every
//     page).
//   - An HTML comment on the line before a block says how to treat it:
//     <!-- doctest: skip (reason) --> does not run it (the reason is
//     logged); <!-- doctest: output --> is the output of the block before
//     it, which must match (line by line; "..." within a line matches any
//     text, a line of "..." alone any number of lines); <!-- doctest:
//     last --> runs the block after all the others (stopping the gateway).
//   - The session runs in an empty directory holding Caddyfile.example,
//     with `./caddy` the binary built from this checkout (`go build -o
//     caddy ./cmd/caddy` links it; no other go command runs), and the
//     example's addresses on free loopback ports through its environment
//     variables (CADDY_ADMIN, TOLLGATE_HTTP_PORT, TOLLGATE_MOCK_PORT);
//     localhost:8080 in a block is rewritten to the gateway's address.
func TestReadme(t *testing.T) {
	node := requireNode(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks("README.md", string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range docsMap(string(readme)) {
		text, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		pageBlocks, err := readmeBlocks(page, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, pageBlocks...)
	}
	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile.example"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs(sdkDir)
	if err != nil {
		t.Fatal(err)
	}
	gateway, admin := freeport.Addr(t), freeport.Addr(t)
	_, gatewayPort, _ := strings.Cut(gateway, ":")
	sh := startDocShell(t, dir, []string{
		"CADDY_ADMIN=" + admin,
		"TOLLGATE_HTTP_PORT=" + gatewayPort,
		"TOLLGATE_MOCK_PORT=" + strconv.Itoa(freeport.Loopback(t)),
		"DOCTEST_CADDY=" + caddyBinary,
		"HOME=" + t.TempDir(), "XDG_DATA_HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(),
	})
	t.Cleanup(func() {
		// The README's last block stops the gateway; after a failure, this does.
		stop := exec.Command(caddyBinary, "stop", "--address", admin)
		stop.Env = append(os.Environ(), "HOME="+dir)
		_ = stop.Run()
	})

	var last []readmeBlock
	var shellVars []string
	run := func(b readmeBlock) {
		text := strings.ReplaceAll(b.text, "localhost:8080", gateway)
		var script string
		switch b.lang {
		case "shell":
			script = text
			shellVars = append(shellVars, assignedNames(text)...)
		case "js":
			file := filepath.Join(sdk, fmt.Sprintf(".readme-%d-%d.mjs", os.Getpid(), b.seq))
			prelude, env := "", ""
			for _, name := range usedNames(text, shellVars) {
				prelude += fmt.Sprintf("const %s = process.env.%s;\n", name, name)
				env += fmt.Sprintf("%s=\"$%s\" ", name, name)
			}
			if err := os.WriteFile(file, []byte(prelude+text), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(file) })
			script = fmt.Sprintf("(cd %q && %s%q %q)\n", sdk, env, node, file)
		}
		out := sh.run(t, b, script)
		if b.output != nil {
			if msg := matchOutput(b.output.text, out); msg != "" {
				t.Fatalf("%s:%d: the output differs from %s:%d: %s\ngot:\n%s", b.file, b.line, b.file, b.output.line, msg, out)
			}
		}
	}
	for i := range blocks {
		blocks[i].seq = i
	}
	for _, b := range blocks {
		switch {
		case b.skip != "":
			t.Logf("%s:%d: %s block not run: %s", b.file, b.line, b.lang, b.skip)
		case b.last:
			last = append(last, b)
		default:
			run(b)
		}
	}
	for _, b := range last {
		run(b)
	}
}

// docsMapRE finds the README's links to the pages under docs/.
var docsMapRE = regexp.MustCompile(`\]\((docs/[^)#\s]+\.md)(#[^)\s]*)?\)`)

// docsMap is the pages the README's map ("## Documentation") links, in
// the order it first links them.
func docsMap(readme string) []string {
	_, section, _ := strings.Cut(readme, "\n## Documentation\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var pages []string
	seen := map[string]bool{}
	for _, m := range docsMapRE.FindAllStringSubmatch(section, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			pages = append(pages, m[1])
		}
	}
	return pages
}

// readmeMaxLines bounds the README: it is the front door, the pages under
// docs/ hold the rest.
const readmeMaxLines = 400

// TestDocsMap checks that the README's map links every page under docs/
// (so that TestReadme runs each one), that the README stays short, and
// that every relative link of the README and the pages reaches a file and,
// for a link to a heading, that heading.
func TestDocsMap(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimRight(string(readme), "\n"), "\n") + 1; n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/", n, readmeMaxLines)
	}
	linked := map[string]bool{}
	for _, page := range docsMap(string(readme)) {
		linked[page] = true
	}
	files := []string{"README.md"}
	err = filepath.WalkDir("../docs", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		page := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		files = append(files, page)
		if !linked[page] {
			t.Errorf("%s is not linked from the README's map (## Documentation), so its examples do not run", page)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 1 {
		t.Fatal("no page under docs/")
	}
	for page := range linked {
		if _, err := os.Stat(filepath.Join("..", page)); err != nil {
			t.Errorf("the README's map links %s: %v", page, err)
		}
	}
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range brokenLinks(file, string(text)) {
			t.Errorf("%s: %s", file, msg)
		}
	}
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE  = regexp.MustCompile(`(?m)^#+ (.+)$`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
)

// brokenLinks lists the relative links of a page (file, from the
// repository's root) outside its code blocks whose file or heading is
// missing.
func brokenLinks(file, text string) []string {
	var msgs []string
	for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(proseOf(text), ""), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(target, "#")
		resolved := file
		if path != "" {
			resolved = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
		}
		body, err := os.ReadFile(filepath.Join("..", resolved))
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("link %s: no file %s", target, resolved))
			continue
		}
		if anchor == "" {
			continue
		}
		found := false
		for _, h := range headingRE.FindAllStringSubmatch(proseOf(string(body)), -1) {
			if headingAnchor(h[1]) == anchor {
				found = true
			}
		}
		if !found {
			msgs = append(msgs, fmt.Sprintf("link %s: no heading #%s in %s", target, anchor, resolved))
		}
	}
	return msgs
}

// proseOf is a page without its fenced blocks.
func proseOf(text string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// headingAnchor is a heading's anchor as GitHub makes it: lower case,
// punctuation dropped, spaces as hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(strings.ReplaceAll(heading, "`", ""))) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// readmeBlock is a fenced block of the README or of a page that runs.
type readmeBlock struct {
	file   string // README.md or docs/...
	line   int    // of the opening fence
	seq    int    // its place among all the blocks
	lang   string // "shell" or "js"
	text   string
	skip   string // why it does not run; "" when it runs
	last   bool
	output *readmeBlock // the expected output, if the README shows it
}

var (
	fenceRE  = regexp.MustCompile("^\\s*```+\\s*([A-Za-z0-9_+-]*)")
	markerRE = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(skip|output|last)\b\s*(.*?)\s*-->\s*$`)
)

// readmeBlocks returns the shell and JavaScript blocks of file (the README
// or a page), with their markers applied.
func readmeBlocks(file, text string) ([]readmeBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []readmeBlock
	marker := ""
	for i := 0; i < len(lines); i++ {
		if m := markerRE.FindStringSubmatch(lines[i]); m != nil {
			marker = m[1]
			if m[1] == "skip" {
				marker = "skip " + strings.Trim(m[2], "() ")
			}
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.TrimSpace(lines[i]) != "" {
				marker = ""
			}
			continue
		}
		start := i
		indent := lines[i][:strings.Index(lines[i], "`")]
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: unclosed code block", file, start+1)
		}
		b := readmeBlock{file: file, line: start + 1, text: strings.Join(body, "\n") + "\n"}
		switch m[1] {
		case "sh", "bash", "shell":
			b.lang = "shell"
		case "js", "javascript", "mjs":
			b.lang = "js"
		}
		switch {
		case marker == "output":
			if len(blocks) == 0 || blocks[len(blocks)-1].output != nil {
				return nil, fmt.Errorf("%s:%d: an output block must follow a block that runs", file, b.line)
			}
			blocks[len(blocks)-1].output = &b
		case b.lang == "":
			if marker != "" {
				return nil, fmt.Errorf("%s:%d: doctest marker on a %q block, which never runs", file, b.line, m[1])
			}
		case strings.HasPrefix(marker, "skip"):
			b.skip = strings.TrimSpace(strings.TrimPrefix(marker, "skip"))
			if b.skip == "" {
				return nil, fmt.Errorf("%s:%d: doctest: skip needs a reason", file, b.line)
			}
			blocks = append(blocks, b)
		default:
			b.last = marker == "last"
			blocks = append(blocks, b)
		}
		marker = ""
	}
	return blocks, nil
}

var (
	assignRE = regexp.MustCompile(`(?m)^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=`)
	capsRE   = regexp.MustCompile(`\b[A-Z_][A-Z0-9_]*\b`)
)

// assignedNames are the shell variables a block sets.
func assignedNames(script string) []string {
	var names []string
	for _, m := range assignRE.FindAllStringSubmatch(script, -1) {
		names = append(names, m[1])
	}
	return names
}

// usedNames are the shell variables a JavaScript block names.
func usedNames(js string, shellVars []string) []string {
	var names []string
	for _, w := range capsRE.FindAllString(js, -1) {
		for _, v := range shellVars {
			if w == v && !strings.Contains(strings.Join(names, " ")+" ", w+" ") {
				names = append(names, w)
			}
		}
	}
	return names
}

// matchOutput checks out against the README's expected output; it returns
// what differs, or "".
func matchOutput(expected, out string) string {
	want := strings.Split(strings.TrimRight(expected, "\n"), "\n")
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var match func(w, g int) bool
	match = func(w, g int) bool {
		if w == len(want) {
			return g == len(got)
		}
		if strings.TrimSpace(want[w]) == "..." {
			for k := g; k <= len(got); k++ {
				if match(w+1, k) {
					return true
				}
			}
			return false
		}
		return g < len(got) && lineMatches(strings.TrimSpace(want[w]), strings.TrimSpace(got[g])) && match(w+1, g+1)
	}
	if match(0, 0) {
		return ""
	}
	return "want:\n" + expected
}

// lineMatches matches a line where "..." stands for any text.
func lineMatches(want, got string) bool {
	parts := strings.Split(want, "...")
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return strings.HasSuffix(got, parts[len(parts)-1])
}

// docShell is the bash session the README's blocks run in.
type docShell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  *bufio.Reader
	dir   string
}

const docShellPrelude = `set -eo pipefail
curl() { command curl --fail-with-body --max-time 60 "$@"; }
go() {
	if [ "$*" = "build -o caddy ./cmd/caddy" ]; then ln -sf "$DOCTEST_CADDY" caddy; return; fi
	echo "the README test runs no 'go $*'" >&2; return 1
}
`

func startDocShell(t *testing.T, dir string, env []string) *docShell {
	t.Helper()
	s := &docShell{dir: dir}
	s.cmd = exec.Command("bash", "--noprofile", "--norc")
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), env...)
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.done = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stdin.Close()
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	if _, err := io.WriteString(s.stdin, docShellPrelude); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs one block in the session and returns its standard output; a
// failure (the session exits) fails the test with the block's stderr.
func (s *docShell) run(t *testing.T, b readmeBlock, script string) string {
	t.Helper()
	file := filepath.Join(s.dir, fmt.Sprintf(".block-%d.sh", b.seq))
	outFile, errFile := file+".out", file+".err"
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(s.stdin, "source %q > %q 2> %q\necho done\n", file, outFile, errFile)
	start := time.Now()
	line, err := s.done.ReadString('\n')
	out, _ := os.ReadFile(outFile)
	if err != nil || line != "done\n" {
		_ = s.cmd.Wait()
		stderr, _ := os.ReadFile(errFile)
		t.Fatalf("%s:%d: the %s block failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s", b.file, b.line, b.lang, s.cmd.ProcessState, b.text, out, stderr)
	}
	t.Logf("%s:%d: %s block ran in %v", b.file, b.line, b.lang, time.Since(start).Round(time.Millisecond))
	return string(out)
}

// TestReadmeOutputMatch checks the README test's output rule.
func TestReadmeOutputMatch(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"a\nb\n", "a\nb\n", true},
		{"a\nb\n", "a\nc\n", false},
		{"a\n", "a\nb\n", false},
		{"id: gen-...\n", "id: gen-123\n", true},
		{"id: gen-...!\n", "id: gen-123\n", false},
		{"{\"a\":...,\"c\":3}\n", "{\"a\":1,\"b\":2,\"c\":3}\n", true},
		{"a\n...\nz\n", "a\nb\nc\nz\n", true},
		{"a\n...\nz\n", "a\nz\n", true},
		{"a\n...\nz\n", "a\nb\n", false},
	} {
		if got := matchOutput(tc.want, tc.got) == ""; got != tc.ok {
			t.Errorf("matchOutput(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
	blocks, err := readmeBlocks("x.md", "<!-- doctest: skip (why) -->\n```sh\nx\n```\n\n```sh\necho hi\n```\n<!-- doctest: output -->\n```\nhi\n```\n```caddy\n:80\n```\n<!-- doctest: last -->\n```js\n1\n```\n")
	if err != nil || len(blocks) != 3 || blocks[0].skip != "why" || blocks[1].output == nil || blocks[1].output.text != "hi\n" || !blocks[2].last || blocks[2].lang != "js" {
		t.Errorf("readmeBlocks: %+v, %v", blocks, err)
	}
	if got := docsMap("x\n## Documentation\n- [a](docs/a.md)\n- [b](docs/p/b.md#h) [a](docs/a.md)\n## Next\n[c](docs/c.md)\n"); strings.Join(got, " ") != "docs/a.md docs/p/b.md" {
		t.Errorf("docsMap: %q", got)
	}
	if got := headingAnchor("What a provider receives, and `what` the client gets_back (v1.2)"); got != "what-a-provider-receives-and-what-the-client-gets_back-v12" {
		t.Errorf("headingAnchor: %q", got)
	}
	for _, bad := range []string{"<!-- doctest: skip -->\n```sh\nx\n```\n", "<!-- doctest: output -->\n```\nx\n```\n", "```sh\nx\n"} {
		if _, err := readmeBlocks("x.md", bad); err == nil {
			t.Errorf("readmeBlocks(%q): no error", bad)
		}
	}
}
