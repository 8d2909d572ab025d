-- gaffer:no-transaction
-- gaffer:expand
-- The jobs enqueued with a uniqueness window, by key, state and enqueue
-- time: an enqueue with a window finds the holder of its key among them
-- (states and period both index conditions). Partial: only those jobs
-- enter it, so it costs every other job nothing.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_unique_window_idx ON gaffer.jobs (tenant, unique_window_key, state, created_at)
    WHERE unique_window_key IS NOT NULL;
