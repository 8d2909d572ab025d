-- Retired routines. The claims of the release before the one claim
-- (claim.sql) called these. A node of that release may be inside such a
-- claim while its database is migrated (a rolling upgrade): had the
-- migration dropped them, that claim would fail with "cache lookup failed
-- for function", since it found them before the drop committed. So they
-- stay, with their old names, arguments and results, and give nothing: a
-- claim in flight across the migration comes back short or empty, and
-- the node's next claim is the one claim (claim_pick and
-- claim_pick_remote call it). Nothing calls them after that. The first
-- release after the one that brings the one claim drops them.

CREATE FUNCTION gaffer.fair_take(q text, take integer, u_tenant text[], u_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[])
RETURNS TABLE (id bigint, kind text, tenant text)
LANGUAGE sql AS $fn$
    SELECT NULL::bigint, NULL::text, NULL::text WHERE false
$fn$;

CREATE FUNCTION gaffer.fair_take_kinds(q text, take integer, ks text[], u_tenant text[], u_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[])
RETURNS TABLE (id bigint, kind text, tenant text)
LANGUAGE sql AS $fn$
    SELECT NULL::bigint, NULL::text, NULL::text WHERE false
$fn$;

CREATE FUNCTION gaffer.fair_units(q text, n integer, node_id text, after_tenant text, after_fkey text,
    OUT u_tenant text[], OUT u_fkey text[])
LANGUAGE sql AS $fn$
    SELECT NULL::text[], NULL::text[]
$fn$;

CREATE FUNCTION gaffer.tenant_units(q text, t text, n integer, after_fkey text) RETURNS text[]
LANGUAGE sql AS $fn$
    SELECT '{}'::text[]
$fn$;

CREATE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[])
RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT '{}'::bigint[]
$fn$;

CREATE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[]) RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT '{}'::bigint[]
$fn$;

-- The limit admission of the claim before one instant per claim (its
-- rounds each spent tokens at their own instant). A claim in flight
-- across the migration that brought the instant still calls it: it
-- admits as the new one does in a claim's first round.
CREATE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[], cap integer,
    h_name text[], h_key text[], h_got integer[],
    OUT admitted bigint[], OUT considered integer, OUT admitted_at timestamptz,
    OUT b_name text[], OUT b_key text[], OUT b_got integer[])
LANGUAGE sql AS $fn$
    SELECT * FROM gaffer.limit_admit(q, c_id, c_tenant, c_kind, c_fkey, cap, h_name, h_key, h_got, NULL::timestamptz)
$fn$;

-- The ready set's release (migration 0063) gave the claim's reads of a
-- unit and of a round new results (where each job's ready row is), and
-- so new names: claim_from_unit, claim_from_units. The ones before, for a
-- claim in flight across that migration, give nothing.
CREATE FUNCTION gaffer.claim_unit(q text, t text, k text, ks text[], cp smallint, cr timestamptz, ci bigint, lim integer)
RETURNS TABLE (id bigint, kind text)
LANGUAGE sql AS $fn$
    SELECT NULL::bigint, NULL::text WHERE false
$fn$;

CREATE FUNCTION gaffer.claim_take(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[],
    OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[])
LANGUAGE sql AS $fn$
    SELECT NULL::bigint[], NULL::text[], NULL::text[], NULL::text[], NULL::integer[], NULL::integer[], NULL::boolean[]
$fn$;
