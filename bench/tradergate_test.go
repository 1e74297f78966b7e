package main

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tradergate/cache"
	"tradergate/proxy/config"
)

func TestRenderTGConfig(t *testing.T) {
	c := tgConfig{Port: 18080, AdminPort: 19090, UpstreamURL: "http://127.0.0.1:9/open-api", KeySHA256: hashKey("k"), CacheMaxBytes: defaultCacheBytes, Admin: true, Log: true}
	full, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`listen: "127.0.0.1:18080"`, "admin:\n  listen: \"127.0.0.1:19090\"", "log:\n  access: false", "per_second: 10000000", "max_bytes: 268435456"} {
		if !bytes.Contains(full, []byte(want)) {
			t.Errorf("config lacks %q:\n%s", want, full)
		}
	}
	if bytes.Contains(full, []byte("redis:")) {
		t.Errorf("a redis section without a Redis:\n%s", full)
	}
	c.RedisAddr = "127.0.0.1:6379"
	withRedis, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.RedisAddr, c.CacheMaxBytes = "", bigCacheBytes
	big, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.CacheMaxBytes, c.NoPageFiles = defaultCacheBytes, true
	heap, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.NoPageFiles, c.AllPageFiles = false, true
	files, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.AllPageFiles = false
	for _, tc := range []struct {
		cfg      []byte
		maxBytes int64
		fileMin  int // cache.sendfile_min_bytes as written
	}{{full, defaultCacheBytes, 0}, {withRedis, defaultCacheBytes, 0}, {big, 1 << 30, 0}, {heap, defaultCacheBytes, -1}, {files, defaultCacheBytes, 1}} {
		pc, err := config.Parse(tc.cfg)
		if err != nil {
			t.Errorf("tradergate refuses the config: %v\n%s", err, tc.cfg)
		} else if pc.Cache.MaxBytes != tc.maxBytes {
			t.Errorf("cache.max_bytes %d, want %d", pc.Cache.MaxBytes, tc.maxBytes)
		} else if pc.Cache.SendfileMinBytes != tc.fileMin && pc.Cache.SendfileMinBytes != cmp.Or(tc.fileMin, cache.DefaultSendfileMinBytes) {
			t.Errorf("cache.sendfile_min_bytes %d, want %d", pc.Cache.SendfileMinBytes, tc.fileMin)
		} else if got := pc.MemoryLimit(); float64(got) != memoryBound(tc.maxBytes)-32<<20 {
			// server.memory_limit is left to its default: 32 MiB under
			// the memory target's bound, for the binary and the memory
			// the Go limit does not count.
			t.Errorf("the edge's memory limit %d, the target's bound %v", got, memoryBound(tc.maxBytes))
		}
	}
	// The harness's default is the edge's, which the memory target reads.
	if defaultCacheBytes != cache.DefaultMaxBytes {
		t.Errorf("defaultCacheBytes %d, the edge's default %d", defaultCacheBytes, cache.DefaultMaxBytes)
	}
	if !bytes.Contains(withRedis, []byte("redis:\n  addrs: [\"127.0.0.1:6379\"]")) {
		t.Errorf("no redis section:\n%s", withRedis)
	}
	c.Admin, c.Log, c.RedisAddr = false, false, ""
	bare, err := renderTGConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bare, []byte("\nadmin:")) || bytes.Contains(bare, []byte("\nlog:")) {
		t.Errorf("dropped sections still there:\n%s", bare)
	}
}

func TestHashKeyMatchesTradergate(t *testing.T) {
	// printf %s abc | tradergate hash-key
	if got := hashKey("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("hashKey = %s", got)
	}
}

func TestUnknownSection(t *testing.T) {
	for msg, want := range map[string]string{
		`tradergate: config bench.yaml: line 40: admin: unknown field`:      "admin",
		`tradergate: config bench.yaml: line 44: log.access: unknown field`: "log",
		`tradergate: config bench.yaml: upstream.key_env: not set`:          "",
	} {
		m := unknownSection.FindStringSubmatch(msg)
		got := ""
		if m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: section %q, want %q", msg, got, want)
		}
	}
}

func TestLineFilter(t *testing.T) {
	var out bytes.Buffer
	f := &lineFilter{dst: &out, drop: []byte(accessLogMarker)}
	for _, chunk := range []string{
		`{"level":"INFO","msg":"serving"}` + "\n" + `{"msg":"req`,
		`uest","status":200}` + "\n" + `{"msg":"request"}` + "\n",
		`{"level":"ERROR","msg":"boom"}`,
	} {
		if _, err := f.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"level":"INFO","msg":"serving"}`+"\n"+`{"level":"ERROR","msg":"boom"}` {
		t.Fatalf("kept %q", got)
	}
	if f.dropped != 2 {
		t.Fatalf("dropped %d, want 2", f.dropped)
	}
	if strings.Contains(out.String(), "request") {
		t.Fatal("an access line got through")
	}
}

func TestFilterFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "raw"), filepath.Join(dir, "log")
	raw := `{"msg":"serving"}` + "\n" + strings.Repeat(`{"msg":"request","n":1}`+"\n", 1000) + `{"msg":"stopped"}` + "\n"
	if err := os.WriteFile(src, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := filterFile(src, dst, []byte(accessLogMarker))
	if err != nil || n != 1000 {
		t.Fatalf("dropped %d, err %v", n, err)
	}
	got, _ := os.ReadFile(dst)
	if string(got) != `{"msg":"serving"}`+"\n"+`{"msg":"stopped"}`+"\n" {
		t.Fatalf("kept %q", got)
	}
}
