package storage

import (
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// The spending counters of workspaces and members change with every charge,
// so they are persisted apart from the (larger, reflection-encoded)
// workspace and member records: one small record per workspace or member,
// encoded without reflection, rewritten by the group commit.
const (
	prefixWorkspaceUsage = "wu/" // wu/<account id>/<workspace id>
	prefixMemberUsage    = "mu/" // mu/<account id>/<user id>
)

// scopeUsage is a workspace's or member's counters on disk.
type scopeUsage struct {
	Usage     money.UsageCounters `json:"usage"`
	BYOKUsage money.UsageCounters `json:"byok_usage"`
}

// MarshalJSON encodes the counters as encoding/json would, without
// reflection.
func (u scopeUsage) MarshalJSON() ([]byte, error) { return u.AppendJSON(make([]byte, 0, 256)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (u scopeUsage) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"usage":`...)
	b = codec.AppendCounters(b, u.Usage)
	b = append(b, `,"byok_usage":`...)
	b = codec.AppendCounters(b, u.BYOKUsage)
	return append(b, '}'), nil
}

// usageSnapshot is snapshot for a counters key. Callers hold the kernel's lock.
func (s *OrgStore) usageSnapshot(key string) any {
	if rest, ok := strings.CutPrefix(key, prefixWorkspaceUsage); ok {
		accountID, id, _ := strings.Cut(rest, "/")
		if w, ok := s.workspaces[accountID][id]; ok {
			return scopeUsage{w.Usage, w.BYOKUsage}
		}
		return nil
	}
	rest := strings.TrimPrefix(key, prefixMemberUsage)
	accountID, id, _ := strings.Cut(rest, "/")
	if m, ok := s.members[accountID][id]; ok {
		return scopeUsage{m.Usage, m.BYOKUsage}
	}
	return nil
}

// keepUsage remembers the usage in memory of the workspace or member under
// key, whose record another replica's change is about to replace: the
// record does not carry its usage (its usage record and the money fields
// do). restore puts it back on the new record. Callers hold the kernel's
// lock.
func (s *OrgStore) keepUsage(key string) (restore func()) {
	accountID, id, _ := strings.Cut(key[strings.IndexByte(key, '/')+1:], "/")
	switch {
	case strings.HasPrefix(key, prefixWorkspace):
		if w, ok := s.workspaces[accountID][id]; ok {
			u, b := w.Usage, w.BYOKUsage
			return func() {
				if w, ok := s.workspaces[accountID][id]; ok {
					w.Usage, w.BYOKUsage = u, b
				}
			}
		}
	case strings.HasPrefix(key, prefixMember):
		if m, ok := s.members[accountID][id]; ok {
			u, b := m.Usage, m.BYOKUsage
			return func() {
				if m, ok := s.members[accountID][id]; ok {
					m.Usage, m.BYOKUsage = u, b
				}
			}
		}
	}
	return func() {}
}

// loadUsage applies a counters record to its workspace or member, loaded
// before it.
func (s *OrgStore) loadUsage(prefix string, key, v []byte) error {
	var u scopeUsage
	if err := json.Unmarshal(v, &u); err != nil {
		return err
	}
	accountID, id, _ := strings.Cut(string(key[len(prefix):]), "/")
	switch prefix {
	case prefixWorkspaceUsage:
		if w, ok := s.workspaces[accountID][id]; ok {
			w.Usage, w.BYOKUsage = u.Usage, u.BYOKUsage
		}
	case prefixMemberUsage:
		if m, ok := s.members[accountID][id]; ok {
			m.Usage, m.BYOKUsage = u.Usage, u.BYOKUsage
		}
	}
	return nil
}
