package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DB is what Snapshot reads through: a *pgx.Conn or a *pgxpool.Pool.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// MaxRows is the most rows of one table a snapshot lists; a table with
// more is described by its count. Snapshots are for scratch databases,
// whose tables hold their seed rows.
const MaxRows = 1000

// Snapshot reads the catalog of Schema (without Excluded) in one
// read-only transaction. A database without the schema has an empty
// catalog. Names are printed with search_path set to pg_catalog alone, so
// everything outside it comes schema-qualified, as DDL run anywhere needs
// it.
func Snapshot(ctx context.Context, db DB) (Catalog, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Catalog{}, fmt.Errorf("catalog snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT set_config('search_path', 'pg_catalog', true)`); err != nil {
		return Catalog{}, fmt.Errorf("catalog snapshot: %w", err)
	}
	s := snapshot{ctx: ctx, tx: tx}
	for _, step := range []struct {
		what string
		read func() error
	}{
		{"tables", s.tables},
		{"columns", s.columns},
		{"constraints", s.constraints},
		{"indexes", s.indexes},
		{"sequences", s.sequences},
		{"views", s.views},
		{"types", s.types},
		{"routines", s.routines},
		{"triggers", s.triggers},
		{"rows", s.rows},
	} {
		if err := step.read(); err != nil {
			return Catalog{}, fmt.Errorf("catalog snapshot: %s: %w", step.what, err)
		}
	}
	for _, t := range s.tableList {
		s.cat.add(Object{Kind: Table, Name: t.name, Def: t.head + strings.Join(t.columns, "")})
	}
	return s.cat, nil
}

// snapshot is one Snapshot in progress.
type snapshot struct {
	ctx       context.Context
	tx        pgx.Tx
	cat       Catalog
	tableList []*table
	tableByID map[uint32]*table
}

// table is a table being read: its header line and its column lines.
type table struct {
	oid     uint32
	relname string
	name    string // schema-qualified
	kind    string // relkind
	head    string
	columns []string
	// timeColumns are the columns whose values a Rows object leaves out
	// (they record when a row was written).
	timeColumns map[string]bool
}

// inSchema restricts a query's relation c (pg_class) to Schema without
// Excluded (the query arguments @schema and @excluded).
const inSchema = `c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = @schema) AND c.relname <> ALL (@excluded::text[])`

// routineName is the Name of routine p (pg_proc): schema-qualified, with
// its argument types.
const routineName = `format('%I.%I(%s)', (SELECT nspname FROM pg_namespace WHERE oid = p.pronamespace), p.proname,
	coalesce((SELECT string_agg(format_type(a.t, NULL), ', ' ORDER BY a.o) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, o)), ''))`

func (s *snapshot) query(sql string, scan func(pgx.CollectableRow) error) error {
	rows, err := s.tx.Query(s.ctx, sql, pgx.NamedArgs{"schema": Schema, "excluded": Excluded})
	if err != nil {
		return err
	}
	_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) { return struct{}{}, scan(row) })
	return err
}

func (s *snapshot) tables() error {
	s.tableByID = map[uint32]*table{}
	return s.query(`
		SELECT c.oid, c.relname, format('%I.%I', @schema::text, c.relname), c.relkind::text,
		       CASE c.relpersistence WHEN 'u' THEN 'unlogged ' WHEN 't' THEN 'temporary ' ELSE '' END
		       || CASE c.relkind WHEN 'p' THEN 'partitioned table ' || pg_get_partkeydef(c.oid) WHEN 'f' THEN 'foreign table' ELSE 'table' END
		       || CASE WHEN c.relispartition THEN ' partition ' || pg_get_expr(c.relpartbound, c.oid) ELSE '' END
		       || coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', '')
		       || CASE WHEN c.relrowsecurity THEN ' row security' ELSE '' END
		FROM pg_class c WHERE c.relkind IN ('r', 'p', 'f') AND `+inSchema+`
		ORDER BY c.relname`,
		func(row pgx.CollectableRow) error {
			t := &table{timeColumns: map[string]bool{}}
			if err := row.Scan(&t.oid, &t.relname, &t.name, &t.kind, &t.head); err != nil {
				return err
			}
			s.tableList = append(s.tableList, t)
			s.tableByID[t.oid] = t
			return nil
		})
}

func (s *snapshot) columns() error {
	return s.query(`
		SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype),
		       format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod))
		       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
		       || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
		       || CASE WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') STORED'
		               WHEN d.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) ELSE '' END
		       || CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY' WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE c.relkind IN ('r', 'p', 'f') AND `+inSchema+` AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attrelid, a.attnum`,
		func(row pgx.CollectableRow) error {
			var oid uint32
			var name, typ, line string
			var isTime bool
			if err := row.Scan(&oid, &name, &typ, &isTime, &line); err != nil {
				return err
			}
			t := s.tableByID[oid]
			if t == nil {
				return fmt.Errorf("column %s of a table not read (oid %d)", name, oid)
			}
			t.columns = append(t.columns, "\n    "+line)
			if isTime {
				t.timeColumns[name] = true
			}
			return nil
		})
}

func (s *snapshot) constraints() error {
	return s.query(`
		SELECT format('%I.%I.%I', @schema::text, c.relname, con.conname), pg_get_constraintdef(con.oid)
		FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
		WHERE `+inSchema,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Constraint}
			if err := row.Scan(&o.Name, &o.Def); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

func (s *snapshot) indexes() error {
	return s.query(`
		SELECT format('%I.%I', @schema::text, i.relname),
		       pg_get_indexdef(i.oid) || CASE WHEN x.indisvalid THEN '' ELSE ' -- INVALID' END
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
		WHERE `+inSchema,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Index}
			if err := row.Scan(&o.Name, &o.Def); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

func (s *snapshot) sequences() error {
	return s.query(`
		SELECT format('%I.%I', @schema::text, c.relname),
		       format('%s START %s INCREMENT %s MINVALUE %s MAXVALUE %s CACHE %s%s', format_type(sq.seqtypid, NULL),
		              sq.seqstart, sq.seqincrement, sq.seqmin, sq.seqmax, sq.seqcache, CASE WHEN sq.seqcycle THEN ' CYCLE' ELSE '' END)
		       || coalesce((SELECT format(' OWNED BY %s.%I%s', d.refobjid::regclass, a.attname, CASE d.deptype WHEN 'i' THEN ' (identity)' ELSE '' END)
		                    FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		                    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass
		                      AND d.deptype IN ('a', 'i')), '')
		FROM pg_sequence sq JOIN pg_class c ON c.oid = sq.seqrelid
		WHERE `+inSchema+`
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class o ON o.oid = d.refobjid
		                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass
		                    AND d.deptype IN ('a', 'i') AND o.relname = ANY (@excluded::text[]))`,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Sequence}
			if err := row.Scan(&o.Name, &o.Def); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

func (s *snapshot) views() error {
	return s.query(`
		SELECT format('%I.%I', @schema::text, c.relname),
		       CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END
		       || coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', '') || E'\n' || pg_get_viewdef(c.oid, true)
		FROM pg_class c WHERE c.relkind IN ('v', 'm') AND `+inSchema,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: View}
			if err := row.Scan(&o.Name, &o.Def); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

// types reads the types made on their own: enums, domains, ranges,
// composite types and base types; not those each table, view, sequence
// or range brings with it (its row type, array type, multirange).
func (s *snapshot) types() error {
	return s.query(`
		SELECT format('%I.%I', @schema::text, t.typname),
		       CASE t.typtype
		       WHEN 'e' THEN 'enum (' || coalesce((SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
		                                           FROM pg_enum e WHERE e.enumtypid = t.oid), '') || ')'
		       WHEN 'd' THEN 'domain ' || format_type(t.typbasetype, t.typtypmod)
		            || CASE WHEN t.typcollation <> 0 AND t.typcollation <> (SELECT b.typcollation FROM pg_type b WHERE b.oid = t.typbasetype)
		                    THEN ' COLLATE ' || t.typcollation::regcollation::text ELSE '' END
		            || CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
		            || coalesce(' DEFAULT ' || t.typdefault, '')
		            || coalesce((SELECT string_agg(format(' CONSTRAINT %I %s', con.conname, pg_get_constraintdef(con.oid)), '' ORDER BY con.conname)
		                         FROM pg_constraint con WHERE con.contypid = t.oid), '')
		       WHEN 'c' THEN 'composite (' || coalesce((SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
		                                                FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped), '') || ')'
		       WHEN 'r' THEN 'range (' || (SELECT format_type(r.rngsubtype, NULL) FROM pg_range r WHERE r.rngtypid = t.oid) || ')'
		       ELSE 'base type, input ' || t.typinput::text || ', output ' || t.typoutput::text
		       END
		FROM pg_type t
		WHERE t.typnamespace = (SELECT oid FROM pg_namespace WHERE nspname = @schema)
		  AND (t.typtype IN ('e', 'd', 'r')
		       OR (t.typtype = 'c' AND (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
		       OR (t.typtype = 'b' AND t.typcategory <> 'A'))`,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Type}
			if err := row.Scan(&o.Name, &o.Def); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

func (s *snapshot) routines() error {
	return s.query(`
		SELECT `+routineName+`,
		       CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' WHEN 'a' THEN 'AGGREGATE ' ELSE 'FUNCTION ' END || `+routineName+`,
		       CASE p.prokind WHEN 'a' THEN
		           (SELECT format('AGGREGATE %I.%I(%s) (SFUNC = %s, STYPE = %s, FINALFUNC = %s, COMBINEFUNC = %s, INITCOND = %L)',
		                          @schema::text, p.proname, pg_get_function_arguments(p.oid), ag.aggtransfn, format_type(ag.aggtranstype, NULL),
		                          ag.aggfinalfn, ag.aggcombinefn, ag.agginitval)
		            FROM pg_aggregate ag WHERE ag.aggfnoid = p.oid)
		       ELSE pg_get_functiondef(p.oid) END,
		       p.prokind::text || ' (' || pg_get_function_arguments(p.oid) || ') ' || coalesce(pg_get_function_result(p.oid), ''),
		       coalesce(p.prosrc, '')
		FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = @schema)`,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Function}
			if err := row.Scan(&o.Name, &o.Drop, &o.Def, &o.Signature, &o.Source); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

func (s *snapshot) triggers() error {
	return s.query(`
		SELECT format('%I.%I.%I', @schema::text, c.relname, tg.tgname),
		       pg_get_triggerdef(tg.oid)
		       || CASE tg.tgenabled WHEN 'O' THEN ''
		          ELSE format(E';\nALTER TABLE %I.%I %s TRIGGER %I', @schema::text, c.relname,
		                      CASE tg.tgenabled WHEN 'D' THEN 'DISABLE' WHEN 'R' THEN 'ENABLE REPLICA' ELSE 'ENABLE ALWAYS' END, tg.tgname) END,
		       format('%I.%I', @schema::text, c.relname),
		       (SELECT `+routineName+` FROM pg_proc p WHERE p.oid = tg.tgfoid)
		FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
		WHERE NOT tg.tgisinternal AND `+inSchema,
		func(row pgx.CollectableRow) error {
			o := Object{Kind: Trigger}
			if err := row.Scan(&o.Name, &o.Def, &o.Table, &o.Executes); err != nil {
				return err
			}
			s.cat.add(o)
			return nil
		})
}

// rows reads every table's rows (seed data, in a scratch database), each
// as a JSON object with sorted keys, one a line, in order. Times are left
// out: they say when the row was written.
func (s *snapshot) rows() error {
	for _, t := range s.tableList {
		if t.kind != "r" {
			continue
		}
		from := pgx.Identifier{Schema, t.relname}.Sanitize()
		rows, err := s.tx.Query(s.ctx, `SELECT to_jsonb(t)::text FROM `+from+` t LIMIT `+fmt.Sprint(MaxRows+1))
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if len(texts) == 0 {
			continue
		}
		lines := make([]string, 0, len(texts))
		for _, text := range texts {
			var row map[string]json.RawMessage
			if err := json.Unmarshal([]byte(text), &row); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			for col := range row {
				if t.timeColumns[col] && string(row[col]) != "null" {
					row[col] = json.RawMessage(`"(a time)"`)
				}
			}
			line, err := json.Marshal(row) // keys sorted
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			lines = append(lines, string(line))
		}
		sort.Strings(lines)
		def := strings.Join(lines, "\n")
		if len(lines) > MaxRows {
			def = fmt.Sprintf("more than %d rows", MaxRows)
		}
		s.cat.add(Object{Kind: Rows, Name: t.name, Def: def})
	}
	return nil
}
