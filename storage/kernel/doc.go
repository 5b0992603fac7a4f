// Package kernel is the storage engine under the gateway's domain stores:
// it keeps their records durable and loads them back, and nothing else. It
// owns the database (Badger today), the lock that guards the in-memory
// state, the group commit, the registry of record kinds and the generic
// per-account record map; what a record means is the business of the
// domain store that registered its kind (package storage, or one kept
// with its service and registered through storage.RegisterDomain).
//
// # Contract
//
// Every domain store, and every backend that replaces Badger, keeps these
// rules; they are what makes a request's path free of disk and network
// waits while no acknowledged change is ever lost:
//
//  1. Reads come from memory. A domain store keeps its records in maps
//     guarded by the kernel's lock (Lock/RLock) and answers every lookup
//     from them; the hot path (authentication, admission) never reads the
//     backend.
//  2. Every write goes through the kernel and returns once it is durable.
//     A store changes memory under Lock, publishing new records instead of
//     editing published ones (a reader may hold the old pointer), then
//     calls MarkDirty for each record it touched (or Append for an
//     immutable one) and gets the Batch that will carry it. It releases
//     the lock and returns to its caller only after Batch.Wait, so that a
//     caller never acknowledges what a crash could lose. The flusher writes
//     a snapshot of every dirty record (Kind.Snapshot, taken under Lock) in
//     one transaction, so the backend only moves from one consistent state
//     of memory to a later one, in mutation order, and many requests share
//     one round trip.
//  3. A reservation or a settlement is one atomic operation over all of its
//     levels (key cap and its reset windows, account balance and in-flight
//     budget, workspace budget, member and guardrail limits, free-model
//     counters): the ledger (storage.Ledger) reads them all at one instant
//     for the admission decision (a snapshot, under RLock) and places the
//     holds decided under one Lock only if none of them changed meanwhile
//     (compare and set), so two requests can never both fit in the same
//     room. This is why there is one lock for every domain rather than one
//     per store: admission reads accounts, keys, workspaces and members at
//     one instant.
//  4. Record kinds are registered, not hard-coded: each domain store calls
//     Register with its key prefix, a Load that decodes one stored record
//     into memory, a Reset that empties its records in memory (a full
//     reload from a shared backend replaces every kind's records) and a
//     Snapshot that copies one record out of memory (nil: the record was
//     deleted). Kinds load in registration order, so a kind that decorates
//     another (workspace usage counters) registers after it.
//
// # The seam for several replicas
//
// Backend is where a shared database plugs in. A backend for several
// gateway replicas on one Redis must provide, beyond Backend's methods:
//
//   - a change feed: every committed write of another replica, delivered
//     to this kernel within its freshness bound, and applied to memory
//     under Lock through the kind's Load (a changed record) or as a removal
//     (a deleted one), so that rule 1 still holds on every replica;
//   - server-side atomic admission for rule 3: with several replicas the
//     one in-process lock no longer covers every request, so Reserve and
//     Settle must each become one script that checks and changes every
//     level in the shared database, in one round trip (storage.Ledger
//     documents the levels and the figures such a script needs); holds
//     then carry a lease, so that a replica's crash cannot pin them;
//   - Commit acknowledging only writes the shared database accepted, as
//     the embedded backend's commit acknowledges only writes on disk.
//
// The embedded backend on disk is Badger behind a journal: a
// commit is one append to a journal file, and a checkpoint moves the
// journal into Badger every second, records of kinds with a Slot grouped
// into chunks. Reads of what is not yet moved come from the
// journal's own memory, so the contract above holds unchanged.
//
// RedisBackend is that backend: Commit is one MULTI/EXEC with
// a change-feed entry, Follow reads the feed, Apply and Reload bring the
// other replicas' changes into memory; the ledger's script lives with the
// store (package storage's shared ledger). The store reaches the feed only
// through the Feed interface, which the embedded backend
// answers with a feed that never changes.
package kernel
