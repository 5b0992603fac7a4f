package kernel

import (
	"os"
	"path/filepath"
)

// PutInPlace makes a snapshot's complete temporary file dir/name: the file
// synced and closed, then (sync) the database durable, so that the
// snapshot is never ahead of it after a power loss, then renamed over the
// last one, and (sync) the rename durable, so that the deletion log's
// entries it covers can go. It closes tmp whatever happens.
func (k *Kernel) PutInPlace(tmp *os.File, dir, name string, sync bool) error {
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close() // the sync failed with err, which is returned
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if sync {
		if err := k.Sync(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil || !sync {
		return err
	}
	return SyncDir(dir)
}
