// Package export sends the gateway's generation records to the
// observability destinations of their accounts: webhooks (signed JSON) and
// OTLP/HTTP trace receivers (an OpenTelemetry collector, Langfuse,
// Grafana Cloud).
//
// The store hands every durable generation record to the exporter
// (storage.Store.SubscribeGenerations); the exporter only looks up the
// account's enabled destinations in memory and enqueues the record on each
// destination's bounded queue, dropping it (counted and logged) when the
// queue is full, so that export never slows a request. One worker per
// destination filters, samples, batches and sends, retrying a failed batch
// with exponential backoff until the destination accepts it, is disabled
// or deleted. Delivery is at least once while the process runs: a batch
// whose answer was lost is sent again (with the same delivery id and span
// ids); what is still queued when the gateway stops is not exported.
package export

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Options configure New; zero values take the defaults.
type Options struct {
	Logger *zap.Logger
	// QueueSize bounds each destination's queue. Default 4096.
	QueueSize int
	// BatchSize bounds the records of one delivery. Default 100.
	BatchSize int
	// MinBackoff and MaxBackoff bound the wait between retries of a
	// failed batch. Defaults 200ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// HTTPClient sends webhooks and OTLP traces. Default: a client with a
	// 10s timeout whose connections follow the egress policy (SetEgress).
	HTTPClient *http.Client
}

// Exporter exports one store's generation records.
type Exporter struct {
	store  *storage.Store
	opts   Options
	log    *zap.Logger
	sealer atomic.Pointer[storage.Sealer]
	// client sends deliveries: opts.HTTPClient, or one per egress policy
	// (SetEgress) when ownClient.
	client    atomic.Pointer[http.Client]
	ownClient bool
	cancel    func()

	mu      sync.Mutex
	workers map[string]*worker
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup

	dropped   atomic.Uint64
	refused   atomic.Uint64
	delivered atomic.Uint64
}

// New starts an exporter for the store's generation records.
func New(store *storage.Store, opts Options) *Exporter {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	e := &Exporter{store: store, opts: opts, log: opts.Logger, workers: map[string]*worker{}, stop: make(chan struct{})}
	if e.opts.HTTPClient == nil {
		e.ownClient = true
		e.client.Store(egressClient(nil))
	} else {
		e.client.Store(e.opts.HTTPClient)
	}
	e.cancel = store.SubscribeGenerations(e.enqueue)
	return e
}

// SetSealer sets the key that opens destination configs (the app's
// byok_encryption_key; the latest config load's wins).
func (e *Exporter) SetSealer(s *storage.Sealer) { e.sealer.Store(s) }

// SetEgress sets the policy of destination connections (the app's
// customer_egress; the latest config load's wins, also for connections of
// destinations stored earlier). Nil: public addresses only.
func (e *Exporter) SetEgress(p *egress.Policy) {
	if e.ownClient {
		// A new client, so that no connection dialed under the previous
		// policy is reused; the old one's idle connections are closed
		// (those in use close when idle, after IdleConnTimeout).
		e.client.Swap(egressClient(p)).CloseIdleConnections()
	}
}

// egressClient is a delivery client whose connections are checked against
// p when dialed: destinations are customer-supplied URLs.
func egressClient(p *egress.Policy) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: egress.Transport(func() *egress.Policy { return p })}
}

// Dropped counts records dropped because a destination's queue was full.
func (e *Exporter) Dropped() uint64 { return e.dropped.Load() }

// Delivered counts records a destination accepted.
func (e *Exporter) Delivered() uint64 { return e.delivered.Load() }

// Refused counts records of batches dropped without retrying: the
// destination refused them for good (a 4xx other than 408 and 429), or its
// config cannot be read.
func (e *Exporter) Refused() uint64 { return e.refused.Load() }

// QueueDepth counts the records waiting in the destinations' queues.
func (e *Exporter) QueueDepth() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.workers {
		n += len(w.q)
	}
	return n
}

// Close stops exporting: it unsubscribes, stops the workers (a batch being
// retried is abandoned) and waits for them.
func (e *Exporter) Close() error {
	e.cancel()
	e.mu.Lock()
	if !e.stopped {
		e.stopped = true
		close(e.stop)
	}
	e.mu.Unlock()
	e.wg.Wait()
	return nil
}

// Destruct implements caddy.Destructor.
func (e *Exporter) Destruct() error { return e.Close() }

// enqueue runs on the request path (after the charge is durable): memory
// lookups and non-blocking sends only.
func (e *Exporter) enqueue(g storage.Generation) {
	dests := e.store.DestinationsFor(g.AccountID)
	if len(dests) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	for _, d := range dests {
		if d.APIKeyHashes != nil && !slices.Contains(d.APIKeyHashes, g.KeyHash) {
			continue
		}
		w := e.workers[d.ID]
		if w == nil {
			w = &worker{e: e, accountID: d.AccountID, id: d.ID, q: make(chan storage.Generation, e.opts.QueueSize)}
			e.workers[d.ID] = w
			e.wg.Add(1)
			go w.run()
		}
		select {
		case w.q <- g:
		default:
			if n := e.dropped.Add(1); n&(n-1) == 0 { // log at 1, 2, 4, 8, ...
				e.log.Warn("observability destination queue full; dropping generation records",
					zap.String("destination", d.ID), zap.Uint64("dropped_total", n))
			}
		}
	}
}

// worker sends one destination's records.
type worker struct {
	e             *Exporter
	accountID, id string
	q             chan storage.Generation
	otlp          *otlpExporter
	seq           uint64
}

// idleCheck is how often an idle worker checks that its destination still
// exists.
const idleCheck = 30 * time.Second

func (w *worker) run() {
	defer w.e.wg.Done()
	defer func() {
		if w.otlp != nil {
			w.otlp.shutdown()
		}
	}()
	idle := time.NewTimer(idleCheck)
	defer idle.Stop()
	for {
		var batch []storage.Generation
		select {
		case <-w.e.stop:
			return
		case <-idle.C:
			if _, ok := w.e.store.Destination(w.accountID, w.id); !ok && w.retire() {
				return
			}
			idle.Reset(idleCheck)
			continue
		case g := <-w.q:
			batch = append(batch, g)
		}
	fill:
		for len(batch) < w.e.opts.BatchSize {
			select {
			case g := <-w.q:
				batch = append(batch, g)
			default:
				break fill
			}
		}
		if !w.deliver(batch) {
			if w.retire() {
				return
			}
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(idleCheck)
	}
}

// retire removes the worker of a deleted destination, unless records
// arrived meanwhile (then it carries on).
func (w *worker) retire() bool {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if len(w.q) > 0 {
		return false
	}
	if w.e.workers[w.id] == w {
		delete(w.e.workers, w.id)
	}
	return true
}

// deliver filters, samples and sends a batch, retrying until it is
// accepted, refused for good, or the destination is disabled or deleted.
// It returns false when the destination no longer exists.
func (w *worker) deliver(gens []storage.Generation) bool {
	d, ok := w.e.store.Destination(w.accountID, w.id)
	if !ok {
		return false
	}
	if !d.Enabled {
		return true
	}
	filter, err := CompileFilter(d.FilterRules)
	if err != nil {
		w.e.log.Error("observability destination has invalid filter rules; exporting nothing", zap.String("destination", d.ID), zap.Error(err))
		return true
	}
	recs := make([]Record, 0, len(gens))
	for _, g := range gens {
		if d.APIKeyHashes != nil && !slices.Contains(d.APIKeyHashes, g.KeyHash) {
			continue
		}
		r := Record{Generation: g}
		if k, ok := w.e.store.APIKey(g.KeyHash); ok {
			r.KeyName = k.Name
		}
		if filter.Match(r) && Sampled(d.SamplingRate, d.ID, g.ID) {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		return true
	}
	w.seq++
	delivery := d.ID + "-" + recs[0].ID + "-" + itoa(w.seq)
	backoff := w.e.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		err := w.send(d, recs, delivery)
		if err == nil {
			w.e.delivered.Add(uint64(len(recs)))
			return true
		}
		if _, permanent := err.(permanentError); permanent {
			w.e.refused.Add(uint64(len(recs)))
			w.e.log.Error("observability destination refused a batch; dropping it",
				zap.String("destination", d.ID), zap.Int("records", len(recs)), zap.Error(err))
			return true
		}
		w.e.log.Warn("observability export failed; retrying",
			zap.String("destination", d.ID), zap.Int("attempt", attempt), zap.Duration("backoff", backoff), zap.Error(err))
		select {
		case <-w.e.stop:
			return true
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, w.e.opts.MaxBackoff)
		if d, ok = w.e.store.Destination(w.accountID, w.id); !ok {
			return false
		}
		if !d.Enabled {
			return true
		}
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// send makes one delivery attempt with the destination's current config.
func (w *worker) send(d storage.Destination, recs []Record, delivery string) error {
	raw, err := d.OpenConfig(w.e.sealer.Load())
	if err != nil {
		return err // the key may come back with the next config load
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return permanentError{err}
	}
	flags := Flags{Cost: d.BroadcastCost, Identity: d.BroadcastIdentity, RequestContext: d.BroadcastRequestContext}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() {
		select {
		case <-w.e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if d.Type == "webhook" {
		return sendWebhook(ctx, w.e.client.Load(), c, delivery, WebhookBody(recs, flags))
	}
	hc := w.e.client.Load()
	if w.otlp == nil || w.otlp.version != d.Version || w.otlp.hc != hc {
		if w.otlp != nil {
			w.otlp.shutdown()
			w.otlp = nil
		}
		o, err := newOTLPExporter(d.Type, c, d.Version, hc)
		if err != nil {
			return err
		}
		w.otlp = o
	}
	return w.otlp.exp.ExportSpans(ctx, Spans(recs, flags))
}
