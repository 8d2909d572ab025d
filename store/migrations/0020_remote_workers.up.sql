-- gaffer:expand
-- Remote workers: processes in any language that claim, heartbeat and
-- finish jobs over HTTP under the same fenced leases as a node (G11); and
-- the progress a running attempt reports. Four migrations, each changing
-- one table in its own transaction: in one, the lock it took on
-- gaffer.nodes and the one it then waited for on gaffer.jobs made a cycle
-- with a running node's claim (jobs, then nodes), and PostgreSQL broke the
-- deadlock by failing one of them.

-- A remote worker is a row of gaffer.nodes beside the nodes: kind
-- 'remote', bound to the tenant whose token registered it ('*': a
-- spanning token's worker, which works every tenant's jobs). It has no
-- etcd registration and is seen alive by its calls alone, so the
-- dead-node rescuer and the metric labels look at kind 'node' only.
ALTER TABLE gaffer.nodes
    ADD COLUMN kind text NOT NULL DEFAULT 'node',
    ADD COLUMN tenant text,
    ADD CONSTRAINT nodes_kind_check CHECK (kind IN ('node', 'remote') AND (kind = 'remote') = (tenant IS NOT NULL));
