DROP FUNCTION gaffer.sweep_remote_workers(bigint, bigint);
DROP FUNCTION gaffer.release_node_jobs(text[], text);
DROP FUNCTION gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamptz[], bigint[], text, text);
DROP FUNCTION gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
DROP FUNCTION gaffer.tenant_units(text, text, integer, text);
