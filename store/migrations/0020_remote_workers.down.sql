-- Remote workers' rows go; their running jobs' leases expire and the
-- lease rescuer runs them again.
DELETE FROM gaffer.nodes WHERE kind = 'remote';
ALTER TABLE gaffer.nodes
    DROP CONSTRAINT nodes_kind_check,
    DROP COLUMN tenant,
    DROP COLUMN kind;
