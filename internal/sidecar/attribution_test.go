package sidecar

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// TestAttributionStoreFromConfig: the config's store is the one built, the
// redis one with its password read from the file (it authenticates against
// a real redis-server that requires it), and unusable files are errors.
func TestAttributionStoreFromConfig(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	parse := func(yaml string) *config.Attribution {
		t.Helper()
		c, err := config.Parse([]byte("plugins: []\nextproc:\n  attribution:\n"+yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		return &c.Extproc.Attribution
	}
	st, err := newAttributionStore(parse("    store: memory\n"), nil, m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Store.(*attribution.Memory); !ok {
		t.Errorf("store: memory built %T", st.Store)
	}
	st.close()

	srv := redistest.Start(t)
	ctx := context.Background()
	if err := srv.Client(t).ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = newAttributionStore(parse("    store: redis\n    redis: {addresses: ['"+srv.Addr()+"'], password_file: "+pw+", op_timeout: 1}\n"), nil, m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	rs, ok := st.Store.(*redisstore.Store)
	if !ok {
		t.Fatalf("store: redis built %T", st.Store)
	}
	if err := rs.RecordTask(ctx, "s", "t1", attribution.Origin{Method: "tools/call", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	other, err := newAttributionStore(parse("    store: redis\n    redis: {addresses: ['"+srv.Addr()+"'], password_file: "+pw+", op_timeout: 1}\n"), nil, m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	if o, err := other.LookupTask(ctx, "s", "t1"); err != nil || o.Name != "x" {
		t.Errorf("task through an authenticated redis: %+v, %v", o, err)
	}

	bad := &config.Attribution{Store: config.StoreRedis, Redis: &config.Redis{Addresses: []string{"r:1"}, PasswordFile: filepath.Join(t.TempDir(), "none"),
		DialTimeout: config.NewSeconds(1), OpTimeout: config.NewSeconds(1)}}
	if _, err := newAttributionStore(bad, nil, m, zerolog.Nop()); err == nil {
		t.Error("a missing password file is no error")
	}
	bad.Redis.PasswordFile = ""
	bad.Redis.TLS = &config.TLS{CABundle: pw} // not PEM
	if _, err := newAttributionStore(bad, nil, m, zerolog.Nop()); err == nil {
		t.Error("a CA bundle without certificates is no error")
	}
}
