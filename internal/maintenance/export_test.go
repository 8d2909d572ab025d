package maintenance

import (
	"context"
	"fmt"

	"github.com/gafferhq/gaffer/internal/clock"
)

// SetClock makes the vacuumer read time from c: its rests between
// vacuums pass when a test says.
func (v *Vacuumer) SetClock(c clock.Clock) { v.clock = c }

// SetClock makes the watch read time from c.
func (w *HorizonWatch) SetClock(c clock.Clock) { w.clock = c }

// Explain says what the vacuumer's pace holds and what it would read now,
// and which sessions hold a snapshot or a transaction: for a test's
// failure message.
func (v *Vacuumer) Explain() string {
	ctx := context.Background()
	h, err := v.store.XIDHorizon(ctx)
	out := fmt.Sprintf("pace %+v; horizon now %d (%v)\n", v.pace, h, err)
	rows, err := v.cfg.Pool.Query(ctx, `SELECT pid, datname, backend_type, backend_xmin::text, backend_xid::text, state, left(query, 60)
	    FROM pg_stat_activity WHERE backend_xmin IS NOT NULL OR backend_xid IS NOT NULL`)
	if err != nil {
		return out + err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		vals, _ := rows.Values()
		out += fmt.Sprintln(vals...)
	}
	return out
}
