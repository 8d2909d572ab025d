-- Cluster membership mirrored from etcd, drain requests, and the leader
-- fence.

CREATE TABLE gaffer.nodes (
    id                 text PRIMARY KEY,
    hostname           text        NOT NULL,
    version            text        NOT NULL,
    queues             jsonb       NOT NULL DEFAULT '{}',
    state              text        NOT NULL DEFAULT 'active',
    in_flight          integer     NOT NULL DEFAULT 0,
    started_at         timestamptz NOT NULL DEFAULT now(),
    last_seen          timestamptz NOT NULL DEFAULT now(),
    drain_requested_at timestamptz,
    drain_deadline     timestamptz,
    drained_at         timestamptz,
    left_at            timestamptz,
    -- "drained", "stopped" or "lost" (its etcd session ended uncleanly).
    left_reason        text,
    CONSTRAINT nodes_state_check CHECK (state IN ('active', 'draining', 'dead'))
);

-- One row. The elected leader raises epoch to its election key's etcd
-- create revision; leader-only writes commit only under their own epoch.
CREATE TABLE gaffer.leader_fence (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    epoch     bigint NOT NULL,
    leader    text,
    raised_at timestamptz
);
INSERT INTO gaffer.leader_fence (epoch) VALUES (0);
