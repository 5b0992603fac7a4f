package kernel

import "github.com/tollgate-dev/caddy-tollgate/storage/affinity"

// Affinity is sticky routing's table on this Redis, shared by every
// replica: "<prefix>~st/<key>". Its keys carry no hash tag (each is read
// and written alone), so no record scan reads them, and the layout's
// upgrade leaves them (oldLayoutKey).
func (b *RedisBackend) Affinity() affinity.Table {
	return affinity.NewRedis(b.c, b.prefix+"~st/")
}
