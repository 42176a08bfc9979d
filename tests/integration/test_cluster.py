#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_cluster.py - rlshimd through a real Redis Cluster (redis-cluster://).

Three masters, no replicas, made with `redis-cli --cluster create` on free
loopback ports; hosts as in test_redis.py (its helpers). Not in the
Makefile's list yet (docs/CLUSTER-DESIGN.md, Status).
"""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run, wait_for  # noqa: E402
import servers  # noqa: E402
import test_redis as tr  # noqa: E402


def crc16(data):
    """CRC16/XMODEM, as the cluster specification computes a slot."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = (crc << 1 ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xffff
    return crc


def key_slot(key):
    """A key's slot: of its hash tag if it has a non-empty one."""
    a = key.find('{')
    b = key.find('}', a + 1) if a >= 0 else -1
    if a >= 0 and b > a + 1:
        key = key[a + 1:b]
    return crc16(key.encode()) % 16384


def shard_tag(rule, s, n=16):
    """The hash tag of shard s of a rule, as the agent names it
    (rl_cluster_shard_tag): RULE:S, or RULE:S.K with K the smallest from 1
    whose slot lies in the shard's share of the slots, (S + CRC16(RULE))
    mod n."""
    share = (s + crc16(rule.encode()) % n) % n
    lo, hi = share * 16384 // n, (share + 1) * 16384 // n
    tag, k = f'{rule}:{s}', 1
    while not lo <= key_slot(tag) < hi:
        tag, k = f'{rule}:{s}.{k}', k + 1
    return tag


def rule_key(rule, s, suffix=''):
    """rlshim:{TAG}SUFFIX of shard s of a rule."""
    return f'rlshim:{{{shard_tag(rule, s)}}}{suffix}'


# 127.0.0.1's shard in the rules the tests use (rl_cluster_key_shard)
EVEN12 = rule_key('even', 12)
SMS12 = rule_key('sms', 12)
FAILS_SMS12 = f'rlshim:fails:{{{shard_tag("sms", 12)}}}'


def bus_free(port):
    """port + 10000 (the cluster bus) is free too, and a port at all."""
    if port + 10000 > 65535:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(('127.0.0.1', port + 10000))
        except OSError:
            return False
    return True


class Node(tr.Redis):
    """A cluster node: a test_redis.Redis on a port whose bus port is free."""

    def __init__(self, password=None, full_coverage=True):
        tr.N[0] += 1
        self.dir = os.path.join(tr.TMP, f'node{tr.N[0]}')
        os.makedirs(self.dir)
        self.port = next(p for p in iter(servers.free_port, None) if bus_free(p))
        self.sock = None
        self.extra = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
                      '--cluster-node-timeout', '2000']
        if not full_coverage:  # a master lost: the others still serve
            self.extra += ['--cluster-require-full-coverage', 'no']
        self.auth = []
        if password:
            self.extra += ['--requirepass', password, '--masterauth', password]
            self.auth = ['--no-auth-warning', '-a', password]
        self.start()


class Cluster:
    """n masters, slots spread by redis-cli, each a test_redis.Redis."""

    def __init__(self, n=3, replicas=0, password=None, full_coverage=True):
        self.password = password
        self.nodes = [Node(password, full_coverage) for _ in range(n * (1 + replicas))]
        out = subprocess.run(['redis-cli', *self.nodes[0].auth, '--cluster', 'create',
                              *(f'127.0.0.1:{r.port}' for r in self.nodes),
                              '--cluster-replicas', str(replicas), '--cluster-yes'],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stdout + out.stderr
        self.ok()
        # a replica that never synced cannot be promoted
        assert wait_for(lambda: all('role:master' in r.cli('INFO', 'replication') or
                                    'master_link_status:up' in r.cli('INFO', 'replication')
                                    for r in self.nodes), 15), 'replicas not synced'

    def ok(self, nodes=None):
        assert wait_for(lambda: all('cluster_state:ok' in r.cli('CLUSTER', 'INFO')
                                    for r in nodes or self.nodes), 15), 'cluster not ok'

    @property
    def url(self):
        auth = f':{self.password}@' if self.password else ''
        return f'redis-cluster://{auth}' + ','.join(f'127.0.0.1:{r.port}'
                                                   for r in self.nodes)

    def keys(self, pattern='rlshim:*'):
        """Each master's keys matching `pattern` (its own: no -c)."""
        return [set(r.cli('--scan', '--pattern', pattern).split()) for r in self.nodes]

    def owner(self, key, ask=None):
        """The node serving `key`'s slot (CLUSTER NODES of `ask`), and the slot."""
        ask = ask or self.nodes[0]
        slot = int(ask.cli('CLUSTER', 'KEYSLOT', key))
        for line in ask.cli('CLUSTER', 'NODES').splitlines():
            f = line.split()
            port = int(f[1].split(':')[1].split('@')[0])
            for rng in f[8:]:
                a, _, b = rng.partition('-')
                if rng[0] != '[' and int(a) <= slot <= int(b or a):
                    return next(r for r in self.nodes if r.port == port), slot
        raise AssertionError(f'slot {slot} has no owner')

    def migrate(self, slot, src, dst):
        """Move `slot` from src to dst as redis-cli --cluster reshard does:
        importing/migrating, its keys MIGRATEd, then the new owner set on
        every node."""
        sid, did = src.cli('CLUSTER', 'MYID'), dst.cli('CLUSTER', 'MYID')
        assert dst.cli('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sid) == 'OK'
        assert src.cli('CLUSTER', 'SETSLOT', slot, 'MIGRATING', did) == 'OK'
        while True:
            keys = src.cli('CLUSTER', 'GETKEYSINSLOT', slot, 100).split()
            if not keys:
                break
            out = src.cli('MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', *keys)
            assert out in ('OK', 'NOKEY'), out
        for r in self.nodes:
            assert r.cli('CLUSTER', 'SETSLOT', slot, 'NODE', did) == 'OK'

    def cli(self, *args):
        """redis-cli -c: following redirections, from a live node."""
        r = next(r for r in self.nodes if r.proc.poll() is None)
        return subprocess.run(['redis-cli', '-c', '-p', str(r.port), *r.auth,
                               *map(str, args)],
                              capture_output=True, text=True, timeout=10).stdout.strip()

    def stop(self):
        for r in self.nodes:
            r.stop()


@contextlib.contextmanager
def cluster_fleet(rules, n, name, replicas=0, password=None):
    c = Cluster(replicas=replicas, password=password)
    hosts = []
    try:
        hosts = [tr.Host(c.url, rules, f'{name}{i}') for i in range(n)]
        tr.started(hosts)
        yield c, hosts
    finally:
        for h in hosts:
            h.stop()
        c.stop()


RATE, BURST, SECONDS = 50, 10, 10


def held(ok, slack=0.0):
    """The limit held: at most 5% over rate x time + burst (plus `slack`),
    at most 7% under. Measured on a quiet machine (two fresh CI runs and
    one more): -3.3% to +0.0%. A machine loaded by other work under-admits
    (late rounds hold the shares back: -5% to -13% at a load of 4-7 on 2
    cores), for one Redis as for the cluster."""
    ideal = RATE * SECONDS + BURST
    assert 0.93 * ideal <= ok <= 1.05 * ideal + slack, (ok, ideal, slack)


def limit_holds_two_hosts():
    """Two hosts under one global limit through the cluster: together they
    admit rate x time + burst (held()), and the agent says it connected to
    the cluster."""
    rules = f'[limit:even]\nmatch = * /even\nrate = {RATE}/s\nburst = {BURST}\n'
    with cluster_fleet(rules, 2, 'cl') as (c, hosts):
        ok, denied = tr.overload(hosts, '/even', SECONDS, lambda t, i: hosts[i % 2])
        ideal = RATE * SECONDS + BURST
        print(f'  admitted {ok} of {ok + denied}, ideal {ideal}, '
              f'error {100 * (ok - ideal) / ideal:+.1f}%')
        assert ok + denied >= 5 * RATE * SECONDS, 'not overloaded'
        held(ok)
        for h in hosts:
            log = h.agent_log()
            assert 'msg="store connected" store=redis-cluster://127.0.0.1:' in log, log
            assert 'store unreachable' not in log, log
        # each call went to its slot's master: no node answered MOVED, and
        # the agent's keys (the rule's, epoch, hosts) are on several
        keys = c.keys()
        assert sum(bool(k) for k in keys) > 1, keys
        assert any(EVEN12 in k for k in keys), keys  # 127.0.0.1's shard
        for r in c.nodes:
            assert 'MOVED' not in r.cli('INFO', 'errorstats'), r.cli('INFO', 'errorstats')


def keys_spread_over_masters():
    """One rule keyed by a header, 200 keys: their state is spread over more
    than one master (the rule is not one node's load)."""
    rules = '[limit:user]\nmatch = * /u\nkey = header:X-User\nrate = 5/s\nburst = 5\n'
    with cluster_fleet(rules, 2, 'sp') as (c, hosts):
        for k in range(200):
            hosts[k % 2].get('/u', {'X-User': f'u{k}'})
        assert wait_for(lambda: sum(bool(s) for s in c.keys('rlshim:{user*')) > 1, 5), \
            c.keys()


def slot_moved_under_load():
    """The slot of a rule's keys moves to another master under load: the
    agents follow (the old master answered MOVED or ASK) without an outage,
    the keys are on the new one, the limit holds (held()), and the agents
    sync at the end."""
    rules = f'[limit:even]\nmatch = * /even\nrate = {RATE}/s\nburst = {BURST}\n'
    with cluster_fleet(rules, 2, 'mv') as (c, hosts):
        src, slot = c.owner(EVEN12)
        dst = next(r for r in c.nodes if r is not src)
        res = {}
        t = threading.Thread(target=lambda: res.update(ok=tr.overload(
            hosts, '/even', SECONDS, lambda t, i: hosts[i % 2])))
        t.start()
        time.sleep(SECONDS / 3)
        c.migrate(slot, src, dst)
        t.join()
        ok, denied = res['ok']
        ideal = RATE * SECONDS + BURST
        print(f'  admitted {ok} of {ok + denied}, ideal {ideal}, '
              f'error {100 * (ok - ideal) / ideal:+.1f}%')
        stats = src.cli('INFO', 'errorstats')
        outages = sum(h.agent_log().count('store unreachable') for h in hosts)
        print(f'  old master: {" ".join(stats.split()[1:])}; outages logged: {outages}')
        assert 'MOVED' in stats or 'ASK' in stats, stats
        # all of a slot's keys move in one MIGRATE here: no script ever saw
        # its keys split (TRYAGAIN), so the store was never down
        assert outages == 0, [h.agent_log() for h in hosts]
        assert EVEN12 in c.keys()[c.nodes.index(dst)], c.keys()
        held(ok)
        n = [tr.syncs(h) for h in hosts]
        assert wait_for(lambda: all(tr.syncs(h) > m for h, m in zip(hosts, n)), 5)


def master_killed_replica_promoted():
    """The master of a rule's keys is killed under load and its replica
    promoted (3 masters, 3 replicas): every request is answered meanwhile,
    the agents log the node once, follow the promoted replica by
    themselves (the map asked again every 50 ms while a master is down)
    and sync the rule's keys there, and the limit holds (held()) overall,
    but for the share a host takes while the other is back before it."""
    rules = f'[limit:even]\nmatch = * /even\nrate = {RATE}/s\nburst = {BURST}\n'
    with cluster_fleet(rules, 2, 'fo', replicas=1) as (c, hosts):
        victim, slot = c.owner(EVEN12)
        res = {}
        t = threading.Thread(target=lambda: res.update(ok=tr.overload(
            hosts, '/even', SECONDS, lambda t, i: hosts[i % 2])))
        t.start()
        time.sleep(SECONDS / 3)
        victim.kill()
        t0 = time.monotonic()
        rest = [r for r in c.nodes if r is not victim]
        assert wait_for(lambda: c.owner(EVEN12, rest[0])[0] is not victim, 20)
        promoted = time.monotonic() - t0
        new = c.owner(EVEN12, rest[0])[0]
        c.ok(rest)
        t.join()
        # the agents sync the rule's key on the promoted replica
        # (requests admitted again: the debt of the overload repaid)
        was = new.cli('ZSCORE', EVEN12 + ':recent', '127.0.0.1')
        assert wait_for(lambda: [h.get('/even') for h in hosts] and
                        new.cli('ZSCORE', EVEN12 + ':recent', '127.0.0.1') != was,
                        10), (new.port, c.keys(), [h.agent_log() for h in hosts])
        ok, denied = res['ok']
        ideal = RATE * SECONDS + BURST
        logs = [h.agent_log() for h in hosts]
        for log in logs:  # (a loaded machine may time others out too)
            assert f'msg="store node unreachable" store=redis-cluster://' in log, log
            assert f'node=127.0.0.1:{victim.port} err=' in log, log
        # With cluster-require-full-coverage yes, the cluster answers
        # CLUSTERDOWN between the master's FAIL and the promotion: a round
        # with no other answer is the store down (logged as ever).
        downs = [re.findall(r'msg="store reachable again".* down_for=([\d.]+)s', log)
                 for log in logs]
        print(f'  promoted after {promoted:.1f} s; agents down for {downs}; '
              f'admitted {ok} of {ok + denied}, ideal {ideal}, '
              f'error {100 * (ok - ideal) / ideal:+.1f}%')
        # While one agent is down and the other back, the one down keeps
        # to its share (on_store_down = open) and the one back, which has
        # not heard of what the other admits, to the whole rate: the
        # documented overlap, rate / hosts for the time between the two
        # agents' returns (a round or two when neither goes down).
        back = [sum(float(x) for x in d) for d in downs]
        lag = max(back) - min(back) + 0.2
        held(ok, slack=RATE / len(hosts) * lag)
        n = [tr.syncs(h) for h in hosts]
        assert wait_for(lambda: all(tr.syncs(h) > m for h, m in zip(hosts, n)), 5)


def apart(c, name):
    """A rule name whose shard 12 (127.0.0.1's) is on another master than
    `name`'s."""
    other = c.owner(rule_key(name, 12))[0]
    return next(d for d in (f'd{i}' for i in range(200))
                if c.owner(rule_key(d, 12))[0] is not other)


def store_state(h):
    """The agent's store as rlshimctl status --json says it."""
    j = json.loads(h.ctl('status', '--json').stdout)
    return j['store']['state'] if isinstance(j['store'], dict) else j['store']


def master_stopped_others_sync():
    """A master without replica stops (SIGSTOP; cluster-require-full-coverage
    no, so the others serve): the agents keep syncing the keys on the live
    masters (the limit holds, held(); status does not say the store down),
    log the node once, and keep the keys of the stopped one to this host's
    share; SIGCONT: the node is used again."""
    c = Cluster(full_coverage=False)
    hosts = []
    try:
        dead = apart(c, 'live')
        victim = c.owner(rule_key(dead, 12))[0]
        rules = (f'[limit:live]\nmatch = * /live\nrate = {RATE}/s\nburst = {BURST}\n'
                 f'[limit:{dead}]\nmatch = * /dead\nrate = {RATE}/s\nburst = {BURST}\n')
        hosts = [tr.Host(c.url, rules, f'st{i}') for i in range(2)]
        tr.started(hosts)
        tr.hosts_up(hosts)
        # when a host last pushed the key (a state repaid is not kept, and
        # only a state written, one that owes, is scored: five requests
        # within a round at 50/s owe)
        key = rule_key(dead, 12, ':recent')
        for _ in range(5):
            hosts[0].get('/dead')
        assert wait_for(lambda: victim.cli('ZSCORE', key, '127.0.0.1') != '', 5)
        before = victim.cli('ZSCORE', key, '127.0.0.1')
        mark = [len(h.agent_log()) for h in hosts]
        os.kill(victim.proc.pid, signal.SIGSTOP)
        try:
            n = [tr.syncs(h) for h in hosts]
            ok, denied = tr.overload(hosts, '/live', SECONDS, lambda t, i: hosts[i % 2])
            ideal = RATE * SECONDS + BURST
            synced = [tr.syncs(h) - m for h, m in zip(hosts, n)]
            print(f'  live: admitted {ok} of {ok + denied}, ideal {ideal}, '
                  f'error {100 * (ok - ideal) / ideal:+.1f}%; rounds {synced}')
            # 10 s of 50 ms rounds: synced along (the store down: none)
            assert all(m >= SECONDS * 5 for m in synced), synced
            held(ok)
            for h in hosts:  # up, degraded
                j = json.loads(h.ctl('status', '--json').stdout)['store']
                assert j['state'] == 'up' and j['masters'] == 3 and \
                    j['masters_unreachable'] == 1, j
                assert re.search(r'^redis:\s+degraded, 1 of 3 masters unreachable, '
                                 r'redis-cluster://', h.ctl('status').stdout, re.M), \
                    h.ctl('status').stdout
                assert 'rlshim_store_masters_unreachable 1\n' in h.ctl('metrics').stdout
            # the stopped master's keys: this host's share (half the rate
            # with two hosts alive) and its burst
            d_ok, _ = tr.overload([hosts[0]], '/dead', 4, lambda t, i: hosts[0])
            print(f'  {dead} on the stopped master: {d_ok} in 4 s on one host')
            assert RATE / 2 * 4 * 0.8 <= d_ok <= RATE / 2 * 4 + BURST + 5, d_ok
            for h, m in zip(hosts, mark):
                log = h.agent_log()[m:]
                assert log.count(f'node=127.0.0.1:{victim.port} err=') == 1, log
                assert 'msg="store node unreachable"' in log, log
                assert 'store unreachable' not in log, log
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        back = rf'msg="store node reachable again" .* node=127.0.0.1:{victim.port} ' \
               r'down_for=[\d.]+s'
        assert wait_for(lambda: all(re.search(back, h.agent_log()) for h in hosts), 10), \
            [h.agent_log() for h in hosts]
        # used again: the key's state reaches its master
        for _ in range(5):
            hosts[1].get('/dead')
        assert wait_for(lambda: victim.cli('ZSCORE', key, '127.0.0.1') != before, 5), before
        assert wait_for(lambda: all(
            json.loads(h.ctl('status', '--json').stdout)['store'].get('masters_unreachable')
            == 0 for h in hosts), 5), [h.ctl('status').stdout for h in hosts]
    finally:
        for h in hosts:
            h.stop()
        c.stop()


def closed_rule_on_stopped_master():
    """on_store_down = closed cannot be refused per key: while the master of
    a closed rule's key is stopped, the host's closed rules refuse (429,
    Retry-After: 1) and status says the store down; the open rule's keys on
    a live master keep syncing; SIGCONT: the closed rule admits again."""
    c = Cluster(full_coverage=False)
    hosts = []
    try:
        shut = apart(c, 'live')
        victim = c.owner(rule_key(shut, 12))[0]
        rules = (f'[limit:live]\nmatch = * /live\nrate = 100/s\n'
                 f'[limit:{shut}]\nmatch = * /shut\nrate = 100/s\n'
                 'on_store_down = closed\n')
        hosts = [tr.Host(c.url, rules, 'cr')]
        tr.started(hosts)
        h = hosts[0]
        tr.rounds(hosts)
        assert h.get('/shut').status == 404
        os.kill(victim.proc.pid, signal.SIGSTOP)
        try:
            assert wait_for(lambda: h.get('/shut').status == 429, 5), h.agent_log()
            r = h.get('/shut')
            assert r.status == 429 and r.headers.get('retry-after') == '1', r.headers
            assert h.get('/live').status == 404
            assert store_state(h) == 'down', h.ctl('status').stdout
            n = tr.syncs(h)
            assert wait_for(lambda: tr.syncs(h) > n + 5, 5)
            assert 'store unreachable' not in h.agent_log(), h.agent_log()
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        assert wait_for(lambda: h.get('/shut').status == 404, 10), h.agent_log()
        assert store_state(h) == 'up', h.ctl('status').stdout
    finally:
        for h in hosts:
            h.stop()
        c.stop()


def all_masters_stopped():
    """Every master stopped: the store down as with one Redis (`store
    unreachable`, status down, on_store_down); SIGCONT: `store reachable
    again`, syncing. The password is in no log line, the nodes' included."""
    rules = f'[limit:all]\nmatch = * /all\nrate = {RATE}/s\nburst = {BURST}\n'
    with cluster_fleet(rules, 1, 'as', password='s3cr3t-pw') as (c, hosts):
        h = hosts[0]
        tr.rounds(hosts)
        for r in c.nodes:
            os.kill(r.proc.pid, signal.SIGSTOP)
        try:
            assert wait_for(lambda: store_state(h) == 'down', 5), h.ctl('status').stdout
            assert 'msg="store unreachable" store=redis-cluster://' in h.agent_log()
        finally:
            for r in c.nodes:
                os.kill(r.proc.pid, signal.SIGCONT)
        assert wait_for(lambda: 'msg="store reachable again"' in h.agent_log(), 10), \
            h.agent_log()
        assert wait_for(lambda: store_state(h) == 'up', 5)
        tr.rounds(hosts)
        assert 's3cr3t' not in h.agent_log() + h.ctl('status').stdout, h.agent_log()


def tryagain_fails_one_call():
    """A slot half-migrated (its `recent` MIGRATEd, its hash not): the
    scripts naming both answer TRYAGAIN; only those calls fail: the store
    is not down, the other rule's keys keep syncing; the migration
    finished, the rule syncs on the new master."""
    c = Cluster()
    hosts = []
    try:
        other = apart(c, 'half')
        rules = (f'[limit:half]\nmatch = * /half\nrate = {RATE}/s\nburst = {BURST}\n'
                 f'[limit:{other}]\nmatch = * /other\nrate = {RATE}/s\nburst = {BURST}\n')
        hosts = [tr.Host(c.url, rules, f'ta{i}') for i in range(2)]
        tr.started(hosts)
        tr.hosts_up(hosts)
        key, okey = rule_key('half', 12), rule_key(other, 12)
        src, slot = c.owner(key)
        dst = next(r for r in c.nodes if r is not src)
        for _ in range(5):  # owes: its state written, and scored
            hosts[0].get('/half')
        assert wait_for(lambda: src.cli('EXISTS', key + ':recent') == '1', 5)
        sid, did = src.cli('CLUSTER', 'MYID'), dst.cli('CLUSTER', 'MYID')
        assert dst.cli('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sid) == 'OK'
        assert src.cli('CLUSTER', 'SETSLOT', slot, 'MIGRATING', did) == 'OK'
        assert src.cli('MIGRATE', '127.0.0.1', dst.port, key + ':recent', 0, 5000) == 'OK'
        n = [tr.syncs(h) for h in hosts]
        before = c.cli('ZSCORE', okey + ':recent', '127.0.0.1')
        for i in range(20):
            hosts[i % 2].get('/half')
            for _ in range(3):  # 60/s: the key owes, its state is written
                hosts[i % 2].get('/other')
            time.sleep(0.05)
        tr.rounds(hosts, 5)
        assert 'TRYAGAIN' in src.cli('INFO', 'errorstats'), src.cli('INFO', 'errorstats')
        for h in hosts:
            log = h.agent_log()
            assert 'msg="store error" err="TRYAGAIN' in log, log
            assert 'store unreachable' not in log, log
            assert store_state(h) == 'up', h.ctl('status').stdout
        assert all(tr.syncs(h) > m + 5 for h, m in zip(hosts, n))
        assert c.cli('ZSCORE', okey + ':recent', '127.0.0.1') not in ('', before)
        # the rest of the slot moves: the rule syncs on the new master
        for k in src.cli('CLUSTER', 'GETKEYSINSLOT', slot, 100).split():
            assert src.cli('MIGRATE', '127.0.0.1', dst.port, k, 0, 5000) == 'OK'
        for r in c.nodes:
            assert r.cli('CLUSTER', 'SETSLOT', slot, 'NODE', did) == 'OK'
        moved = dst.cli('ZSCORE', key + ':recent', '127.0.0.1')
        for _ in range(5):
            hosts[0].get('/half')
        assert wait_for(lambda: dst.cli('ZSCORE', key + ':recent', '127.0.0.1') != moved,
                        5), moved
    finally:
        for h in hosts:
            h.stop()
        c.stop()


def reset_and_strict_two_hosts():
    """test_redis.py's reset_two_hosts through the cluster: the key exhausted
    on two hosts, rlshimctl reset on one, both admit it again; its state is
    gone from its shard's hash ({sms:12}: 127.0.0.1's). Strict: exactly the
    bucket again, and show reads the state from the key's master."""
    for rules, name in ((tr.RESET_RULES, 'rs'),
                        (tr.RESET_RULES + 'sync = strict\n', 'rss')):
        with cluster_fleet(rules, 2, name) as (c, hosts):
            tr.hosts_up(hosts)
            tr.exhausted(hosts)
            assert c.cli('HEXISTS', SMS12, '127.0.0.1') == '1'
            out = hosts[0].ctl('reset', 'sms', '127.0.0.1')
            assert out.returncode == 0 and out.stderr == '', out
            assert 'Redis' in out.stdout and 'every host' in out.stdout, out.stdout
            tr.rounds(hosts)
            assert c.cli('HEXISTS', SMS12, '127.0.0.1') == '0'
            assert all('msg="key reset" rule=sms key="127.0.0.1"' in h.agent_log()
                       for h in hosts), [h.agent_log() for h in hosts]
            if 'strict' in rules:
                n = [tr.admitted(hosts[0], 7)]
                j = json.loads(hosts[1].ctl('show', 'sms', '127.0.0.1', '--json').stdout)
                assert j['view'] == 'redis' and j['seen'] and j['remaining'] == 3, j
                n.append(tr.admitted(hosts[1], 7))
                assert n == [7, 3], n
                continue
            with tr.Unheard(hosts):
                n = [tr.admitted(hosts[0], 10), tr.admitted(hosts[1], 10)]
            assert all(n) and 10 <= sum(n) <= 11, n


def maxretry_two_hosts():
    """test_redis.py's maxretry_two_hosts through the cluster: 2 refusals on
    each of two hosts reach maxretry 4 together, in the address's shard
    (fails:{sms:12}), and the client is banned on both through bans."""
    with cluster_fleet(tr.MR.format(bantime='1m'), 2, 'mr') as (c, hosts):
        tr.hosts_up(hosts)
        tr.refusals(hosts[0], 2)
        assert wait_for(lambda: c.cli('HEXISTS', FAILS_SMS12,
                                      '127.0.0.1') == '1', 5)
        tr.refusals(hosts[1], 2)
        assert wait_for(lambda: all(tr.banned(h) for h in hosts), 5), \
            [h.agent_log() for h in hosts]
        assert c.cli('ZSCORE', 'rlshim:bans', '127.0.0.1/32')
        assert sorted(o[0] for o in tr.ban_origins(hosts)) == ['maxretry', 'remote'], \
            tr.ban_origins(hosts)


def password():
    """A cluster whose nodes need a password: the URL's is sent to every
    node (seed and masters), the limit is shared, and neither the log nor
    rlshimctl status shows the password."""
    rules = '[limit:pw]\nmatch = * /pw\nrate = 1/m\nburst = 3\n'
    with cluster_fleet(rules, 2, 'pw', password='s3cr3t-pw') as (c, hosts):
        tr.hosts_up(hosts)
        # Host 0 meets the fresh key with no agent running (a round
        # between its requests would push the first alone and get a grant
        # of 0 while the key is young: 1 here, 2 in all): its share,
        # ceil(3 / 2) = 2, the third refused.
        with tr.Unheard(hosts):
            got = [hosts[0].get('/pw').status for _ in range(3)]
        # Host 1 gets the one left only at its own push of the key, which
        # follows the pull that brought the key's state (mirrored with no
        # grant: every request refused, Retry-After within the round). So
        # it needs a pull begun after host 0's push, then a push: Unheard
        # waits for host 0's push and then two rounds of host 1, of which
        # the first may have pulled before that push; one more is the
        # push. Before, two rounds of each from host 0's requests: when
        # host 1's agent ran a round just before host 0's first push (0
        # to 7 ms ahead, 4 runs in 60 on one Redis Cluster, 1 in 45 on one
        # Redis), its first pulled nothing, its second mirrored the key,
        # and host 1 refused all three: [404, 404, 429, 429, 429, 429].
        tr.rounds(hosts[1:], 1)
        got += [hosts[1].get('/pw').status for _ in range(3)]
        # the burst shared: host 1 gets what host 0 left, its grant
        # ceil(1 / 2) = 1, not a fresh share of its own (2)
        assert got == [404, 404, 429, 404, 429, 429], \
            (got, [h.agent_log() for h in hosts])
        assert c.cli('HEXISTS', rule_key('pw', 12), '127.0.0.1') == '1'
        for h in hosts:
            log = h.agent_log()
            assert 'store connected' in log and 'unreachable' not in log, log
            assert 's3cr3t' not in log + h.ctl('status').stdout, log


def epoch_key(c, node):
    """The epoch key of master `node`: rlshim:epoch:{e<n>}, n the smallest
    whose slot (CLUSTER KEYSLOT) the node owns."""
    return next(f'rlshim:epoch:{{e{n}}}' for n in range(1000)
                if c.owner(f'e{n}')[0] is node)


USERS = [f'u{k}' for k in range(24)]


def admitted_user(host, user, n):
    """How many of n GET /u as X-User `user` reached the application (404;
    the shim's refusals are 429s)."""
    rs = [host.get('/u', {'X-User': user}) for _ in range(n)]
    assert all(r is not None and r.status in (404, 429) for r in rs), rs
    return sum(r.status == 404 for r in rs)


def user_states(c):
    """Each node's states of rule `user`: {(hash key, user): TAT:EI}."""
    out = []
    for r, keys in zip(c.nodes, c.keys('rlshim:{user:*}')):
        st = {}
        for k in keys:
            f = r.cli('HGETALL', k).split('\n')
            st.update({(k, u): v for u, v in zip(f[::2], f[1::2])})
        out.append(st)
    return out


def master_lost_data(how):
    """A rule's keys spread over the masters (no replicas), spent on host 1
    while host 2's agent is stopped (it never hears of them); then a master
    that holds some of them, not the one of the old single `rlshim:epoch`,
    loses its data (`how`: FLUSHALL, or restarted empty, its slots kept
    in nodes.conf). Host 1's agent sees that master's epoch gone and puts
    back what its keys there owe (HGET on that master shows each key's
    state again, its epoch is back); host 2 then gets nothing of those
    keys (at most the one refill due meanwhile), as after a Redis restart
    (test_redis.py's redis_restarted_keeps_debts), where it would get its
    fresh share of each."""
    rules = '[limit:user]\nmatch = * /u\nkey = header:X-User\nrate = 1/m\nburst = 5\n'
    with cluster_fleet(rules, 2, f'ep{how}') as (c, hosts):
        tr.hosts_up(hosts)
        # every master has its epoch, named by the tag of its own slots
        assert wait_for(lambda: all(r.cli('EXISTS', epoch_key(c, r)) == '1'
                                    for r in c.nodes), 5), c.keys('rlshim:epoch*')
        agent2 = hosts[1].agent_pids()
        for pid in agent2:
            os.kill(pid, signal.SIGSTOP)
        try:
            # spent: until three passes in a row admit nothing (host 2's
            # grants lapse a few rounds after its agent stopped, and host
            # 1 gets them)
            spent = {u: 0 for u in USERS}
            idle = 0
            for _ in range(15):
                n = {u: admitted_user(hosts[0], u, 3) for u in USERS}
                spent = {u: spent[u] + n[u] for u in USERS}
                idle = 0 if any(n.values()) else idle + 1
                if idle == 3:
                    break
                tr.rounds(hosts[:1])
            assert idle == 3 and all(3 <= n <= 6 for n in spent.values()), spent
            states = user_states(c)
            old_epoch = c.owner('rlshim:epoch')[0]
            victim = max((r for r in c.nodes if r is not old_epoch),
                         key=lambda r: len(states[c.nodes.index(r)]))
            lost = states[c.nodes.index(victim)]
            assert lost, states
            ekey = epoch_key(c, victim)
            if how == 'flushall':
                assert victim.cli('FLUSHALL') == 'OK'
            else:
                victim.kill()
                victim.start()
                c.ok()
            assert wait_for(lambda: all(victim.cli('HGET', k, u) for k, u in lost), 5), \
                (lost, user_states(c)[c.nodes.index(victim)])
            assert wait_for(lambda: victim.cli('EXISTS', ekey) == '1', 5)
            tr.rounds(hosts[:1], 3)
        finally:
            for pid in agent2:
                os.kill(pid, signal.SIGCONT)
        tr.rounds(hosts, 3)
        users = sorted({u for _, u in lost})
        got = {u: admitted_user(hosts[1], u, 5) for u in users}
        print(f'  {len(users)} keys on the master that lost its data; '
              f'host 2 admitted {sum(got.values())} of them afterwards')
        assert all(n <= 1 for n in got.values()), got


def master_flushed_debts_put_back():
    master_lost_data('flushall')


def master_restarted_empty_debts_put_back():
    master_lost_data('restart')


def bans_master_flushed():
    """The master of rlshim:bans (not the one of the old single epoch) is
    flushed: the agents see its epoch gone and push their
    own bans again, so both hosts still refuse the banned client, where
    they would take the ban gone from the store for lifted by somebody and
    lift it too."""
    with cluster_fleet('[limit:a]\nmatch = * /a\nrate = 1000/s\n', 2, 'bf') as (c, hosts):
        tr.hosts_up(hosts)
        assert hosts[0].ctl('ban', '127.0.0.1', '--for', '10m').returncode == 0
        assert wait_for(lambda: all(tr.banned(h) for h in hosts), 5)
        victim = c.owner('rlshim:bans')[0]
        assert victim is not c.owner('rlshim:epoch')[0]
        # under way: a flush between a round's epoch read and its ban
        # set's read is seen at the next round, before the ban is lifted
        assert victim.cli('FLUSHALL') == 'OK'
        assert wait_for(lambda: victim.cli('ZSCORE', 'rlshim:bans', '127.0.0.1/32'), 5), \
            ('the ban was not re-asserted', [h.ctl('bans').stdout for h in hosts])
        tr.rounds(hosts, 3)
        assert all(tr.banned(h) for h in hosts), [h.ctl('bans').stdout for h in hosts]


TESTS = [limit_holds_two_hosts, keys_spread_over_masters, slot_moved_under_load,
         master_killed_replica_promoted, reset_and_strict_two_hosts,
         maxretry_two_hosts, password, master_flushed_debts_put_back,
         master_restarted_empty_debts_put_back, bans_master_flushed,
         master_stopped_others_sync, closed_rule_on_stopped_master,
         all_masters_stopped, tryagain_fails_one_call]


def main():
    try:
        want = sys.argv[1:]
        return run('cluster', [(f'cluster: {t.__name__}', t) for t in TESTS
                               if not want or t.__name__ in want])
    finally:
        shutil.rmtree(tr.TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
