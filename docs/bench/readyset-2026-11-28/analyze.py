#!/usr/bin/env python3
"""Summarise runs/<id>/ into markdown. Pure python (no numpy).
claim txs = odd pgbench tx numbers (phase toggle, verified with a \\sleep test).
service time = logged latency - schedule lag (pgbench -R logs latency from the scheduled start)."""
import glob, os, sys, math

def pct(xs, p):
    if not xs: return float('nan')
    xs = sorted(xs); k = (len(xs) - 1) * p / 100.0
    f = math.floor(k); c = math.ceil(k)
    return xs[f] if f == c else xs[f] + (xs[c] - xs[f]) * (k - f)

def kv(path):
    d = {}
    for line in open(path):
        if '=' in line:
            for tok in line.split():
                if '=' in tok:
                    a, b = tok.split('=', 1); d[a] = b
    return d

def load(run):
    m = kv(f'{run}/meta.txt'); t0 = float(m['t0'])
    h = kv(f'{run}/holder.txt')
    r = dict(id=os.path.basename(run), design=m['design'], R=int(m['R']), t0=t0,
             hold=(float(h['holder_start']) - t0, float(h['holder_end']) - t0))
    claims, compl = [], []
    for f in glob.glob(f'{run}/clm.[0-9]*'):
        for line in open(f):
            c, n, lat, _, s, us, lag = line.split()[:7]
            t = int(s) + int(us) / 1e6 - t0
            rec = (t, (int(lat) - int(lag)) / 1000.0, int(lag) / 1000.0, int(lat) / 1000.0)
            (claims if int(n) % 2 == 1 else compl).append(rec)
    r['claims'], r['compl'] = claims, compl
    enq = []
    for f in glob.glob(f'{run}/enq.[0-9]*'):
        for line in open(f):
            c, n, lat, _, s, us, lag = line.split()[:7]
            enq.append((int(s) + int(us) / 1e6 - t0, (int(lat) - int(lag)) / 1000.0))
    r['enq'] = enq
    def persec(p):
        d = {}
        for line in open(p):
            if line.strip():
                a, b = line.strip().split(','); d[int(a) - t0] = int(b)   # key = second start rel. t0
        return d
    r['ins'] = persec(f'{run}/ins_per_s.csv'); r['clm'] = persec(f'{run}/clm_per_s.csv')
    rot = []
    if os.path.exists(f'{run}/rotation_log.csv'):
        for line in open(f'{run}/rotation_log.csv'):
            a = line.strip().split(',')
            if len(a) < 8: continue
            st, la, fi = float(a[0]) - t0, float(a[1]) - t0, float(a[2]) - t0
            rot.append(dict(t=st, wait=(la - st) * 1000, total=(fi - st) * 1000, hold=(fi - la) * 1000,
                            attempts=int(a[5]), fails=int(a[6]), moved=int(a[7])))
    r['rot'] = rot
    r['states'] = open(f'{run}/states.csv').read().strip().replace('\n', ' ')
    return r

def backlog(r, t):
    # rows enqueued before t minus rows claimed before t (t at a whole second of wall clock)
    ins = sum(v for k, v in r['ins'].items() if k + 1 <= t + 1e-9)
    clm = sum(v for k, v in r['clm'].items() if k + 1 <= t + 1e-9)
    return ins - clm

def window_rows(r, w0, w1):
    out = {}
    cl = [x for x in r['claims'] if w0 <= x[0] < w1]
    svc = [x[1] for x in cl]; lag = [x[2] for x in cl]
    out['claims_s'] = len(cl) / (w1 - w0)
    out['p50'] = pct(svc, 50); out['p99'] = pct(svc, 99); out['max'] = max(svc) if svc else float('nan')
    out['lag99'] = pct(lag, 99)
    out['compl_p99'] = pct([x[1] for x in r['compl'] if w0 <= x[0] < w1], 99)
    # per-second buckets are aligned to wall-clock seconds; t0 is fractional -> attribute bucket by its start
    out['rows_s'] = sum(v for k, v in r['clm'].items() if w0 <= k < w1) / (w1 - w0)
    out['ins_s'] = sum(v for k, v in r['ins'].items() if w0 <= k < w1) / (w1 - w0)
    return out

def main(runs):
    R = [load(x) for x in runs]
    print('# per-run window tables\n')
    print('Times in ms. t = seconds since load start; holder open from ~20 s to ~111 s.')
    print('claim p50/p99/max = claim service time (pgbench latency minus schedule lag); lag99 = p99 schedule lag of claim txs;')
    print('backlog = enqueued - claimed rows at t+5 / t+10 (exact, from per-row timestamps).\n')
    for r in R:
        print(f"## {r['id']}  (design {r['design']}{'' if r['design']=='A' else ', R=%ds' % r['R']}; holder {r['hold'][0]:.1f}-{r['hold'][1]:.1f} s; final states: {r['states']})\n")
        print('| window s | ins rows/s | claims/s | rows claimed/s | claim p50 | claim p99 | claim max | lag p99 | compl p99 | backlog @+5 / @+10 |')
        print('|---|---|---|---|---|---|---|---|---|---|')
        for w0 in range(0, 150, 10):
            w1 = w0 + 10
            o = window_rows(r, w0, w1)
            if o['claims_s'] == 0: continue
            t5, t10 = w0 + 5, w1
            b5 = backlog(r, math.floor(r['t0'] + t5) - r['t0'])
            b10 = backlog(r, math.floor(r['t0'] + t10) - r['t0'])
            print(f"| {w0}-{w1} | {o['ins_s']:.0f} | {o['claims_s']:.1f} | {o['rows_s']:.0f} | {o['p50']:.2f} | {o['p99']:.2f} | {o['max']:.1f} | {o['lag99']:.1f} | {o['compl_p99']:.2f} | {b5} / {b10} |")
        e = [x[1] for x in r['enq']]
        print(f"\nenqueue service time (whole run): p50 {pct(e,50):.2f} ms, p99 {pct(e,99):.2f} ms, max {max(e):.1f} ms; enqueue txs {len(e)}")
        if r['rot']:
            rt = r['rot']
            def s(key): 
                v = [x[key] for x in rt]; return f"p50 {pct(v,50):.1f} / p99 {pct(v,99):.1f} / max {max(v):.1f}"
            inh = [x for x in rt if r['hold'][0] <= x['t'] < r['hold'][1]]
            print(f"\nrotation steps: {len(rt)} (during hold: {len(inh)}); total step ms {s('total')}; "
                  f"lock wait ms (incl. cur update+commit) {s('wait')}; lock held ms (move+truncate) {s('hold')}; "
                  f"lock_timeout failures {sum(x['fails'] for x in rt)} (steps with >=1 failure: {sum(1 for x in rt if x['fails'])}); "
                  f"rows moved per step p50 {pct([x['moved'] for x in rt],50):.0f} max {max(x['moved'] for x in rt)}")
        print()

if __name__ == '__main__' and not os.environ.get('PHASE'):
    main(sys.argv[1:] or sorted(glob.glob('/tmp/readyset-exp/runs/*')))

def phase_table(runs):
    """B runs: claim service time during the hold (hold_start+5 .. hold_end) by time since the last rotation step start."""
    print('# B: claim service time during the hold vs. time since last rotation step\n')
    for run in runs:
        r = load(run)
        if r['design'] != 'B': continue
        R_ = r['R']; starts = sorted(x['t'] for x in r['rot'])
        nb = 5; width = R_ / nb
        bins = [[] for _ in range(nb)]; near = []; far = []
        import bisect
        for (t, svc, lag, lat) in r['claims']:
            if not (r['hold'][0] + 5 <= t < r['hold'][1]): continue
            i = bisect.bisect_right(starts, t) - 1
            if i < 0: continue
            dt = t - starts[i]
            if dt >= R_ + 0.5: continue
            bins[min(int(dt / width), nb - 1)].append(svc)
            (near if dt < 0.05 else far).append(svc)
        cells = ' | '.join(f"{pct(b,50):.2f} / {pct(b,99):.2f} (n={len(b)})" for b in bins)
        print(f"{r['id']}: bins of {width:.1f}s after a rotation start, p50/p99 ms: {cells}; "
              f"claims ending <50 ms after a rotation start: n={len(near)} p50 {pct(near,50):.2f} p99 {pct(near,99):.2f} max {max(near) if near else float('nan'):.1f}")
    print()

if __name__ == '__main__' and os.environ.get('PHASE'):
    phase_table(sorted(glob.glob('/tmp/readyset-exp/runs/B_*')))
