#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_bench_fleet.py - bench_fleet.py's arithmetic on made-up counters:
what it counts as the agents' commands, per second, per host and per key,
a cluster's masters summed and apart, and the growth rates; then one tiny
cell over a real 3-master Redis Cluster (--store cluster: redis-server,
redis-cli, and rlshimd and bench/bench_fleet built in BUILD).

    python3 tools/bench/test_bench_fleet.py [--build BUILD]
"""
import json
import os
import subprocess
import sys
import tempfile

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


def test_summed():
    # one Redis: its own counters, as they are
    f, c = {'used_memory': '7'}, {'get': 1}
    check(B.summed([f], [c]) == (f, c), 'one node')
    # three masters: every field cell_numbers() reads, and every command
    fs = [{'used_cpu_sys': '1.5', 'used_cpu_user': '0.5', 'used_memory': '1000',
           'mem_clients_normal': '10', 'total_net_input_bytes': '100',
           'total_net_output_bytes': '7'} for _ in range(3)]
    fs[2]['used_cpu_user'] = '2.5'
    f, c = B.summed(fs, [{'evalsha': 5, 'get': 1}, {'evalsha': 7}, {'hget': 2}])
    check(close(f['used_cpu_sys'] + f['used_cpu_user'], 4.5 + 3.5), f'cpu {f}')
    check(B.data_memory(f) == 3000 - 30, f'memory {f}')
    check(f['total_net_input_bytes'] == 300 and f['total_net_output_bytes'] == 21,
          f'net {f}')
    check(c == {'evalsha': 12, 'get': 1, 'hget': 2}, f'calls {c}')


def test_masters():
    # two masters over 2 s: 0.6 s and 0.2 s of CPU, 30 and 10 keys
    f0 = [{'used_cpu_sys': '1.0', 'used_cpu_user': '1.0'}] * 2
    f1 = [{'used_cpu_sys': '1.4', 'used_cpu_user': '1.2', 'used_memory': '5000'},
          {'used_cpu_sys': '1.1', 'used_cpu_user': '1.1', 'used_memory': '3000',
           'mem_clients_normal': '1000'}]
    c0 = [{'evalsha': 10}, {}]
    c1 = [{'evalsha': 70}, {'evalsha': 20}]
    per, busiest = B.masters(f0, f1, c0, c1, [1000, 1000], [30, 10], 2.0)
    check(close(per[0]['redis_cpu'], 30) and close(per[1]['redis_cpu'], 10),
          f'cpu per master {per}')
    check(per[0]['memory'] == 4000 and per[1]['memory'] == 1000, f'memory {per}')
    check(close(per[0]['evalsha_s'], 30) and close(per[1]['evalsha_s'], 10),
          f'evalsha per master {per}')
    check(all(close(busiest[m], 0.75) for m in ('redis_cpu', 'stored', 'evalsha_s')),
          f'busiest {busiest}')
    # nothing at all: no share
    per, busiest = B.masters(f1, f1, c0, c0, [0, 0], [0, 0], 1.0)
    check(busiest['stored'] == 0.0, f'empty {busiest}')


def test_cluster_cell(build):
    """bench_fleet.py --store cluster: a real 3-master cluster, one host,
    50 keys, async, 1 s: the header names the cluster, every key is in
    it (the masters' sum), the agent kept its store, and the table has the
    per-master columns."""
    with tempfile.TemporaryDirectory(prefix='test-bench-fleet-') as tmp:
        js = os.path.join(tmp, 'cells.json')
        out = subprocess.run(
            [sys.executable, os.path.join(os.path.dirname(B.__file__), 'bench_fleet.py'),
             '--store', 'cluster', '--hosts', '1', '--keys', '50', '--modes', 'async',
             '--seconds', '1', '--big-seconds', '1', '--warmup', '1', '--build', build,
             '--json', js], capture_output=True, text=True, timeout=300)
        check(out.returncode == 0, f'--store cluster: exit {out.returncode}: '
              f'{out.stderr[-2000:]}')
        check('a Redis Cluster of 3 masters' in out.stdout and
              '--store cluster`' in out.stdout, f'header: {out.stdout[:600]}')
        check('| Redis CPU per master | busiest master: keys, CPU, EVALSHA |'
              in out.stdout, 'the per-master columns')
        with open(js) as f:
            cell = json.load(f)['cells']['async'][0]
        m = cell['masters']
        check(len(m) == 3 and sum(x['stored'] for x in m) == cell['stored'] == 50,
              f'keys per master {m}, in all {cell["stored"]}')
        # 16 shards over 3 masters: more than one holds keys
        check(sum(1 for x in m if x['stored']) > 1, f'one master only: {m}')
        check(1 / 3 <= cell['busiest']['stored'] < 1, f'busiest {cell["busiest"]}')
        check(not cell['down'] and not cell['clusterdown'] and
              cell['commands_s'] > 0, f'cell {cell}')


def test_growth():
    # commands/s = 10 x hosts + 0.5 x keys: slopes 10 per host, 0.5 per key
    rows = [{'hosts': h, 'keys': k, 'commands_s': 10 * h + 0.5 * k,
             'memory': 100 * k + 3 * h * k, 'in_host_s': 7.0, 'out_host_s': h,
             'rounds_s': 20.0, 'achieved_s': 100.0, 'offered_s': 100}
            for h in (1, 4, 16) for k in (1000, 10000)]
    # cells that did not keep up are left out of the slopes
    rows.append(dict(rows[0], hosts=32, commands_s=0.0, rounds_s=2.0))
    rows.append(dict(rows[0], hosts=64, commands_s=0.0, down=3))
    # and those where a master said the cluster was not ok
    rows.append(dict(rows[0], hosts=128, commands_s=0.0, clusterdown=1))
    g = B.growth(rows)
    check(close(g['per_host'][1000]['commands_s'], 10), 'commands per host')
    check(close(g['per_key'][4]['commands_s'], 0.5), 'commands per key')
    check(close(g['per_host'][10000]['memory'], 30000), 'memory per host')
    check(close(g['per_key'][16]['memory'], 148), 'memory per key')
    check(close(g['per_key'][1]['in_host_s'], 0), 'flat')
    check(close(g['per_host'][1000]['out_host_s'], 1), 'out per host')


def main():
    build = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'build')
    if sys.argv[1:2] == ['--build'] and len(sys.argv) == 3:
        build = sys.argv[2]
    elif sys.argv[1:]:
        print('usage: test_bench_fleet.py [--build BUILD]')
        return 2
    test_top_level()
    test_cell()
    test_summed()
    test_masters()
    test_growth()
    test_cluster_cell(build)
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
