package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Every charge rewrites its account's and key's records in the group
// commit, where encoding/json's reflection (and the compaction it runs on
// each Amount's and time's own encoding) was the largest cost. The
// snapshots hand the kernel these types instead, whose encoders package
// record generates to write exactly what encoding/json writes for the
// struct tags (TestRecordJSONMatchesEncodingJSON).

// The records the group commit writes on every charge encode into its one
// buffer.
var (
	_ kernel.Appender = Generation{}
	_ kernel.Appender = record.AccountJSON{}
	_ kernel.Appender = record.APIKeyJSON{}
	_ kernel.Appender = scopeUsage{}
)
