-- gaffer:no-transaction
-- gaffer:expand
-- A search by tags (GET /v1/jobs?tag=...) finds its jobs here: tags @>
-- (all) and && (any) are GIN conditions. Partial: only jobs enqueued with
-- tags enter it, so an untagged job costs it nothing.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_tags_idx ON gaffer.jobs USING gin (tags)
    WHERE tags IS NOT NULL;
