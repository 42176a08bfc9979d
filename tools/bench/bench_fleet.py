#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_fleet.py - the numbers for a large fleet: 1 to 32 hosts, 1,000 to
100,000 active keys, one real redis-server, async and `sync = strict`.

A "host" is a segment of its own with its own rlshimd (--foreground, as
bench_redis.c starts it; sync_interval 50 ms, the default), all on this
machine, all syncing with one redis-server on a free loopback port. The
load is build/bench/bench_fleet (tools/bench/bench_fleet.c): in-process
decisions through the core on every host's segment, each for a key drawn
uniformly from K keys on a host drawn uniformly, paced at 2 x the limit of
every key (one rule of RATE/s, burst BURST, key = ip): K x 2 x RATE
decisions/s offered in all. Beside each decision it runs one exact GCRA per
key (same rate, burst and arrival times): what one limiter for the whole
fleet would admit, the ideal the accuracy is against.

Per cell (hosts x keys x async/strict): FLUSHALL, the agents started, a
warm-up, then the window, Redis's counters read at both ends under load:
  commands/s   what the agents send at top level, from commandstats: every
               EVALSHA (a script cannot call one: the sync scripts and the
               strict asks) and, each round, a GET (the epoch), a
               ZREMRANGEBYSCORE and a ZRANGEBYSCORE (the ban set), which
               the scripts run too, so counted as 3 x GET; the strict asks
               (the strict script's HGETs) apart too. Cross-checked against
               the slow log, which names every command's client (a cell of
               its own, before the others: the slow log costs Redis memory
               and CPU);
  memory       used_memory less the clients' buffers (mem_clients_normal),
               at the window's end less before the agents started, per
               key Redis holds a state for (HLEN of the rule's hash);
  network      total_net_input_bytes / total_net_output_bytes over the
               window, per host (to Redis / from Redis);
  CPU          Redis's (used_cpu_*), the agents' and the load's (/proc), in
               % of one core: the machine has os.cpu_count() cores for all.
And a baseline in the same run: redis-benchmark's SET and GET, unpipelined
(50 connections) and pipelined 16 deep: what this Redis does per core.

--store cluster[:M] (M = 3): the same cells over a real Redis Cluster of M
masters, no replicas (tests/integration/test_cluster.py's Cluster: redis-cli
--cluster create on free loopback ports; for M = 1 or 2, which it refuses,
the slots split by hand: cluster:1 is the cluster mode's cost alone, its 16
shards on one master), the agents' url redis-cluster://..., every master's
counters read at both ends and summed: the figures above are the cluster's;
per master too, its Redis CPU, the keys its shards hold (HLEN of each
rlshim:{fleet:s} on it) and its EVALSHAs, with the busiest master's share of
each (1/M: even). The baseline is redis-benchmark --cluster (on one master,
which it refuses, as on one Redis).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, '..', '..')
AGENT = DRIVER = None   # main(): --build
RATE, BURST = 1, 2          # the rule: per key, /s (--burst)
OVER = 2.0                  # offered per key: OVER x RATE (--over)


def capacity(keys):
    """Segment slots for `keys` (and the keys the others' pulls bring)."""
    c = 65536
    while c < 2 * keys:
        c *= 2
    return c


def config(shm, url, keys, strict):
    s = 'sync = strict\n' if strict else ''
    return (f'[global]\nshm = {shm}\ncapacity = {capacity(keys)}\n'
            f'[redis]\nurl = {url}\n'
            f'[limit:fleet]\nmatch = *\nrate = {RATE}/s\nburst = {BURST}\n'
            f'key = ip\n{s}')


def info(r):
    """INFO stats, cpu, memory and commandstats as {name: str}, and the
    calls per command."""
    out = subprocess.run(['redis-cli', '-p', str(r.port), 'INFO', 'everything'],
                         capture_output=True, text=True, timeout=300).stdout
    f = dict(re.findall(r'^(\w+):(.*?)\r?$', out, re.M))
    calls = {m[0]: int(m[1]) for m in re.findall(r'^cmdstat_([\w|]+):calls=(\d+)',
                                                  out, re.M)}
    return f, calls


def top_level(c0, c1):
    """The agents' top-level commands between two commandstats (see the
    header) and, of them, the strict asks."""
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in set(c0) | set(c1)}
    return d.get('evalsha', 0) + 3 * d.get('get', 0), d.get('hget', 0)


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            v = f.read().rsplit(')', 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf('SC_CLK_TCK')
    except OSError:
        return 0.0


def delta(a, b, name, kind=int):
    return kind(b[name]) - kind(a[name])


def data_memory(f):
    """used_memory less the clients' buffers (each agent's connection
    holds some: with 32 agents, more than 1,000 keys' state)."""
    return int(f['used_memory']) - int(f.get('mem_clients_normal', 0))


def cell_numbers(hosts, keys, f0, f1, c0, c1, mem0, res, cpu, stored):
    """What one cell measured, from the counters at both ends of the
    window: a dict of plain numbers (tested by test_bench_fleet.py).
    mem0: data_memory() before the agents started; stored: the keys
    Redis holds a state for at the window's end."""
    s = res['seconds']
    sent, asks = top_level(c0, c1)
    red = (delta(f0, f1, 'used_cpu_sys', float) +
           delta(f0, f1, 'used_cpu_user', float)) / s
    mem = data_memory(f1) - mem0
    return {
        'hosts': hosts, 'keys': keys, 'seconds': s,
        'offered_s': round(OVER * RATE * keys),
        'achieved_s': res['decisions'] / s,
        'admitted': res['admitted'], 'ideal': res['ideal'],
        'over_pct': (100.0 * (res['admitted'] - res['ideal']) / res['ideal']
                     if res['ideal'] else 0.0),
        'fallbacks': res['fallbacks'],
        'wrong': res.get('wrong', 0),
        'wrong_repaid': res.get('wrong_repaid', 0),
        'wrong_edge': res.get('wrong_edge', 0),
        'commands_s': sent / s, 'asks_s': asks / s,
        'rounds_s': res['syncs'] / s / hosts,
        'memory': mem, 'stored': stored,
        'memory_per_key': mem / stored if stored else 0.0,
        'in_host_s': delta(f0, f1, 'total_net_input_bytes') / s / hosts,
        'out_host_s': delta(f0, f1, 'total_net_output_bytes') / s / hosts,
        'redis_cpu': 100 * red,
        'agents_cpu': 100 * cpu[0] / s, 'load_cpu': 100 * cpu[1] / s,
    }


def summed(fs, cs):
    """A cluster's INFO fields and commandstats, every master's summed:
    what cell_numbers() reads, as from one Redis (one: as it is)."""
    if len(fs) == 1:
        return fs[0], cs[0]
    f = {k: sum(kind(x.get(k, 0)) for x in fs) for k, kind in (
        ('used_cpu_sys', float), ('used_cpu_user', float),
        ('total_net_input_bytes', int), ('total_net_output_bytes', int),
        ('used_memory', int), ('mem_clients_normal', int))}
    c = {}
    for x in cs:
        for k, v in x.items():
            c[k] = c.get(k, 0) + v
    return f, c


def masters(f0s, f1s, c0s, c1s, mem0s, stored, seconds):
    """Per master of a cluster: its Redis CPU (% of a core), the keys its
    shards hold, its memory (as cell_numbers()) and its EVALSHAs/s; and the
    busiest master's share of the CPU, the keys and the EVALSHAs (1/M:
    even)."""
    per = [{'redis_cpu': 100 * (delta(f0, f1, 'used_cpu_sys', float) +
                                delta(f0, f1, 'used_cpu_user', float)) / seconds,
            'stored': n, 'memory': data_memory(f1) - m0,
            'evalsha_s': (c1.get('evalsha', 0) - c0.get('evalsha', 0)) / seconds}
           for f0, f1, c0, c1, m0, n in zip(f0s, f1s, c0s, c1s, mem0s, stored)]

    def share(m):
        tot = sum(x[m] for x in per)
        return max(x[m] for x in per) / tot if tot > 0 else 0.0
    return per, {m: share(m) for m in ('redis_cpu', 'stored', 'evalsha_s')}


class Store:
    """What the agents sync with: one redis-server (cluster=0) or a Redis
    Cluster of that many masters (test_cluster.py's), .nodes each a
    test_redis.Redis, .url for the agents."""

    def __init__(self, cluster=0):
        # here, not at the top: test_bench_fleet.py imports this file
        sys.path.insert(0, os.path.join(REPO, 'tests', 'integration'))
        import test_redis as T
        self.tmp = T.TMP
        self.cluster = cluster
        if cluster:
            import test_cluster as C
            self.c = C.Cluster.__new__(C.Cluster)
            self.c.password, self.c.nodes = None, []
            try:
                if cluster >= 3:
                    self.c.__init__(n=cluster)
                else:
                    # redis-cli --cluster create wants 3: the slots by hand
                    self.c.nodes = [C.Node() for _ in range(cluster)]
                    for i, r in enumerate(self.c.nodes):
                        r.cli('CLUSTER', 'ADDSLOTSRANGE', 16384 * i // cluster,
                              16384 * (i + 1) // cluster - 1)
                        if i:
                            r.cli('CLUSTER', 'MEET', '127.0.0.1',
                                  self.c.nodes[0].port)
                    self.c.ok()
            except BaseException:
                # the nodes started before the failure
                for r in self.c.nodes:
                    r.stop()
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise
            # Redis's default, not the test's 2 s (a fast failover): under
            # this load a master busy in long scripts misses 2 s of pings
            # and the others mark it failed, the whole cluster down
            for r in self.c.nodes:
                r.cli('CONFIG', 'SET', 'cluster-node-timeout', '15000')
            self.nodes, self.url = self.c.nodes, self.c.url
        else:
            r = T.Redis()
            self.nodes, self.url = [r], f'redis://127.0.0.1:{r.port}/0'

    def stop(self):
        for r in self.nodes:
            r.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stored(self):
        """Per node, the keys Redis holds a state for: HLEN of the rule's
        hash, in a cluster of each of its shards on that node."""
        if not self.cluster:
            return [resp(self.nodes[0].port, 'HLEN', 'rlshim:{fleet}')]
        return [sum(resp(r.port, 'HLEN', k) for k in
                    r.cli('--scan', '--pattern', 'rlshim:{fleet:*}').split())
                for r in self.nodes]

    def ok(self):
        """A cluster's state ok on every master again (a minute at most)."""
        from harness import wait_for
        if self.cluster and not wait_for(lambda: not self.down(), 60, 0.5):
            raise RuntimeError('the cluster did not come back (CLUSTER INFO)')

    def down(self):
        """The masters whose CLUSTER INFO says the cluster is not ok (none
        for one Redis)."""
        return sum(1 for r in self.nodes if self.cluster and
                   'cluster_state:ok' not in r.cli('CLUSTER', 'INFO'))


def resp(port, *args):
    """One command over a socket of its own, the reply parsed (RESP2)."""
    with socket.create_connection(('127.0.0.1', port), timeout=60) as sk:
        sk.sendall(b''.join([f'*{len(args)}\r\n'.encode()] +
                            [f'${len(a)}\r\n{a}\r\n'.encode() for a in args]))
        f = sk.makefile('rb')

        def one():
            line = f.readline()[:-2]
            t, v = line[:1], line[1:]
            if t == b'*':
                return [one() for _ in range(int(v))] if int(v) >= 0 else None
            if t == b'$':
                if int(v) < 0:
                    return None
                b = f.read(int(v) + 2)[:-2]
                return b.decode(errors='replace')
            if t == b':':
                return int(v)
            if t == b'-':
                raise RuntimeError(v.decode())
            return v.decode()
        return one()


def slowlog_count(r):
    """Top-level commands in the slow log: those of clients with an address
    (a script's have none, "?:0"), but this script's own (SLOWLOG, INFO,
    CONFIG, HLEN, SCAN: the agents send none of them), {name: count}."""
    names = {}
    for e in resp(r.port, 'SLOWLOG', 'GET', '-1'):
        name = e[3][0].lower()
        if len(e) > 4 and not e[4].startswith('?') and name not in (
                'slowlog', 'info', 'config', 'hlen', 'scan'):
            names[name] = names.get(name, 0) + 1
    return names


def slowest(r):
    """The slow log's longest command since the last call (Redis logs those
    over 10 ms by default): (µs, command, its first key), then reset."""
    log = resp(r.port, 'SLOWLOG', 'GET', '128')
    resp(r.port, 'SLOWLOG', 'RESET')
    if not log:
        return None
    e = max(log, key=lambda e: e[2])
    argv = e[3]
    return (e[2], argv[0].lower(),
            argv[3] if argv[0].lower() == 'evalsha' and len(argv) > 3 else
            argv[1] if len(argv) > 1 else '', len(log))


def run_cell(st, tmp, hosts, keys, strict, seconds, warmup, check=False):
    prefix = f'rlshim-fleet-{os.getpid()}-{hosts}-{keys}-{int(strict)}'
    nodes = st.nodes
    st.ok()
    for r in nodes:
        r.cli('FLUSHALL')
        r.cli('CONFIG', 'SET', 'save', '')
    time.sleep(0.2)
    mem0s = [data_memory(info(r)[0]) for r in nodes]
    agents = []
    drv = None
    try:
        for i in range(hosts):
            conf = os.path.join(tmp, f'h{i}.conf')
            with open(conf, 'w') as f:
                f.write(config(f'{prefix}-{i}', st.url, keys, strict))
            log = open(os.environ.get('RL_FLEET_LOGDIR', tmp) + f'/h{i}.log', 'w')
            agents.append(subprocess.Popen([AGENT, '-c', conf, '--foreground'],
                                           stdout=log, stderr=subprocess.STDOUT))
            log.close()
        args = [DRIVER, '-n', str(hosts), '-k', str(keys), '-r',
                str(round(OVER * RATE * keys)), '-t', str(seconds), '-w', str(warmup),
                '-R', str(RATE), '-b', str(BURST)] + (['-s'] if strict else [])
        drv = subprocess.Popen(args + [prefix], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        if drv.stdout.readline().strip() != 'MEASURE':
            raise RuntimeError(f'bench_fleet did not start ({hosts} hosts, '
                               f'{keys} keys): see {tmp}/h*.log')
        if check:
            for r in nodes:
                r.cli('CONFIG', 'SET', 'slowlog-max-len', '1000000')
                r.cli('CONFIG', 'SET', 'slowlog-log-slower-than', '0')
                r.cli('SLOWLOG', 'RESET')
        f0s, c0s = zip(*(info(r) for r in nodes))
        cpu0 = sum(cpu_s(a.pid) for a in agents), cpu_s(drv.pid)
        if drv.stdout.readline().strip() != 'END':
            raise RuntimeError('bench_fleet stopped')
        t = time.monotonic()
        f1s, c1s = zip(*(info(r) for r in nodes))
        info_s = time.monotonic() - t
        cpu1 = sum(cpu_s(a.pid) for a in agents), cpu_s(drv.pid)
        clusterdown = st.down()
        if check:
            for r in nodes:
                r.cli('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')
        if clusterdown:
            st.ok()     # HLEN says CLUSTERDOWN until then
        stored = st.stored()
        drv.stdin.write('\n')
        drv.stdin.flush()
        line = drv.stdout.readline()
        if not line.startswith('RESULT '):
            raise RuntimeError('bench_fleet gave no result')
        res = json.loads(line[len('RESULT '):])
        drv.wait(timeout=30)
        (f0, c0), (f1, c1) = summed(f0s, c0s), summed(f1s, c1s)
        out = cell_numbers(hosts, keys, f0, f1, c0, c1, sum(mem0s), res,
                           (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]), sum(stored))
        out['threads'] = res['threads']
        out['down'] = res['down']
        out['info_s'] = info_s
        out['dbsize'] = sum(int(r.cli('DBSIZE')) for r in nodes)
        if st.cluster:
            out['clusterdown'] = clusterdown
            out['masters'], out['busiest'] = masters(
                f0s, f1s, c0s, c1s, mem0s, stored, res['seconds'])
        if check:
            # the slow log is on a little longer than the window: from
            # before the INFO that opens it to after the one that closes it
            # so compare per round (GET: one a round) as well as in all
            log = {}
            for r in nodes:
                for k, v in slowlog_count(r).items():
                    log[k] = log.get(k, 0) + v
            out['check'] = (log, top_level(c0, c1)[0],
                            c1.get('evalsha', 0) - c0.get('evalsha', 0),
                            c1.get('get', 0) - c0.get('get', 0))
            for r in nodes:
                r.cli('CONFIG', 'SET', 'slowlog-max-len', '128')
                r.cli('SLOWLOG', 'RESET')
        else:
            slow = [x for x in map(slowest, nodes) if x]
            out['slowest'] = max(slow) if slow else None
        return out
    finally:
        if drv and drv.poll() is None:
            drv.kill()
            drv.wait()
        for a in agents:
            a.send_signal(signal.SIGTERM)
        for a in agents:
            try:
                a.wait(timeout=10)
            except subprocess.TimeoutExpired:
                a.kill()
                a.wait()
        for i in range(hosts):
            with_name = f'/dev/shm/{prefix}-{i}'
            if os.path.exists(with_name):
                os.unlink(with_name)


def baseline(st):
    """redis-benchmark SET and GET: requests/s, unpipelined and -P 16
    (a cluster: --cluster, every master; it refuses one master, which has
    every slot: as one Redis)."""
    out = {}
    for p in (1, 16):
        res = subprocess.run(['redis-benchmark', '-p', str(st.nodes[0].port), '-q',
                              '-n', str(100000 * p), '-c', '50', '-P', str(p),
                              '-t', 'set,get'] + (['--cluster'] if st.cluster > 1 else []),
                             capture_output=True, text=True, timeout=120).stdout
        for cmd, v in re.findall(r'(SET|GET): ([\d.]+) requests per second', res):
            out[(cmd, p)] = float(v)
    for r in st.nodes:
        r.cli('FLUSHALL')
    return out


def fmt(n):
    return f'{n:,.0f}'


def size(b):
    return f'{b / 1e6:,.1f} MB' if b >= 1e6 else f'{b / 1e3:,.0f} kB'


def table(rows, cluster=0):
    """One row a cell; a cluster's (cluster: its masters) with two more
    columns: Redis CPU per master, and the busiest master's share of the
    keys, the Redis CPU and the EVALSHAs."""
    more = (' | Redis CPU per master | busiest master: keys, CPU, EVALSHA'
            if cluster else '')
    print('| hosts | active keys | offered/s | achieved/s | agent commands/s '
          '| strict asks/s | rounds/s per agent (store down at the end) '
          '| keys in Redis | Redis memory (per key in it) '
          '| to Redis per host | from Redis per host | admitted / ideal '
          f'| CPU: Redis, agents, load{more} |')
    print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---'
          + ('|---|---' if cluster else '') + '|')
    for c in rows:
        more = ''
        if cluster:
            b = c['busiest']
            more = (' | ' + ', '.join(f'{m["redis_cpu"]:.0f}%' for m in c['masters'])
                    + f' | {100 * b["stored"]:.0f}%, {100 * b["redis_cpu"]:.0f}%, '
                    f'{100 * b["evalsha_s"]:.0f}%')
        ach = fmt(c['achieved_s'])
        if c['achieved_s'] < 0.98 * c['offered_s']:
            ach += f' (**{100 * c["achieved_s"] / c["offered_s"]:.0f}%**)'
        fb = f', {fmt(c["fallbacks"])} not in Redis' if c['fallbacks'] else ''
        fb += (f', {fmt(c.get("wrong", 0))} refused the exact limiter admits'
               f' ({fmt(c.get("wrong_repaid", 0))} repaying an overshoot, '
               f'{fmt(c.get("wrong_edge", 0))} within 1 ms of the edge)')
        down = f' ({c["down"]} down)' if c.get('down') else ''
        if c.get('clusterdown'):
            down += f' (cluster not ok on {c["clusterdown"]} of {cluster})'
        print(f'| {c["hosts"]} | {fmt(c["keys"])} | {fmt(c["offered_s"])} | {ach} '
              f'| {fmt(c["commands_s"])} | {fmt(c["asks_s"])} '
              f'| {c["rounds_s"]:.1f}{down} | {fmt(c["stored"])} '
              f'| {size(c["memory"])} ({c["memory_per_key"]:,.0f} B) '
              f'| {size(c["in_host_s"])}/s | {size(c["out_host_s"])}/s '
              f'| {c["over_pct"]:+.1f}% ({fmt(c["admitted"])} / '
              f'{fmt(c["ideal"])}{fb}) '
              f'| {c["redis_cpu"]:.0f}%, {c["agents_cpu"]:.0f}%, '
              f'{c["load_cpu"]:.0f}%{more} |', flush=True)


def kept_up(c):
    """Did the cell run as designed: every agent at its interval (within
    10%), none with its store down, the load offered in full?"""
    return (not c.get('down') and not c.get('clusterdown')
            and c['rounds_s'] >= 0.9 * 20
            and c['achieved_s'] >= 0.98 * c['offered_s'])


def growth(rows):
    """Least-squares slopes of commands/s, memory and bytes/s per host, in
    hosts (at each key count) and in keys (at each host count), over the
    cells that kept_up()."""
    rows = [c for c in rows if kept_up(c)]
    def slope(pts):
        n = len(pts)
        mx = sum(x for x, _ in pts) / n
        my = sum(y for _, y in pts) / n
        den = sum((x - mx) ** 2 for x, _ in pts)
        return sum((x - mx) * (y - my) for x, y in pts) / den if den else 0.0
    out = {'per_host': {}, 'per_key': {}}
    for k in sorted({c['keys'] for c in rows}):
        cs = [c for c in rows if c['keys'] == k]
        if len(cs) > 1:
            out['per_host'][k] = {m: slope([(c['hosts'], c[m]) for c in cs])
                                  for m in ('commands_s', 'memory', 'in_host_s',
                                            'out_host_s')}
    for h in sorted({c['hosts'] for c in rows}):
        cs = [c for c in rows if c['hosts'] == h]
        if len(cs) > 1:
            out['per_key'][h] = {m: slope([(c['keys'], c[m]) for c in cs])
                                 for m in ('commands_s', 'memory', 'in_host_s',
                                           'out_host_s')}
    return out


def print_growth(g):
    if not g['per_host'] and not g['per_key']:
        print('(none: fewer than two such cells in any row or column)')
        return
    print('| at | commands/s | Redis memory | to Redis per host | '
          'from Redis per host |')
    print('|---|---:|---:|---:|---:|')
    for k, s in g['per_host'].items():
        print(f'| per host added, {fmt(k)} keys | {s["commands_s"]:+,.1f} '
              f'| {s["memory"]:+,.0f} B | {s["in_host_s"]:+,.0f} B/s '
              f'| {s["out_host_s"]:+,.0f} B/s |')
    for h, s in g['per_key'].items():
        print(f'| per 1,000 keys added, {h} hosts | {1000 * s["commands_s"]:+,.1f} '
              f'| {1000 * s["memory"]:+,.0f} B | {1000 * s["in_host_s"]:+,.0f} B/s '
              f'| {1000 * s["out_host_s"]:+,.0f} B/s |')


def main():
    global AGENT, DRIVER, OVER, BURST
    ap = argparse.ArgumentParser()
    ap.add_argument('--hosts', default='1,4,16,32')
    ap.add_argument('--keys', default='1000,10000,100000')
    ap.add_argument('--seconds', type=int, default=6)
    ap.add_argument('--big-seconds', type=int, default=4,
                    help='the window of the cells with 100,000 keys or '
                         '16 hosts and more')
    ap.add_argument('--warmup', type=int, default=2)
    ap.add_argument('--modes', default='async,strict')
    ap.add_argument('--json', help='write every cell here too')
    ap.add_argument('--over', type=float, default=OVER,
                    help='each key offered this x its rate (2: every key over '
                         'its limit, in debt every round; 0.5: under it)')
    ap.add_argument('--burst', type=int, default=BURST)
    ap.add_argument('--build', default=os.path.join(REPO, 'build'),
                    help='where rlshimd and bench/bench_fleet are')
    ap.add_argument('--store', default='single',
                    help='single (one redis-server) or cluster[:M] (a Redis '
                         'Cluster of M masters, 3 by default; 1: one master '
                         'with every slot, the cost of the 16 shards alone)')
    a = ap.parse_args()
    m = re.fullmatch(r'single|cluster(?::(\d+))?', a.store)
    if not m or (m.group(1) and not 1 <= int(m.group(1)) <= 16):
        ap.error(f'--store {a.store}: single, or cluster[:M] with M 1 to 16')
    nmasters = int(m.group(1) or 3) if a.store != 'single' else 0
    OVER, BURST = a.over, a.burst
    AGENT = os.path.join(a.build, 'rlshimd')
    DRIVER = os.path.join(a.build, 'bench', 'bench_fleet')
    hosts = [int(x) for x in a.hosts.split(',')]
    keys = [int(x) for x in a.keys.split(',')]
    modes = a.modes.split(',')
    for p in (AGENT, DRIVER):
        if not os.access(p, os.X_OK):
            sys.exit(f'bench_fleet.py: {p}: build it first (make)')
    AGENT, DRIVER = os.path.abspath(AGENT), os.path.abspath(DRIVER)

    # SIGTERM as SIGINT: the cells' agents are stopped on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix='bench-fleet-')
    r = Store(nmasters)
    t_start = time.monotonic()
    cells = {m: [] for m in modes}
    try:
        ver = re.search(r'redis_version:(\S+)',
                        r.nodes[0].cli('INFO', 'server')).group(1)
        base = baseline(r)
        # commandstats against the slow log, in cells of their own (the
        # slow log costs Redis memory and CPU)
        checks = []
        for m in modes:
            c = run_cell(r, tmp, 2, 1000, m == 'strict', 2, 1, check=True)
            log, stats, ev, get = c['check']
            checks.append(f'{m}: {sum(log.values()):,} in the slow log '
                          f'({log.get("evalsha", 0) / max(1, log.get("get", 0)):.1f}'
                          f' EVALSHA a round), {stats:,} from commandstats '
                          f'({ev / max(1, get):.1f} a round)')
            print(f'bench_fleet.py: check, {m}, 2 hosts, 1000 keys, 2 s: '
                  f'{log}, {stats} from commandstats', file=sys.stderr)
        for m in modes:
            for h in hosts:
                for k in keys:
                    secs = a.big_seconds if k >= 100000 or h >= 16 else a.seconds
                    print(f'bench_fleet.py: {m}, {h} hosts, {k} keys, {secs} s',
                          file=sys.stderr, flush=True)
                    c = run_cell(r, tmp, h, k, m == 'strict', secs, a.warmup)
                    print(f'bench_fleet.py: {json.dumps(c)}', file=sys.stderr,
                          flush=True)
                    cells[m].append(c)
    finally:
        r.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - t_start

    print('## A large fleet: hosts x active keys (tools/bench/bench_fleet.py)\n')
    print(f'Command: `python3 tools/bench/bench_fleet.py --seconds {a.seconds} '
          f'--big-seconds {a.big_seconds} --warmup {a.warmup} --over {OVER:g}'
          f'{" --modes " + a.modes if a.modes != "async,strict" else ""}'
          f'{" --burst %d" % BURST if BURST != 2 else ""}'
          f'{" --hosts " + a.hosts if a.hosts != "1,4,16,32" else ""}'
          f'{" --keys " + a.keys if a.keys != "1000,10000,100000" else ""}'
          f'{" --store " + a.store if nmasters else ""}`, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{total:.0f} s in all; '
          + (f'a Redis Cluster of {nmasters} masters, no replicas, each a '
             if nmasters else '') +
          f'redis-server {ver} on loopback, '
          f'{os.cpu_count()} CPUs shared by Redis, every agent and the load. '
          f'One rule, {RATE}/s burst {BURST} per key, each key offered '
          f'{OVER * RATE:g}/s spread uniformly over the hosts; windows of '
          f'{a.seconds} s ({a.big_seconds} s at 100,000 keys or 16 hosts and '
          f'more) after {a.warmup} s of warm-up.\n')
    print(f'Baseline, redis-benchmark{" --cluster" if nmasters > 1 else ""} '
          'in the same run (50 connections): '
          + ', '.join(f'{c} {fmt(v)}/s{" pipelined 16" if p > 1 else ""}'
                      for (c, p), v in sorted(base.items(), key=lambda x: x[0][1]))
          + '.\n')
    print('Agent commands counted from commandstats, checked against the '
          'slow log in a cell of their own (2 hosts, 1,000 keys, 2 s; the slow '
          'log is on a little longer than the window): ' + '; '.join(checks)
          + '.\n')
    for m in modes:
        print(f'### {"async" if m == "async" else "`sync = strict`"}\n')
        table(cells[m], nmasters)
        print()
        print('Growth (least squares over the cells above that ran as '
              'designed: every agent at its interval, none with its store '
              'down, the load offered in full):\n')
        print_growth(growth(cells[m]))
        print()
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'baseline': {f'{c} -P {p}': v for (c, p), v in base.items()},
                       'cells': cells}, f, indent=1)


if __name__ == '__main__':
    main()
