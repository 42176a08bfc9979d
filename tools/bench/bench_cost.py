#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_cost.py - Redis CPU per idle round per host and per key pushed,
of one or more builds side by side in the same run (issue 28, "Redis
cost").

    python3 tools/bench/bench_cost.py --build new=build \\
        --build base=/tmp/base/build [--repeat 5] [--idle-hosts 32]

Every cell is a bench_fleet.py cell (its agents, its driver, one
redis-server for the whole run), the driver always this tree's
(build/bench/bench_fleet, --driver: the segment is the core's, the same in
every build), the agents each build's rlshimd. Redis CPU is Redis's own rusage
(INFO cpu, used_cpu_user + used_cpu_sys, the deltas over the window), not
wall time: the machine is shared. The cells, each build's in turn, then
again, --repeat times; medians reported:

  quiet    no agent: Redis's own ticks (serverCron) over the window,
           taken off the others per second;
  idle     --idle-hosts agents, one async token-bucket rule, no request at
           all (bench_fleet -r 0): Redis CPU per round per host, the
           rounds the agents' own count (the segments' syncs);
  used     1 host, --keys keys at 200/s burst 200 each offered 100/s, so
           used (admitting) in every round but about e^-5 of them: CPU
           per key pushed, the idle rounds' cost taken off;
  used4    the same keys over 4 hosts, each key used on a host in a round
           with probability 1 - e^-(5/4) (at 20 rounds/s; the rounds the
           agents ran are used): per key pushed, its pulls by the other 3
           included;
  debt     1 host, --keys keys at 1/s burst 2 offered 2/s, every key in
           debt every round (docs/BENCHMARKS.md's "1 host, 1,000 keys all
           in debt"): CPU per key the round carries (used, or quiet and in
           debt, within the repush budget of 1,000 a round).
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_fleet as bf  # noqa: E402


def quiet_cpu(st, seconds):
    """Redis's CPU over `seconds` with no agent (s per s)."""
    f0, _ = bf.info(st.nodes[0])
    t = time.monotonic()
    time.sleep(seconds)
    f1, _ = bf.info(st.nodes[0])
    dt = time.monotonic() - t
    return (bf.delta(f0, f1, 'used_cpu_sys', float) +
            bf.delta(f0, f1, 'used_cpu_user', float)) / dt


def cell(st, tmp, build, driver, hosts, keys, rate, burst, over, seconds,
         warmup):
    bf.AGENT = os.path.abspath(os.path.join(build, 'rlshimd'))
    bf.DRIVER = driver
    bf.RATE, bf.BURST, bf.OVER = rate, burst, over
    c = bf.run_cell(st, tmp, hosts, keys, False, seconds, warmup)
    rounds = c['rounds_s'] * hosts * c['seconds']
    return {'redis_s': c['redis_cpu'] / 100 * c['seconds'], 'rounds': rounds,
            'seconds': c['seconds'], 'commands_s': c['commands_s'],
            'down': c['down'], 'rounds_s': c['rounds_s'],
            'in_host_s': c['in_host_s'], 'out_host_s': c['out_host_s'],
            'over_pct': c['over_pct'], 'wrong': c['wrong'],
            'agents_cpu': c['agents_cpu'], 'load_cpu': c['load_cpu']}


def round_commands(st, tmp, build, driver, warmup):
    """An idle round's top-level commands, from the slow log (every
    command, 4 idle hosts, 2 s; a cell of its own: the slow log costs
    Redis CPU): {name: per round}, the rounds told by the epoch GET, one a
    round in every build."""
    bf.AGENT = os.path.abspath(os.path.join(build, 'rlshimd'))
    bf.DRIVER = driver
    bf.RATE, bf.BURST, bf.OVER = 1, 2, 0.0
    c = bf.run_cell(st, tmp, 4, 1, False, 2, warmup, check=True)
    log = c['check'][0]
    rounds = max(1, log.get('get', 0))
    return {k: v / rounds for k, v in sorted(log.items())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', action='append', required=True,
                    help='NAME=DIR (rlshimd in DIR), once per build; the '
                         'first also gives the driver')
    ap.add_argument('--driver', default=os.path.join(bf.REPO, 'build', 'bench',
                                                      'bench_fleet'),
                    help='the load (this tree\'s: it knows -r 0)')
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--idle-hosts', type=int, default=32)
    ap.add_argument('--keys', type=int, default=1000)
    ap.add_argument('--seconds', type=int, default=6)
    ap.add_argument('--warmup', type=int, default=2)
    ap.add_argument('--cells', default='idle,used,used4,debt')
    ap.add_argument('--json')
    a = ap.parse_args()
    builds = [b.split('=', 1) for b in a.build]
    driver = os.path.abspath(a.driver)
    cells = a.cells.split(',')
    K = a.keys
    spec = {  # hosts, keys, rate, burst, over
        'idle': (a.idle_hosts, 1, 1, 2, 0.0),
        'used': (1, K, 200, 200, 0.5),
        'used4': (4, K, 200, 200, 0.5),
        'debt': (1, K, 1, 2, 2.0),
    }
    tmp = tempfile.mkdtemp(prefix='bench-cost-')
    st = bf.Store(0)
    res = {n: {c: [] for c in cells + ['quiet']} for n, _ in builds}
    t0 = time.monotonic()
    try:
        shape = {name: round_commands(st, tmp, build, driver, a.warmup)
                 for name, build in builds}
        for rep in range(a.repeat):
            for name, build in builds:
                q = quiet_cpu(st, a.seconds)
                res[name]['quiet'].append(q)
                idle_us = None
                for c in cells:
                    h, k, rate, burst, over = spec[c]
                    x = cell(st, tmp, build, driver, h, k, rate, burst, over,
                             a.seconds, a.warmup)
                    cpu = x['redis_s'] - q * x['seconds']
                    if c == 'idle':
                        x['us'] = 1e6 * cpu / x['rounds']
                        idle_us = x['us']
                    else:
                        # a key's requests a round on a host, at the
                        # rounds the agents ran (fewer when Redis is slow)
                        lam = over * rate / max(x['rounds_s'], 1.0) / h
                        if c == 'debt':
                            pushed = k * x['rounds']
                        else:
                            pushed = k * x['rounds'] * (1 - math.exp(-lam))
                        off = (idle_us or 0) * x['rounds']
                        x['us'] = (1e6 * cpu - off) / pushed
                    res[name][c].append(x)
                    print(f'bench_cost.py: {rep} {name} {c}: '
                          f'{json.dumps(x)}', file=sys.stderr, flush=True)
    finally:
        st.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - t0
    ver = ''
    print(f'Command: `python3 tools/bench/bench_cost.py '
          + ' '.join(f'--build {n}={b}' for n, b in builds)
          + f' --repeat {a.repeat} --idle-hosts {a.idle_hosts} --keys {K} '
          f'--seconds {a.seconds}`, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{total:.0f} s; medians of {a.repeat}.\n')
    what = {'idle': f'idle round per host ({a.idle_hosts} hosts)',
            'used': 'key pushed, used every round (1 host)',
            'used4': 'key pushed, used, 4 hosts (their pulls included)',
            'debt': 'key pushed, in debt (1 host)'}
    names = [n for n, _ in builds]
    print('| Redis CPU per | ' + ' | '.join(names) +
          (f' | {names[0]} / {names[1]}' if len(names) > 1 else '') +
          ' | runs (µs) |')
    print('|---|' + '---:|' * (len(names) + (len(names) > 1)) + '---|')
    for c in cells:
        med = [statistics.median(x['us'] for x in res[n][c]) for n in names]
        runs = '; '.join(n + ': ' + ', '.join(f'{x["us"]:.1f}' for x in res[n][c])
                         for n in names)
        ratio = (f' | {med[0] / med[1]:.2f}' if len(names) > 1 and med[1] else '')
        print(f'| {what[c]} | ' + ' | '.join(f'{m:.1f} µs' for m in med) +
              ratio + f' | {runs} |')
    print()
    for n in names:
        print(f'- {n}: an idle round\'s commands (slow log, 4 hosts, 2 s): '
              + ', '.join(f'{k.upper()} {v:.2f}' for k, v in shape[n].items())
              + f' (in all {sum(shape[n].values()):.1f})')
    for n in names:
        qs = statistics.median(res[n]['quiet'])
        extra = []
        for c in cells:
            xs = res[n][c]
            extra.append(f'{c}: {statistics.median(x["commands_s"] for x in xs):,.0f} '
                         f'commands/s, {statistics.median(x["rounds_s"] for x in xs):.1f} '
                         f'rounds/s per agent, to Redis '
                         f'{statistics.median(x["in_host_s"] for x in xs):,.0f} B/s per host, '
                         f'admitted/ideal {statistics.median(x["over_pct"] for x in xs):+.1f}%'
                         + (f', {sum(x["down"] for x in xs)} down' if any(x['down'] for x in xs) else ''))
        print(f'- {n}: Redis alone {1000 * qs:.2f} ms/s (taken off); ' +
              '; '.join(extra))
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'cells': res, 'round_commands': shape}, f, indent=1)


if __name__ == '__main__':
    main()
