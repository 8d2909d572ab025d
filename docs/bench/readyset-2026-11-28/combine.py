#!/usr/bin/env python3
# compact per-design tables: each cell = run1 / run2 / run3
import glob, math, sys
sys.path.insert(0, '/tmp/readyset-exp')
from analyze import load, window_rows, backlog, pct
for key, title in [('A_R0', 'Design A'), ('B_R1', 'Design B, R = 1 s'), ('B_R5', 'Design B, R = 5 s')]:
    runs = [load(p) for p in sorted(glob.glob(f'/tmp/readyset-exp/runs/{key}_run*'))]
    print(f'### {title} ({len(runs)} runs; cells = run1 / run2 / run3)\n')
    print('| window (s) | claims/s | rows claimed/s | claim p50 ms | claim p99 ms | backlog @+5 s | backlog @+10 s |')
    print('|---|---|---|---|---|---|---|')
    for w0 in range(0, 140, 10):
        w1 = w0 + 10
        os_ = [window_rows(r, w0, w1) for r in runs]
        b5 = [backlog(r, math.floor(r['t0'] + w0 + 5) - r['t0']) for r in runs]
        b10 = [backlog(r, math.floor(r['t0'] + w1) - r['t0']) for r in runs]
        f = lambda k, fmt: ' / '.join(fmt % o[k] for o in os_)
        tag = ' (hold from 20)' if w0 == 20 else (' (release ~110)' if w0 == 110 else '')
        print(f"| {w0}-{w1}{tag} | {f('claims_s','%.0f')} | {f('rows_s','%.0f')} | {f('p50','%.1f')} | {f('p99','%.1f')} | {' / '.join(map(str,b5))} | {' / '.join(map(str,b10))} |")
    print()
