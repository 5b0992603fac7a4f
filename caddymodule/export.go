package caddymodule

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/export"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// exporters shares one observability exporter per database across config
// reloads, like the store: the new config takes a reference before the old
// one releases its own, so a reload neither stops nor doubles the export
// (and queued records are not lost).
var exporters = caddy.NewUsagePool()

// startExporter takes this config's reference to the exporter of the
// store, starting it on first use, and gives it this config's key.
func (a *App) startExporter(store *storage.Store) error {
	val, _, err := exporters.LoadOrNew(a.dir, func() (caddy.Destructor, error) {
		return export.New(store, export.Options{Logger: a.logger.Named("export")}), nil
	})
	if err != nil {
		return err
	}
	a.exporter = val.(*export.Exporter)
	a.exporter.SetSealer(a.sealer)
	a.exporter.SetEgress(a.egress)
	telemetry.SetExportSource(exportStats(a.exporter))
	return nil
}

// stopExporter releases this config's reference; the last one stops the
// exporter. Callers hold a.mu.
func (a *App) stopExporter() error {
	if a.exporter == nil {
		return nil
	}
	a.exporter = nil
	_, err := exporters.Delete(a.dir)
	return err
}

// Exporter is the running observability exporter (nil before Start).
func (a *App) Exporter() *export.Exporter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exporter
}

// exportStats is the exporter's report for the export metrics.
func exportStats(e *export.Exporter) func() telemetry.ExportStats {
	return func() telemetry.ExportStats {
		return telemetry.ExportStats{QueueDepth: e.QueueDepth(), Delivered: e.Delivered(), Dropped: e.Dropped() + e.Refused()}
	}
}
