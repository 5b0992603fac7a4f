package scim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A sync job applies the group mappings to workspace memberships:
//
//   - every active member of a mapped group becomes a member of the
//     mapping's workspace with the mapping's role (admin wins when several
//     mappings reach the same workspace); a membership a mapping granted
//     earlier gets its role updated;
//   - a membership added by hand is never changed or removed: a mapping
//     only adopts memberships it created;
//   - a membership a mapping granted is removed once no mapping grants it
//     any more (the member left the group, or was deactivated, or the
//     group was deleted), unless the member still has API keys in the
//     workspace (counted as kept);
//   - mappings of groups the identity provider deleted are removed
//     (deleted_groups), after their memberships.
//
// The whole application and the job's outcome are one in-memory step and
// one group commit, so the counts are exact and a crash leaves either all
// of it or none of it.

// CreateSyncJob queues a sync job; RunSyncJob runs it.
func (s *Store) CreateSyncJob(accountID string) (SyncJob, error) {
	s.k.Lock()
	if !s.isOrganization(accountID) {
		s.k.Unlock()
		return SyncJob{}, ErrNotFound
	}
	j := &SyncJob{ID: storage.NewUUID(), AccountID: accountID, Status: SyncQueued, CreatedAt: now().UTC()}
	put(s.jobs, accountID, j.ID, j)
	b := s.k.MarkDirty(recordKey("j", accountID, j.ID))
	s.k.Unlock()
	return *j, b.Wait()
}

// RunSyncJob runs a queued job to its end and returns its final state.
func (s *Store) RunSyncJob(accountID, id string) (SyncJob, error) {
	s.k.Lock()
	cur, ok := s.jobs[accountID][id]
	if !ok || cur.Status != SyncQueued {
		s.k.Unlock()
		return SyncJob{}, fmt.Errorf("%w: no queued sync job %s", ErrNotFound, id)
	}
	j := *cur
	t := now().UTC()
	j.Status, j.StartedAt = SyncRunning, &t
	s.jobs[accountID][id] = &j
	// Not committed on its own: running is only visible in memory, the
	// outcome below commits with the memberships.
	c := s.applyMappingsLocked(accountID)
	done := now().UTC()
	f := j
	f.Status, f.FinishedAt = SyncSucceeded, &done
	f.SyncedGroups, f.DeletedGroups = &c.synced, &c.deleted
	f.Added, f.Updated, f.Removed, f.Kept = &c.added, &c.updated, &c.removed, &c.kept
	s.jobs[accountID][id] = &f
	b := s.k.MarkDirty(recordKey("j", accountID, id))
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return f, err
	}
	return f, nil
}

type syncCounts struct {
	synced, deleted, added, updated, removed, kept int
}

// applyMappingsLocked applies the mappings. Callers hold the kernel's lock.
func (s *Store) applyMappingsLocked(accountID string) syncCounts {
	var c syncCounts
	type want struct {
		role    storage.MemberRole
		sources []string
	}
	desired := map[string]*want{} // "<workspace>/<user>"
	synced := map[string]bool{}
	var dead []string // mappings of deleted groups
	for _, m := range s.mappings[accountID] {
		g, ok := s.groups[accountID][m.GroupID]
		if !ok {
			dead = append(dead, m.ID)
			continue
		}
		if _, ok := s.org.Workspace(accountID, m.WorkspaceID); !ok {
			continue // the workspace was deleted: the mapping grants nothing
		}
		synced[g.ID] = true
		for uid := range g.Members {
			if mem, ok := s.org.Member(accountID, uid); !ok || !mem.Active {
				continue
			}
			k := m.WorkspaceID + "/" + uid
			w := desired[k]
			if w == nil {
				w = &want{role: m.Role}
				desired[k] = w
			}
			if m.Role == storage.RoleAdmin {
				w.role = storage.RoleAdmin
			}
			w.sources = append(w.sources, m.ID)
		}
	}
	c.synced = len(synced)
	deletedGroups := map[string]bool{}
	for _, id := range dead {
		deletedGroups[s.mappings[accountID][id].GroupID] = true
		delete(s.mappings[accountID], id)
		s.k.MarkDirty(recordKey("m", accountID, id))
	}
	c.deleted = len(deletedGroups)

	grants := s.grantsOf(accountID)
	touched := map[string]*storage.Workspace{}
	t := now().UTC()
	keys := make([]string, 0, len(desired))
	for k := range desired {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := desired[k]
		sort.Strings(w.sources)
		wsID, uid, _ := strings.Cut(k, "/")
		ws := s.touchWorkspace(accountID, wsID, touched)
		cur, in := ws.Members[uid]
		_, granted := grants.Grants[k]
		switch {
		case !in:
			ws.Members[uid] = &storage.WorkspaceMember{UserID: uid, Role: w.role, CreatedAt: t}
			grants.Grants[k] = w.sources
			c.added++
		case granted:
			if cur.Role != w.role {
				ws.Members[uid] = &storage.WorkspaceMember{UserID: uid, Role: w.role, CreatedAt: cur.CreatedAt}
				c.updated++
			}
			grants.Grants[k] = w.sources
		default:
			// Added by hand: left alone, and not adopted.
		}
	}
	for k := range grants.Grants {
		if _, ok := desired[k]; ok {
			continue
		}
		wsID, uid, _ := strings.Cut(k, "/")
		w := s.touchWorkspace(accountID, wsID, touched)
		if w == nil {
			delete(grants.Grants, k)
			continue
		}
		if _, in := w.Members[uid]; !in {
			delete(grants.Grants, k) // removed by hand meanwhile
			continue
		}
		if s.removeGrantedMembership(accountID, wsID, uid, touched) {
			delete(grants.Grants, k)
			c.removed++
		} else {
			c.kept++
		}
	}
	// Only publish workspaces whose memberships changed.
	for id, w := range touched {
		if cur, _ := s.org.Workspace(accountID, id); sameMembers(cur, w) {
			delete(touched, id)
		}
	}
	s.publishTouched(touched)
	s.k.MarkDirty(recordKey("s", accountID))
	return c
}

func sameMembers(a, b *storage.Workspace) bool {
	if a == nil || len(a.Members) != len(b.Members) {
		return false
	}
	for id, m := range a.Members {
		o, ok := b.Members[id]
		if !ok || *o != *m {
			return false
		}
	}
	return true
}
