#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_bench_fleet.py - bench_fleet.py's arithmetic on made-up counters:
what it counts as the agents' commands, per second, per host and per key,
and the growth rates. No Redis, no agents.

    python3 tools/bench/test_bench_fleet.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fleet as B  # noqa: E402


def check(cond, what):
    if not cond:
        print(f'FAIL: {what}')
        sys.exit(1)


def close(a, b):
    return abs(a - b) < 1e-9 * max(1.0, abs(b))


def test_top_level():
    # a round: EVALSHAs, GET, ZREMRANGEBYSCORE, ZRANGEBYSCORE; the scripts
    # also run the last two (and HMGET...), never EVALSHA or GET
    c0 = {'evalsha': 10, 'get': 1, 'zremrangebyscore': 7, 'hget': 3}
    c1 = {'evalsha': 110, 'get': 21, 'zremrangebyscore': 937,
          'zrangebyscore': 520, 'hget': 53, 'hmget': 900, 'info': 2}
    sent, asks = B.top_level(c0, c1)
    check(sent == 100 + 3 * 20, f'top level {sent}')
    check(asks == 50, f'asks {asks}')


def test_cell():
    f0 = {'used_cpu_sys': '1.0', 'used_cpu_user': '2.0',
          'total_net_input_bytes': '1000', 'total_net_output_bytes': '500'}
    f1 = {'used_cpu_sys': '1.5', 'used_cpu_user': '3.0',
          'total_net_input_bytes': '81000', 'total_net_output_bytes': '40500',
          'used_memory': '2100000', 'mem_clients_normal': '100000'}
    c0, c1 = {'evalsha': 0}, {'evalsha': 400}
    res = {'seconds': 2.0, 'decisions': 3000, 'admitted': 1100, 'ideal': 1000,
           'fallbacks': 0, 'syncs': 160}
    c = B.cell_numbers(4, 1000, f0, f1, c0, c1, 1000000, res, (0.2, 0.1), 500)
    check(c['offered_s'] == B.OVER * B.RATE * 1000, 'offered')
    check(close(c['achieved_s'], 1500), f'achieved {c["achieved_s"]}')
    check(close(c['over_pct'], 10.0), f'over {c["over_pct"]}')
    check(close(c['commands_s'], 200), f'commands {c["commands_s"]}')
    check(close(c['rounds_s'], 20), f'rounds per agent {c["rounds_s"]}')
    # less the clients' buffers, per key held in Redis
    check(c['memory'] == 1000000 and close(c['memory_per_key'], 2000), 'memory')
    # bytes over the window, per second, per host
    check(close(c['in_host_s'], 10000), f'in {c["in_host_s"]}')
    check(close(c['out_host_s'], 5000), f'out {c["out_host_s"]}')
    check(close(c['redis_cpu'], 75), f'redis cpu {c["redis_cpu"]}')
    check(close(c['agents_cpu'], 10) and close(c['load_cpu'], 5), 'cpu')


def test_growth():
    # commands/s = 10 x hosts + 0.5 x keys: slopes 10 per host, 0.5 per key
    rows = [{'hosts': h, 'keys': k, 'commands_s': 10 * h + 0.5 * k,
             'memory': 100 * k + 3 * h * k, 'in_host_s': 7.0, 'out_host_s': h,
             'rounds_s': 20.0, 'achieved_s': 100.0, 'offered_s': 100}
            for h in (1, 4, 16) for k in (1000, 10000)]
    # cells that did not keep up are left out of the slopes
    rows.append(dict(rows[0], hosts=32, commands_s=0.0, rounds_s=2.0))
    rows.append(dict(rows[0], hosts=64, commands_s=0.0, down=3))
    g = B.growth(rows)
    check(close(g['per_host'][1000]['commands_s'], 10), 'commands per host')
    check(close(g['per_key'][4]['commands_s'], 0.5), 'commands per key')
    check(close(g['per_host'][10000]['memory'], 30000), 'memory per host')
    check(close(g['per_key'][16]['memory'], 148), 'memory per key')
    check(close(g['per_key'][1]['in_host_s'], 0), 'flat')
    check(close(g['per_host'][1000]['out_host_s'], 1), 'out per host')


def main():
    test_top_level()
    test_cell()
    test_growth()
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
