#!/usr/bin/env python3
"""Reads /tmp/river-cmp/raw and prints the report's tables (markdown)."""
import glob, json, re, statistics, sys
RAW = '/tmp/river-cmp/raw'
rounds = sorted({int(re.search(r'/r(\d+)-', f).group(1)) for f in glob.glob(RAW + '/r*-*.txt')})
def river(r, mode):
    try: t = open(f'{RAW}/r{r}-river-{mode}.txt').read()
    except FileNotFoundError: return None
    m = re.search(r'total jobs worked \[\s*(\d+) \], total jobs inserted \[\s*(\d+) \], overall job/sec \[\s*([\d.]+) \], running ([\d.]+)s', t)
    return dict(jobs=int(m[1]), inserted=int(m[2]), jps=float(m[3]), secs=float(m[4]))
def gaffer(r, mode):
    try: t = open(f'{RAW}/r{r}-gaffer-{mode}.txt').read()
    except FileNotFoundError: return None
    j = json.loads([l for l in t.splitlines() if l.startswith('{')][0])
    return dict(jobs=j['jobs'], jps=j['jobs_per_sec'], secs=j['seconds'], pg=j.get('postgres_cores'), cl=j.get('client_cores'), enq=j.get('enqueue_jobs_per_sec'))
def sizes(r, sys_):
    try: t = open(f'{RAW}/r{r}-{sys_}-continuous.sizes.txt').read()
    except FileNotFoundError: return None
    before, after = t.split('# VACUUM')
    def tot(s):
        m = re.search(r'toast_fsm_vm_bytes\s*\n[-+]+\n\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+)', s)
        return tuple(map(int, m.groups()))
    def idx(s):
        blk = re.split(r'\n\s*index\s*\|\s*bytes', s)[1].split('rows)')[0]
        return {a.strip(): int(b) for a, b in re.findall(r'\n\s*([\w.]+)\s*\|\s*(\d+)', blk)}
    states = dict((a, int(b)) for a, b in re.findall(r'\n\s*(available|completed|pending|running|retrying|failed|cancelled|discarded|scheduled)\s*\|\s*(\d+)', before))
    m = re.search(r'avg_row_bytes\s*\|\s*rows\s*\n[-+]+\n\s*([\d.]+) \|\s*(\d+)', before)
    st = re.search(r'n_live_tup.*\n[-+]+\n\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|([^|]*)\|\s*(\d+) \|([^|]*)\|\s*(\d+) \|([^|]*)\|\s*(\d+)', before)
    return dict(before=tot(before), after=tot(after), idx=idx(before), idx_after=idx(after), states=states, avgrow=float(m[1]), rows=int(m[2]),
                live=int(st[1]), dead=int(st[2]), upd=int(st[4]), hot=int(st[5]), autovac=int(st[8]), vacuums=int(st[12]))
med = statistics.median
def fmt(x): return f'{x:,.0f}'
main = [r for r in rounds if r <= 3]
extra = [r for r in rounds if r > 3]
out = []
for mode, title in (('backlog', 'Work off a pre-inserted 1,000,000-job backlog (work phase only)'), ('continuous', 'Continuous insert + work, 60 s')):
    out.append(f'### {title}\n\n| Round | River jobs/s | Gaffer jobs/s | Gaffer / River (same round) |\n|---|---|---|---|')
    rs, gs = [], []
    for r in rounds:
        a, b = river(r, mode), gaffer(r, mode)
        if not a or not b: continue
        tag = '' if r <= 3 else ' (extra)'
        out.append(f'| {r}{tag} | {fmt(a["jps"])} | {fmt(b["jps"])} | {b["jps"]/a["jps"]:.2f}× |')
        if r <= 3: rs.append(a['jps']); gs.append(b['jps'])
    out.append(f'| **median, rounds 1–3** | **{fmt(med(rs))}** ({fmt(min(rs))}–{fmt(max(rs))}) | **{fmt(med(gs))}** ({fmt(min(gs))}–{fmt(max(gs))}) | **{med(gs)/med(rs):.2f}×** |')
    if extra and mode == 'continuous':
        ra = rs + [river(r, mode)['jps'] for r in extra if river(r, mode)]
        ga = gs + [gaffer(r, mode)['jps'] for r in extra if gaffer(r, mode)]
        out.append(f'| median, all {len(ra)} rounds | {fmt(med(ra))} | {fmt(med(ga))} | {med(ga)/med(ra):.2f}× |')
    out.append('')
out.append('### Bytes per retained finished (completed) job, right after each continuous run\n')
out.append('| Round | System | total bytes | heap | indexes | completed rows | other rows | total / completed | (after VACUUM) total / completed | avg row width (pg_column_size) | dead tuples at measurement | updates (HOT) |\n|---|---|---|---|---|---|---|---|---|---|---|---|')
vacmax = {'river': 0, 'gaffer': 0}; per = {'river': [], 'gaffer': []}; per_main = {'river': [], 'gaffer': []}
for r in rounds:
    for s in ('river', 'gaffer'):
        z = sizes(r, s)
        if not z: continue
        done = z['states'].get('completed', 0); other = sum(v for k, v in z['states'].items() if k != 'completed')
        b = z['before'][0] / done; a = z['after'][0] / done
        per[s].append(b)
        if r <= 3: per_main[s].append(b)
        tag = '' if r <= 3 else ' (extra)'
        vac = max(abs(z['idx_after'][k] - v) / max(v, 1) for k, v in z['idx'].items())
        vacmax[s] = max(vacmax[s], vac, abs(z['after'][0] - z['before'][0]) / z['before'][0])
        out.append(f'| {r}{tag} | {s} | {fmt(z["before"][0])} | {fmt(z["before"][1])} | {fmt(z["before"][2])} | {fmt(done)} | {fmt(other)} ({", ".join(f"{k} {v:,}" for k, v in z["states"].items() if k != "completed")}) | {b:.0f} | {a:.0f} | {z["avgrow"]:.1f} | {fmt(z["dead"])} | {fmt(z["upd"])} ({z["hot"]}) |')
for s in ('river', 'gaffer'):
    out.append(f'\nmedian total / completed, rounds 1–3, {s}: **{med(per_main[s]):.0f} bytes**' + (f'; all rounds: {med(per[s]):.0f}' if extra else ''))
out.append(f'\nRiver / Gaffer bytes per completed job (medians, rounds 1–3): {med(per_main["river"])/med(per_main["gaffer"]):.2f}×\n')
for s in ('river', 'gaffer'):
    out.append(f'\n### Per-index sizes, {s} (bytes, right after each continuous run; the largest change any VACUUM made to an index or the total: {vacmax[s]*100:.2f}%)\n')
    rr = [r for r in rounds if sizes(r, s)]
    out.append('| index | ' + ' | '.join(f'r{r}' for r in rr) + ' | median bytes / completed row |\n|---|' + '---|' * (len(rr) + 1))
    names = sorted(sizes(rr[0], s)['idx'], key=lambda n: -sizes(rr[0], s)['idx'][n])
    for n in names:
        vals = [sizes(r, s)['idx'].get(n, 0) for r in rr]
        perrow = med([sizes(r, s)['idx'].get(n, 0) / sizes(r, s)['states']['completed'] for r in rr if r <= 3])
        out.append(f'| {n} | ' + ' | '.join(fmt(v) for v in vals) + f' | {perrow:.1f} |')
print('\n'.join(out))
