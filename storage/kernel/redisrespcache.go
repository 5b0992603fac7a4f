package kernel

import "github.com/tollgate-dev/caddy-tollgate/storage/respcache"

// ResponseCache is the response cache's table on this Redis, shared by
// every replica: "<prefix>~rc/<scope>/<model>/<hash>". Like sticky
// routing's, its keys carry no hash tag, so no record scan reads them,
// and the layout's upgrade leaves them (oldLayoutKey).
func (b *RedisBackend) ResponseCache() respcache.Table {
	return respcache.NewRedis(b.c, b.ScanKeys, b.prefix+"~rc/")
}
