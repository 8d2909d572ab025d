-- Limits: what a claim may start (G10). A limit caps the jobs it matches
-- (queue, kind, tenant; NULL matches any), per key: at most concurrency
-- running at once, at most rate starts per period in bursts of up to
-- burst. The claim (claim.sql) asks limit_admit which of its candidates
-- may start; everything a limit decides is decided there, in the claim's
-- transaction.
--
-- Glossary:
--   bucket   one (limit, key) pair: a row of gaffer.limit_buckets, the lock
--            claims take to count its slots one claim at a time, its rate
--            tokens and its running_bound.
--   key      what a limit counts a job under: limit_key_of(key_from, …),
--            never longer than 200 bytes (limit_bucket_key).
--   bound    running_bound: an upper bound on the bucket's running
--            attempts, set from an exact count and raised by every claim
--            that admits into the bucket, never lowered; NULL until a
--            count sets it and after the limit changes.
--   c_*      the claim's candidates, one array element each, in claim
--            order (the order in which they should be admitted).
--   p_*      (candidate, bucket) pairs: which buckets each candidate falls in.
--   b_*      per bucket figures, one element per bucket in (name, key) order.

-- The advisory lock that keeps gaffer.limits as a claim read it until the
-- claim commits: claims hold it shared, a change of a limit (or the
-- deletion of buckets) exclusively. So a claim never commits jobs under
-- limits that changed after it read them, a bucket's bound never misses
-- a claim in flight, and a bucket never vanishes under a claim.
CREATE FUNCTION gaffer.limits_lock_id() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 7449347848622178306::bigint $$;

-- limits_hold takes the limits lock shared for the calling claim, if no
-- change of a limit holds or waits for it, and says whether it did.
CREATE FUNCTION gaffer.limits_hold() RETURNS boolean
LANGUAGE sql AS $$ SELECT pg_try_advisory_xact_lock_shared(gaffer.limits_lock_id()) $$;

-- limits_changing takes the limits lock exclusively for a statement that
-- changes gaffer.limits or deletes buckets: it waits for the claims in
-- flight to commit, and claims that start meanwhile claim nothing until it
-- commits (they do not wait: see gaffer.claim).
CREATE FUNCTION gaffer.limits_changing() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(gaffer.limits_lock_id());
    RETURN NULL;
END
$fn$;
CREATE TRIGGER limits_serialized BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON gaffer.limits
    FOR EACH STATEMENT EXECUTE FUNCTION gaffer.limits_changing();
CREATE TRIGGER limit_buckets_serialized BEFORE DELETE OR TRUNCATE ON gaffer.limit_buckets
    FOR EACH STATEMENT EXECUTE FUNCTION gaffer.limits_changing();

-- A changed limit (scope, key, concurrency) starts its bounds afresh.
CREATE FUNCTION gaffer.limit_changed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE gaffer.limit_buckets SET running_bound = NULL
    WHERE limit_name = OLD.name AND running_bound IS NOT NULL;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER limits_changed AFTER UPDATE ON gaffer.limits
    FOR EACH ROW EXECUTE FUNCTION gaffer.limit_changed();

-- url_host is the host of an absolute URL as Go's net/url reads it (the
-- http kind dials that host, and its fairness key is that host, Args.Host
-- in webhook/), its ASCII letters lower-cased whatever the locale,
-- brackets of an IPv6 literal removed: the user information runs to the
-- last '@' before the path, query or fragment; a port follows a ':'. The
-- http kind refuses at enqueue every URL net/url refuses, and hosts not
-- in their one spelling (webhook.checkHost); webhook/TestURLHostMatchesSQL
-- checks the two readings agree on every URL it accepts.
CREATE FUNCTION gaffer.url_host(u text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT translate(coalesce(m[1], m[2]), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
    FROM (SELECT regexp_match(u, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#]*@)?(?:\[([^]/?#]*)\]|([^:/?#]*))')) x(m)
$$;

-- limit_bucket_key bounds a key: one of up to 200 bytes is kept as it is;
-- a longer one becomes its first 64 characters, '…' and the SHA-256 of the
-- whole, so that no job's values can make a key too large for the
-- buckets' index (and stop the claim of a queue).
CREATE FUNCTION gaffer.limit_bucket_key(raw text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(raw) <= 200 THEN raw
                ELSE left(raw, 64) || '…' || encode(sha256(convert_to(raw, 'UTF8')), 'hex') END
$$;

-- limit_key_of is the key a limit with key_from counts a job under, from
-- the job's columns (args may be NULL when key_from does not read them).
-- The grammar of key_from is the limits_key_check constraint's.
CREATE FUNCTION gaffer.limit_key_of(key_from text, tenant text, kind text, queue text,
    limit_key text, fairness_key text, args json) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT gaffer.limit_bucket_key(coalesce(CASE
        WHEN key_from = '' THEN ''
        WHEN key_from = 'tenant' THEN tenant
        WHEN key_from = 'kind' THEN kind
        WHEN key_from = 'queue' THEN queue
        WHEN key_from = 'limit_key' THEN limit_key
        WHEN key_from = 'fairness_key' THEN fairness_key
        WHEN key_from LIKE 'args.%' THEN args #>> string_to_array(substr(key_from, 6), '.')
        WHEN key_from LIKE 'host(args.%)' THEN
            gaffer.url_host(args #>> string_to_array(substr(key_from, 11, length(key_from) - 11), '.'))
    END, ''))
$$;

-- limit_admit returns which of the candidates of queue q (c_*: ids,
-- tenants, kinds and fairness keys, in claim order; their rows locked by
-- the caller) the limits let start now, at most cap of them: taken in
-- claim order, a candidate starts when each bucket it falls in has a slot
-- (running attempts below concurrency) and a whole token (rate) left, and
-- then uses them. considered is how many candidates, from the first, were
-- weighed: those after it were not (the cap was reached); b_* is how many
-- it admitted per bucket. h_* is what the calling claim admitted in its
-- earlier rounds per bucket (b_* summed): jobs not yet running, counted
-- as if they were. The caller holds the limits lock (gaffer.claim).
--
-- The buckets are created if new and locked in (name, key) order, in a
-- statement of their own; the figures are read after it in a new
-- snapshot, which sees every claim that held one of these buckets before.
-- A bucket's running attempts are its bound when the candidates fit under
-- it, and otherwise counted (the count becomes the bound).
--
-- Tokens refill, and are spent, at one instant per claim: at, the time of
-- the calling claim's first round that had buckets (NULL in that round:
-- the database's clock once the locks are held, returned in admitted_at).
-- Every job a claim starts starts at that instant (its attempted_at), so
-- the instants a bucket spends at are the starts it admitted. Time never
-- runs backwards for a bucket: a rate bucket that another claim spent at
-- a later instant than at (it took the bucket first, between this
-- claim's rounds) admits nothing to this claim. So no window of one
-- period holds more than rate plus burst starts.
CREATE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[], cap integer,
    h_name text[], h_key text[], h_got integer[], at timestamptz,
    OUT admitted bigint[], OUT considered integer, OUT admitted_at timestamptz,
    OUT b_name text[], OUT b_key text[], OUT b_got integer[])
LANGUAGE plpgsql AS $fn$
DECLARE
    nc integer := coalesce(cardinality(c_id), 0);
    read_key boolean;
    read_args boolean;
    c_lkey text[];
    c_args json[];
    p_cand integer[];
    p_bucket integer[];
    b_want integer[];
    b_free integer[];
    b_running integer[];
    b_counted boolean[];
    b_tokens double precision[];
    b_held boolean[];
    last_name text;
    last_key text;
    lock_wait text;
    ok boolean;
    pi integer := 1;
    first integer;
BEGIN
    admitted_at := coalesce(at, clock_timestamp());
    IF nc = 0 THEN
        considered := 0;
        RETURN;
    END IF;
    -- The limit keys and args, only when a limit that applies is keyed
    -- by them (they lie at the end of the row).
    SELECT coalesce(bool_or(l.key_from = 'limit_key'), false),
           coalesce(bool_or(l.key_from LIKE 'args.%' OR l.key_from LIKE 'host(args.%'), false)
    INTO read_key, read_args
    FROM gaffer.limits l
    WHERE (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = ANY (c_kind))
      AND (l.tenant IS NULL OR l.tenant = ANY (c_tenant));
    IF read_key OR read_args THEN
        SELECT array_agg(j.limit_key ORDER BY c.ord), array_agg(CASE WHEN read_args THEN j.args END ORDER BY c.ord)
        INTO c_lkey, c_args
        FROM unnest(c_id) WITH ORDINALITY AS c(id, ord) LEFT JOIN gaffer.jobs j ON j.id = c.id;
    END IF;

    -- Each candidate's buckets: the candidates alike in what the limits
    -- read are keyed once.
    WITH cands AS (
        SELECT c.ord::integer AS cand, c.tenant, c.kind, c.fkey, c_lkey[c.ord] AS lkey, c_args[c.ord] AS args,
               dense_rank() OVER (ORDER BY c.tenant, c.kind, c.fkey, c_lkey[c.ord], c_args[c.ord]::text) AS grp
        FROM unnest(c_tenant, c_kind, c_fkey) WITH ORDINALITY AS c(tenant, kind, fkey, ord)
    ), keyed AS (
        SELECT g.grp, l.name, gaffer.limit_key_of(l.key_from, g.tenant, g.kind, q, g.lkey, g.fkey, g.args) AS key
        FROM (SELECT DISTINCT ON (grp) grp, tenant, kind, fkey, lkey, args FROM cands) g
        JOIN gaffer.limits l ON (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = g.kind)
                            AND (l.tenant IS NULL OR l.tenant = g.tenant)
    ), buckets AS (
        SELECT k.name, k.key, row_number() OVER (ORDER BY k.name, k.key)::integer AS b
        FROM (SELECT DISTINCT name, key FROM keyed) k
    ), pairs AS (
        SELECT c.cand, b.b FROM cands c JOIN keyed k ON k.grp = c.grp JOIN buckets b ON b.name = k.name AND b.key = k.key
    )
    SELECT (SELECT array_agg(b.name ORDER BY b.b) FROM buckets b),
           (SELECT array_agg(b.key ORDER BY b.b) FROM buckets b),
           (SELECT array_agg(coalesce(w.n, 0)::integer ORDER BY b.b)
            FROM buckets b LEFT JOIN (SELECT p.b, count(*) AS n FROM pairs p GROUP BY p.b) w ON w.b = b.b),
           (SELECT array_agg(p.cand ORDER BY p.cand, p.b) FROM pairs p),
           (SELECT array_agg(p.b ORDER BY p.cand, p.b) FROM pairs p)
    INTO b_name, b_key, b_want, p_cand, p_bucket;
    IF b_name IS NULL THEN
        admitted := c_id[1:cap];
        considered := least(nc, cap);
        RETURN;
    END IF;

    -- Created if new, then locked, in one order. The calling claim holds
    -- the buckets of its earlier rounds (h_*): one that sorts before the
    -- last of those is not waited for — taken if no other claim holds it,
    -- else its candidates wait for the next claim — so that no two claims
    -- wait for each other's buckets.
    SELECT h.name, h.key INTO last_name, last_key FROM unnest(h_name, h_key) AS h(name, key) ORDER BY 1 DESC, 2 DESC LIMIT 1;
    -- One statement creates each bucket or locks it, one bucket after
    -- another in that order (an existing one is locked, not updated:
    -- WHERE false), so that a new bucket, held by its insert, is never
    -- held before one that sorts before it.
    INSERT INTO gaffer.limit_buckets AS lb (limit_name, key, tokens, refilled_at)
    SELECT b.name, b.key, coalesce(l.burst, 0), coalesce(at, clock_timestamp())
    FROM unnest(b_name, b_key) AS b(name, key) JOIN gaffer.limits l ON l.name = b.name
    WHERE last_name IS NULL OR (b.name, b.key) > (last_name, last_key)
    ORDER BY b.name, b.key
    ON CONFLICT (limit_name, key) DO UPDATE SET tokens = lb.tokens WHERE false;
    b_held := array_fill(true, ARRAY[cardinality(b_name)]);
    IF last_name IS NOT NULL AND EXISTS (
        SELECT 1 FROM unnest(b_name, b_key) AS e(name, key)
        WHERE (e.name, e.key) <= (last_name, last_key)
          AND NOT EXISTS (SELECT 1 FROM gaffer.limit_buckets lb WHERE lb.limit_name = e.name AND lb.key = e.key)) THEN
        -- Those not made yet are made here, unless another claim is making
        -- one of them: an insert waits for another's insert of the same
        -- bucket, and not for more than a moment here, or two claims
        -- could wait for each other.
        lock_wait := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '5ms', true);
            INSERT INTO gaffer.limit_buckets (limit_name, key, tokens, refilled_at)
            SELECT e.name, e.key, coalesce(l.burst, 0), coalesce(at, clock_timestamp())
            FROM unnest(b_name, b_key) AS e(name, key) JOIN gaffer.limits l ON l.name = e.name
            WHERE (e.name, e.key) <= (last_name, last_key)
            ORDER BY e.name, e.key
            ON CONFLICT (limit_name, key) DO NOTHING;
            PERFORM set_config('lock_timeout', lock_wait, true);
        EXCEPTION WHEN lock_not_available THEN
            NULL; -- their candidates wait for the next claim
        END;
    END IF;
    IF last_name IS NOT NULL THEN
        SELECT array_agg(lk.k IS NOT NULL OR (b.name, b.key) > (last_name, last_key) ORDER BY b.ord) INTO b_held
        FROM unnest(b_name, b_key) WITH ORDINALITY AS b(name, key, ord)
        LEFT JOIN (SELECT lb.limit_name, lb.key, true AS k FROM gaffer.limit_buckets lb
                   WHERE (lb.limit_name, lb.key) IN (SELECT e.name, e.key FROM unnest(b_name, b_key) AS e(name, key)
                                                     WHERE (e.name, e.key) <= (last_name, last_key))
                   FOR UPDATE OF lb SKIP LOCKED) lk ON lk.limit_name = b.name AND lk.key = b.key;
    END IF;
    admitted_at := coalesce(at, clock_timestamp());

    -- A new statement, so a new snapshot. Per bucket, in b order: the
    -- running attempts it counts (its bound when its candidates fit under
    -- it, else counted), whether they were counted, its whole tokens
    -- refilled, and its free slots. A bucket whose limit is gone limits
    -- nothing; a rate bucket spent after admitted_at has no slot.
    SELECT array_agg(f.running ORDER BY f.b), array_agg(f.counted ORDER BY f.b), array_agg(f.tokens ORDER BY f.b),
           array_agg(CASE WHEN NOT b_held[f.b] OR f.late THEN 0
                          ELSE least(CASE WHEN f.concurrency IS NULL THEN 2147483647 ELSE greatest(f.concurrency - f.running, 0) END,
                                     CASE WHEN f.tokens IS NULL THEN 2147483647 ELSE floor(f.tokens)::integer END) END ORDER BY f.b)
    INTO b_running, b_counted, b_tokens, b_free
    FROM (
        SELECT b.b, l.concurrency, t.tokens, coalesce(l.rate IS NOT NULL AND lb.refilled_at > admitted_at, false) AS late,
               l.concurrency IS NOT NULL AND NOT coalesce(lb.running_bound + b.want <= l.concurrency, false) AS counted,
               CASE WHEN l.concurrency IS NULL THEN 0
                    WHEN lb.running_bound + b.want <= l.concurrency THEN lb.running_bound
                    ELSE (SELECT count(*) FROM gaffer.jobs r
                          WHERE r.state = 'running' AND (l.queue IS NULL OR r.queue = l.queue)
                            AND (l.kind IS NULL OR r.kind = l.kind) AND (l.tenant IS NULL OR r.tenant = l.tenant)
                            AND gaffer.limit_key_of(l.key_from, r.tenant, r.kind, r.queue, r.limit_key, r.fairness_key, r.args) = b.key)::integer
                         -- and what the calling claim admitted in its earlier rounds, not yet running
                         + coalesce((SELECT sum(h.got) FROM unnest(h_name, h_key, h_got) AS h(name, key, got)
                                     WHERE h.name = b.name AND h.key = b.key), 0)::integer
               END AS running
        FROM unnest(b_name, b_key, b_want) WITH ORDINALITY AS b(name, key, want, b)
        LEFT JOIN gaffer.limits l ON l.name = b.name
        LEFT JOIN gaffer.limit_buckets lb ON lb.limit_name = b.name AND lb.key = b.key
        CROSS JOIN LATERAL (SELECT CASE WHEN l.rate IS NULL THEN NULL
                                       WHEN lb.limit_name IS NULL THEN 0
                                       ELSE least(l.burst::double precision, lb.tokens
                                            + greatest(extract(epoch FROM admitted_at - lb.refilled_at), 0) * 1000 / l.period_ms * l.rate)
                                  END AS tokens) t
    ) f;

    b_got := array_fill(0, ARRAY[cardinality(b_name)]);
    IF nc <= cap AND NOT EXISTS (SELECT 1 FROM unnest(b_want, b_free) AS w(want, free) WHERE w.want > w.free) THEN
        -- Every candidate fits.
        admitted := c_id;
        considered := nc;
        b_got := b_want;
    ELSE
        -- In claim order: a candidate starts if each of its buckets has a
        -- slot left, and takes one in each.
        considered := 0;
        FOR i IN 1..nc LOOP
            EXIT WHEN coalesce(cardinality(admitted), 0) >= cap;
            considered := i;
            ok := true;
            first := pi;
            WHILE pi <= cardinality(p_cand) AND p_cand[pi] = i LOOP
                IF b_free[p_bucket[pi]] - b_got[p_bucket[pi]] < 1 THEN
                    ok := false;
                END IF;
                pi := pi + 1;
            END LOOP;
            IF ok THEN
                FOR x IN first..pi - 1 LOOP
                    b_got[p_bucket[x]] := b_got[p_bucket[x]] + 1;
                END LOOP;
                admitted := admitted || c_id[i];
            END IF;
        END LOOP;
    END IF;

    -- Bounds rise by the admitted (a count sets them), rate buckets spend
    -- a token per admitted start.
    UPDATE gaffer.limit_buckets lb
    SET running_bound = CASE WHEN b.counted THEN b.running + b.got
                             WHEN lb.running_bound IS NOT NULL THEN lb.running_bound + b.got END,
        tokens = CASE WHEN b.tokens IS NULL OR b.got = 0 THEN lb.tokens ELSE b.tokens - b.got END,
        refilled_at = CASE WHEN b.tokens IS NULL OR b.got = 0 THEN lb.refilled_at ELSE admitted_at END
    FROM unnest(b_name, b_key, b_running, b_counted, b_tokens, b_got) WITH ORDINALITY AS b(name, key, running, counted, tokens, got, b)
    WHERE lb.limit_name = b.name AND lb.key = b.key AND (b.got > 0 OR b.counted) AND b_held[b.b];
END
$fn$;

-- limits_full says whether a limit leaves no room, in the calling
-- transaction's view, for any job of unit (t, k) of queue q — or, with t
-- NULL, for any job of q: a limit of every kind whose bucket is the same
-- for all those jobs (keyed by nothing, the tenant, the queue or the
-- fairness key; for all of q's units, by nothing or the queue, of every
-- tenant) with its running attempts' bound at its concurrency, or less
-- than a whole token left. A claim asks it of the units whose candidates
-- a limit refused, after limit_admit has counted their buckets (and so
-- their bounds are exact plus what the claim admitted), so as not to look
-- deeper into a unit, or into the queue, that can give nothing more
-- (gaffer.claim). A stale bound only makes it say full: the next claim
-- counts again.
CREATE FUNCTION gaffer.limits_full(q text, t text, k text) RETURNS boolean
LANGUAGE sql STABLE AS $fn$
    SELECT EXISTS (
        SELECT 1 FROM gaffer.limits l
        JOIN gaffer.limit_buckets lb ON lb.limit_name = l.name
                                    AND lb.key = gaffer.limit_key_of(l.key_from, t, NULL, q, NULL, k, NULL)
        WHERE (l.queue IS NULL OR l.queue = q) AND l.kind IS NULL
          AND CASE WHEN t IS NULL THEN l.tenant IS NULL AND l.key_from IN ('', 'queue')
                   ELSE (l.tenant IS NULL OR l.tenant = t) AND l.key_from IN ('', 'tenant', 'queue', 'fairness_key') END
          AND (l.concurrency <= lb.running_bound
               OR l.rate IS NOT NULL AND least(l.burst::double precision, lb.tokens
                    + greatest(extract(epoch FROM clock_timestamp() - lb.refilled_at), 0) * 1000 / l.period_ms * l.rate) < 1))
$fn$;

-- The row forms of earlier builds (their limit usage): the key limit
-- key_from counts job j under, and whether limit l applies to job j.
CREATE FUNCTION gaffer.limit_key(key_from text, j gaffer.jobs) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT gaffer.limit_key_of(key_from, j.tenant, j.kind, j.queue, j.limit_key, j.fairness_key, j.args)
$$;

CREATE FUNCTION gaffer.limit_applies(l gaffer.limits, j gaffer.jobs) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (l.queue IS NULL OR l.queue = j.queue) AND (l.kind IS NULL OR l.kind = j.kind)
       AND (l.tenant IS NULL OR l.tenant = j.tenant)
$$;
