SELECT
 (SELECT count(*) FROM gaffer.jobs WHERE state IN ('pending','retrying') AND due) AS claimable_jobs,
 (SELECT count(*) FROM gaffer.ready) AS ready_rows,
 (SELECT count(*) FROM gaffer.jobs) AS all_jobs,
 (SELECT count(*) FROM (SELECT id FROM gaffer.ready GROUP BY id HAVING count(*)>1) d) AS dup_ready_ids,
 (SELECT count(*) FROM gaffer.jobs j WHERE j.state IN ('pending','retrying') AND j.due
    AND NOT EXISTS (SELECT 1 FROM gaffer.ready r WHERE r.id=j.id)) AS claimable_missing_ready,
 (SELECT count(*) FROM gaffer.ready r WHERE NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id=r.id AND j.state IN ('pending','retrying') AND j.due)) AS ready_without_claimable,
 (SELECT count(*) FROM gaffer.ready r JOIN gaffer.jobs j USING (id) WHERE (r.queue,r.tenant,r.fairness_key,r.priority,r.run_at,r.kind) IS DISTINCT FROM (j.queue,j.tenant,j.fairness_key,j.priority,j.run_at,j.kind)) AS ready_cols_mismatch;
SELECT state, due, count(*) FROM gaffer.jobs GROUP BY 1,2 ORDER BY 1,2;
