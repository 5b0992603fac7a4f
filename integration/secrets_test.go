package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/standin/enginestest"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// TestNoSecretInLogsAnswersOrDisk runs the built gateway with debug logs
// and access logs, uses every kind of secret (the account's keys, a BYOK
// provider key, a private endpoint's key, an observability destination's
// secret, a search engine's API key) on success and error paths, and then
// looks for each full secret in the process's logs, in every answer and
// in the data directory's files; every error answer on the way is the
// public API's JSON error with its status.
func TestNoSecretInLogsAnswersOrDisk(t *testing.T) {
	const (
		engineKey  = "engine-secret-api-key-0123456789abcdef"
		byokKey    = "sk-byok-secret-provider-key-0123456789"
		peKey      = "sk-private-endpoint-secret-0123456789"
		hookSecret = "whsec-observability-secret-0123456789"
		lfSecret   = "sk-lf-observability-secret-0123456789"
	)
	ts := enginestest.StartTestServer()
	t.Cleanup(ts.Close)
	ts.RequireAPIKey(engineKey)
	dir := t.TempDir()
	p := startProcessWith(t, dir, func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\tadmin ", "\tdebug\n\tadmin ")
		cfg = replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", fmt.Sprintf(
			"\t\tweb_search {\n\t\t\tdefault_engine exa\n\t\t\tengine exa {\n\t\t\t\tbase_url %s\n\t\t\t\tapi_key %s\n\t\t\t}\n\t\t}\n", ts.URL, engineKey)+
			"\t\tmodel tollgate-mock:free {\n")
		cfg = replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options\n", "\tlog\n\ttollgate {\n\t\t# the gateway's options\n")
		return cfg
	})
	c := newClient(t, p.gateway, p.admin)
	var answers []response
	rec := func(r response) response { answers = append(answers, r); return r }
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"secrets"}`)
	broke := c.newTenant("organization", "")
	brokeKey, _ := c.newKey(broke.MgmtKey, `{"name":"broke"}`)
	secrets := map[string]string{"management key": org.MgmtKey, "API key": key, "second API key": brokeKey,
		"engine key": engineKey, "BYOK key": byokKey, "private endpoint key": peKey, "webhook secret": hookSecret, "langfuse secret": lfSecret}

	// Success paths that use each secret.
	body := `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	rec(c.mustPost("/chat/completions", key, `{"model":"tollgate-mock:online","max_tokens":5,"messages":[{"role":"user","content":"search"}]}`, nil).expect(t, 200))
	rec(c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"hook","config":{"url":"http://`+freeport.Addr(t)+`/hook","secret":"`+hookSecret+`"}}`).expect(t, 201))
	rec(c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"langfuse","name":"lf","config":{"baseUrl":"http://`+freeport.Addr(t)+`","publicKey":"pk-lf","secretKey":"`+lfSecret+`"}}`).expect(t, 201))
	pe := rec(c.api("POST", "/private-endpoints", org.MgmtKey, `{"name":"mine","model":"acme/private","base_url":"http://`+p.mock+`/v1",
		"upstream_model":"tollgate-mock","api_key":"`+peKey+`"}`).expect(t, 201)).JSON.Get("data.id").Str
	rec(c.api("POST", "/private-endpoints/"+pe+"/validate", org.MgmtKey, nil).expect(t, 200))
	rec(c.api("POST", "/private-endpoints/"+pe+"/activate", org.MgmtKey, nil).expect(t, 200))
	rec(c.mustPost("/chat/completions", key, `{"model":"acme/private","max_tokens":5,"messages":[{"role":"user","content":"private"}]}`, nil).expect(t, 200))
	rec(c.api("POST", "/byok", org.MgmtKey, `{"provider":"mock","key":"`+byokKey+`"}`).expect(t, 201))
	rec(c.mustPost("/chat/completions", key, body, nil).expect(t, 200))
	rec(c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200))
	for _, path := range []string{"/keys", "/keys/" + hash, "/byok", "/private-endpoints", "/private-endpoints/" + pe, "/observability/destinations", "/credits"} {
		rec(c.api("GET", path, org.MgmtKey, nil).expect(t, 200))
	}
	rec(c.api("GET", "/key", key, nil).expect(t, 200))
	// The connect flow's codes, verifiers and key (their own answers carry
	// the code and the key, by design: they are not recorded).
	for name, secret := range useConnectSecrets(t, c, false) {
		secrets[name] = secret
	}

	// Error paths: each is the public API's JSON error.
	errs := []struct {
		r      response
		status int
		field  string // a 400 names the field
	}{
		{c.mustPost("/chat/completions", key[:len(key)-1]+"x", body, nil), 401, ""},
		{c.api("GET", "/keys", key, nil), 403, ""},
		{c.mustPost("/chat/completions", key, `{"model":`, nil), 400, ""},
		{c.mustPost("/chat/completions", key, `{"model":"nope/none","messages":[{"role":"user","content":"x"}]}`, nil), 400, "model"},
		{c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, nil), 400, "max_tokens"},
		{c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"x"}],"plugins":[{"id":"web","max_results":"many"}]}`, nil), 400, "max_results"},
		{c.mustPost("/responses", key, `{"model":"tollgate-mock","input":7}`, nil), 400, "input"},
		{c.mustPost("/chat/completions", brokeKey, `{"model":"tollgate-mock:online","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, nil), 402, ""},
		{c.api("POST", "/byok", org.MgmtKey, `{"provider":"mock"}`), 400, "key"},
		{c.api("POST", "/private-endpoints", org.MgmtKey, `{"name":"x","model":"acme/x","base_url":"ftp://x","api_key":"`+peKey+`"}`), 400, "base_url"},
		{c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"bad","config":{"secret":"`+hookSecret+`"}}`), 400, "url"},
		{c.api("GET", "/keys/"+strings.Repeat("0", 64), org.MgmtKey, nil), 404, ""},
		// Answered by the gateway: only inference POSTs reach a provider.
		{c.api("GET", "/generation?id=gen-1", key, nil), 404, ""},
		{c.api("GET", "/chat/completions", key, nil), 405, ""},
	}
	ts.RequireAPIKey("another-key")
	errs = append(errs, struct {
		r      response
		status int
		field  string
	}{c.mustPost("/chat/completions", key, `{"model":"tollgate-mock:online","max_tokens":5,"messages":[{"role":"user","content":"engine refuses"}]}`, nil), 502, ""})
	for i, e := range errs {
		rec(e.r)
		if e.r.Status != e.status {
			t.Errorf("error %d: status %d, want %d: %s", i, e.r.Status, e.status, e.r.Body)
			continue
		}
		if ct := e.r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("error %d: Content-Type %q", i, ct)
		}
		j := e.r.JSON
		if j.Get("error.code").Int() != int64(e.status) || j.Get("error.message").Str == "" {
			t.Errorf("error %d: not the spec's error: %s", i, e.r.Body)
		}
		j.ForEach(func(k, _ gjson.Result) bool {
			if k.Str != "error" {
				t.Errorf("error %d: extra field %s: %s", i, k.Str, e.r.Body)
			}
			return true
		})
		if e.field != "" && !strings.Contains(j.Get("error.message").Str, e.field) {
			t.Errorf("error %d: message does not name %s: %s", i, e.field, e.r.Body)
		}
	}

	p.kill()
	logs := p.log.String()
	if !strings.Contains(logs, `"level":"debug"`) || !strings.Contains(logs, "http.log.access") || !strings.Contains(logs, "/api/v1/chat/completions") {
		t.Fatalf("the test needs debug and access logs; log:\n%.2000s", logs)
	}
	for name, s := range secrets {
		if i := strings.Index(logs, s); i >= 0 {
			t.Errorf("the %s is in the logs: %s", name, logs[max(i-300, 0):min(i+100, len(logs))])
		}
		for _, r := range answers {
			if strings.Contains(string(r.Body), s) || strings.Contains(fmt.Sprint(r.Header), s) {
				t.Errorf("the %s is in an answer: %s", name, r.Body)
			}
		}
	}
	// Nothing on disk holds a full key or secret (stored hashed or sealed).
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		found, err := fileContains(path, secrets)
		if err != nil {
			return err
		}
		for _, name := range found {
			t.Errorf("the %s is stored in %s", name, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fileContains names the needles found in the file at path. It reads in
// chunks, overlapping by the longest needle, because Badger preallocates
// value-log and memtable files of hundreds of megabytes: reading them whole
// (and, under -race, shadowing that memory) once took gigabytes. It reads
// only the file's data: the holes of a sparse file (Badger's 2 GB value
// log is one until written) read as zeros, which hold no needle.
func fileContains(path string, needles map[string]string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	longest := 0
	for _, s := range needles {
		longest = max(longest, len(s))
	}
	seen := map[string]bool{}
	buf := make([]byte, 0, 1<<20+longest)
	chunk := make([]byte, 1<<20)
	zeros := make([]byte, len(chunk))
	for off := int64(0); off < info.Size(); {
		start, end := dataExtent(f, off, info.Size())
		if start < 0 {
			break
		}
		buf = buf[:0] // no needle spans a hole
		r := io.NewSectionReader(f, start, end-start)
		for {
			n, err := r.Read(chunk)
			if bytes.Equal(chunk[:n], zeros[:n]) {
				buf = buf[:0] // preallocated zeros: no needle holds a zero byte
			} else {
				buf = append(buf, chunk[:n]...)
				for name, s := range needles {
					if !seen[name] && bytes.Contains(buf, []byte(s)) {
						seen[name] = true
					}
				}
			}
			if len(buf) > longest {
				buf = append(buf[:0], buf[len(buf)-longest:]...)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
		}
		off = end
	}
	var found []string
	for name := range seen {
		found = append(found, name)
	}
	return found, nil
}

// Linux's lseek whences for sparse files.
const (
	seekData = 3
	seekHole = 4
)

// dataExtent is the extent of data at or after off: start -1 when only a
// hole is left. Where lseek knows no SEEK_DATA, it is the rest of the file.
func dataExtent(f *os.File, off, size int64) (start, end int64) {
	start, err := f.Seek(off, seekData)
	if errors.Is(err, syscall.ENXIO) {
		return -1, 0
	}
	if err != nil {
		return off, size
	}
	end, err = f.Seek(start, seekHole)
	if err != nil || end > size {
		end = size
	}
	return start, end
}

// TestFileContainsReadsPastHoles: fileContains finds needles on both sides
// of a sparse file's hole, and across its chunks.
func TestFileContainsReadsPastHoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(off int64, s string) {
		if _, err := f.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	write(10, "first-secret")
	write(64<<20, "second-secret")
	write(64<<20+1<<20-6, "across-chunks")
	if err := f.Truncate(128 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	found, err := fileContains(path, map[string]string{"a": "first-secret", "b": "second-secret", "c": "across-chunks", "d": "absent"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	if !slices.Equal(found, []string{"a", "b", "c"}) {
		t.Errorf("found %v, want [a b c]", found)
	}
}
