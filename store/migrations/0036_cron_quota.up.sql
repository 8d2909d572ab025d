-- gaffer:expand
-- Per-tenant cron quotas (docs/cron.md, "Quotas and fairness"): each
-- entry's schedule's shortest gap between two fires, in ms, measured
-- when the entry is written, so that a quota check sums a tenant's fire
-- rate with one query. 0: fires at most once (@at). Entries of earlier
-- builds have NULL: the first quota check that needs it measures and
-- records it. Binaries of the release before insert without it (NULL).
ALTER TABLE gaffer.cron_entries ADD COLUMN min_gap_ms bigint;
