#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fleet_compare.py - bench_fleet.py runs side by side, cell by cell.

    python3 tools/bench/fleet_compare.py SINGLE.json CLUSTER.json [...]

Each argument is the --json of one bench_fleet.py run over the same cells
(the same --hosts, --keys and --modes), the first one Redis (--store
single), the others clusters (--store cluster[:M]). One markdown table a
mode, each column the runs' figures in the order given, joined by " · ":
rounds/s per agent (agents with their store down at the end; "cluster not
ok": a master said so at the window's end), agent
commands/s, Redis CPU (every master's summed), the busiest master's CPU,
Redis CPU per key and round (async, 1-host cells only, where every key is
pushed each round it is in debt, and the rounds ran: 0.5/s or more; strict
pushes none), memory per key,
to Redis per host, admitted / ideal, and the busiest master's share of the
keys and of the Redis CPU.
"""
import json
import sys


def fmt(n):
    return f'{n:,.0f}'


def rounds(c):
    return (f'{c["rounds_s"]:.1f}' + (f' ({c["down"]})' if c['down'] else '')
            + (' (cluster not ok)' if c.get('clusterdown') else ''))


def busiest_cpu(c):
    return f'{max(m["redis_cpu"] for m in c["masters"]):.0f}%'


def per_key_round(c):
    """µs of Redis CPU per key and round, where that means one push."""
    if (c['hosts'] != 1 or c['rounds_s'] < 0.5 or not c['stored'] or
            c['threads'] > 1):  # strict (bench_fleet.c: 32 threads)
        return '-'
    return f'{1e4 * c["redis_cpu"] / (c["rounds_s"] * c["stored"]):.0f} µs'


def pct(c, name, spec):
    return format(c[name], spec) + '%'


def share(c):
    b = c['busiest']
    return f'{100 * b["stored"]:.0f}%, {100 * b["redis_cpu"]:.0f}%'


def table(cells):
    """cells: one list of cells a run, the same cells in the same order."""
    print('| hosts | keys | rounds/s per agent (down) | agent commands/s '
          '| Redis CPU, all | busiest master CPU | Redis CPU per key a round '
          '(async, 1 host) | memory per key | to Redis per host | admitted / ideal '
          '| busiest master: keys, CPU |')
    print('|---:|---:|---|---|---|---|---|---|---|---|---|')
    for cs in zip(*cells):
        c0 = cs[0]
        if any((c['hosts'], c['keys']) != (c0['hosts'], c0['keys']) for c in cs):
            sys.exit('fleet_compare.py: the runs are not over the same cells')

        def j(f, runs=cs):
            return ' · '.join(f(c) for c in runs)
        print(f'| {c0["hosts"]} | {fmt(c0["keys"])} | {j(rounds)} '
              f'| {j(lambda c: fmt(c["commands_s"]))} '
              f'| {j(lambda c: pct(c, "redis_cpu", ".0f"))} '
              f'| {j(busiest_cpu, cs[1:])} | {j(per_key_round)} '
              f'| {j(lambda c: fmt(c["memory_per_key"]) + " B")} '
              f'| {j(lambda c: fmt(c["in_host_s"] / 1e3) + " kB/s")} '
              f'| {j(lambda c: pct(c, "over_pct", "+.1f"))} '
              f'| {j(share, cs[1:])} |')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split('\n\n')[1].strip())
    runs = []
    for p in sys.argv[1:]:
        with open(p) as f:
            runs.append(json.load(f)['cells'])
    if any('masters' not in c for r in runs[1:] for m in r for c in r[m]):
        sys.exit('fleet_compare.py: the runs after the first must be clusters')
    for m in runs[0]:
        print(f'{"async" if m == "async" else "`sync = strict`"}:\n')
        table([r[m] for r in runs])
        print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
