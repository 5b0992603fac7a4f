package handlers

import (
	"context"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// breakerSyncPeriod is how often the replicas share their breakers.
const breakerSyncPeriod = time.Second

// breakerBoard is the shared database's map of the breakers replicas
// opened; it lasts an hour past its last write.
const (
	breakerBoard    = "breakers"
	breakerBoardTTL = time.Hour
)

// sharedBreakers is where the replicas' breakers meet: the shared
// database's board, nil on one node or while the store cannot be had.
func sharedBreakers(gw gateway.Gateway) func() breaker.Shared {
	return func() breaker.Shared {
		st, err := gw.Store()
		if err != nil || !st.Shared() {
			return nil
		}
		b, ok := st.Kernel().Board()
		if !ok {
			return nil
		}
		return boardBreakers{b}
	}
}

// boardBreakers is breaker.Shared on a kernel.Board.
type boardBreakers struct{ b kernel.Board }

func (s boardBreakers) Publish(ctx context.Context, opened map[string]int64) error {
	return s.b.PublishBoard(ctx, breakerBoard, opened, breakerBoardTTL)
}

func (s boardBreakers) Read(ctx context.Context) (map[string]int64, error) {
	return s.b.ReadBoard(ctx, breakerBoard)
}
