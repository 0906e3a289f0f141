package dispatch

import (
	"context"
	"fmt"
	"time"
)

// Defaults of the dispatcher's record keeping.
const (
	// DefaultRetention is how long finished runs and event records are
	// kept: long enough to look back over a month of an agent's work, and
	// longer than the events stream and the delivery archive keep what
	// could start a run again.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultPruneInterval is how often old records are looked for.
	DefaultPruneInterval = 10 * time.Minute
	// pruneBatch is how many records one store call deletes: a pass works
	// in short transactions rather than one long one.
	pruneBatch = 500
)

// Pruned is what one pass of Prune deleted.
type Pruned struct {
	Runs, Events int
}

// Prune deletes the finished runs and the event records older than the
// retention (Options.Retention), in batches, until none is left. Runs that
// have not finished are kept whatever their age. Each process may prune:
// the store deletes a record only if it is still the one it read.
func (d *Dispatcher) Prune(ctx context.Context) (Pruned, error) {
	before := d.o.Now().Add(-d.o.Retention)
	var p Pruned
	var err error
	p.Runs, err = d.pruneAll(ctx, "run", before, d.o.Store.PruneRuns)
	if err != nil {
		return p, fmt.Errorf("prune runs finished before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	p.Events, err = d.pruneAll(ctx, "event", before, d.o.Store.PruneEvents)
	if err != nil {
		return p, fmt.Errorf("prune event records dispatched before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return p, nil
}

// pruneAll calls prune in batches until a batch comes back short, and
// counts the records deleted.
func (d *Dispatcher) pruneAll(ctx context.Context, record string, before time.Time,
	prune func(ctx context.Context, before time.Time, limit int) (int, error)) (int, error) {
	total := 0
	for {
		n, err := prune(ctx, before, pruneBatch)
		total += n
		d.metrics.pruned.WithLabelValues(record).Add(float64(n))
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// pruneLoop runs Prune at start and every PruneInterval until ctx ends.
// A failed pass is logged and tried again at the next interval.
func (d *Dispatcher) pruneLoop(ctx context.Context) error {
	t := time.NewTicker(d.o.PruneInterval)
	defer t.Stop()
	for {
		p, err := d.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn().Err(err).Int("runs", p.Runs).Int("events", p.Events).Msg("pruning old records failed; trying again later")
		case p.Runs > 0 || p.Events > 0:
			d.log.Info().Int("runs", p.Runs).Int("events", p.Events).Dur("retention", d.o.Retention).Msg("pruned old runs and event records")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
