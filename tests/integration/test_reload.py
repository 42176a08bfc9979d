#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_reload.py - the configuration changed under running servers, and
what the operator reads in the log, as a client and an operator see them:

- nginx with two workers under load: a rewritten file is in force in both
  workers within a second, and no request of the load fails meanwhile;
- an invalid file: refused, its file:line logged once for the whole host,
  the rules in force stay; fixed, it applies;
- a rule left unchanged keeps its clients' state across a reload;
- shm and ports cannot change without a restart: said so, old ones kept;
- rlshimd restarts itself on the new file;
- denials are summarised, per rule, not logged per request;
- log = syslog reaches a syslog socket.
"""
import os
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, SHIM, exchange, parse_responses,  # noqa: E402
                     request, require_root, run, wait_for)
import servers  # noqa: E402
import test_features as F  # noqa: E402

TMP = tempfile.mkdtemp(prefix='rlshim-reload-')
N = [0]
# A process looks at the file at most once a second, at its next request:
# a request made this long after the change is decided by the new file.
RELOAD_S = 1.1


def rewrite(path, text):
    """Replace the file the way an editor or a config manager does: a new
    file renamed over the old one."""
    tmp = path + '.new'
    with open(tmp, 'w') as f:
        f.write(text)
    os.rename(tmp, path)


def one(port, method='GET', path='/books', headers=None):
    rs = parse_responses(exchange(port, request(method, path, headers)),
                         [method], first_only=True)
    assert rs, 'no response'
    return rs[0]


def limit_of(r):
    return int(r.headers['ratelimit-limit'])


# ---- nginx, two workers, under load -------------------------------------------

NGINX_CONF = """[global]
ports = {port}
shm = {shm}

[limit:load]
match = GET /books
rate = 1000/s
key = ip

[limit:probe]
match = GET /probe
rate = {rate}
key = header:X-Key
"""


class Nginx:
    def __init__(self, rate):
        N[0] += 1
        self.dir, self.port, self.config = servers.instance_dir(
            os.path.join(TMP, f'nginx{N[0]}'))
        self.shm = f'rlshim-reload-{os.getpid()}-{N[0]}'
        self.write(rate)
        self.server = servers.Server('nginx', self.dir, SHIM, self.config,
                                     self.port)
        self.server.start()

    def write(self, rate, extra=''):
        rewrite(self.config, NGINX_CONF.format(port=self.port, shm=self.shm,
                                               rate=rate) + extra)

    def probe(self, key, n):
        """n requests for `key`, each on its own connection (so both
        workers answer some); the responses."""
        return [one(self.port, path='/probe', headers={'X-Key': key})
                for _ in range(n)]

    def both_limiting(self):
        """Until both workers' shims have started (each logs "limiting"
        at its first guarded accept): new connections, several at once
        so that both workers accept some, each with a key of its own."""
        for i in range(100):
            pids = set(re.findall(r'pid=(\d+) msg="limiting"',
                                  self.server.stderr_text()))
            if len(pids) >= 2:
                return
            threads = [threading.Thread(target=one, args=(self.port,),
                                        kwargs={'path': '/probe',
                                                'headers': {'X-Key': f'w{i}.{j}'}})
                       for j in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
        raise AssertionError(f'one nginx worker never accepted: {pids}')

    def stop(self):
        servers.stop_with_segment(self.server, self.shm)


class Load(threading.Thread):
    """GET /books on new connections until stopped; every answer kept."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop_ = threading.Event()
        self.statuses = []
        self.errors = []

    def run(self):
        while not self.stop_.is_set():
            try:
                self.statuses.append(one(self.port).status)
            except Exception as e:  # noqa: BLE001 - a failed request is data
                self.errors.append(repr(e))
            time.sleep(0.005)

    def finish(self):
        self.stop_.set()
        self.join(10)
        return self.statuses, self.errors


def probe_limited(n, rs):
    """n requests passed (nginx answers 404: no such file), then 429s."""
    got = [r.status for r in rs]
    assert got == [404] * n + [429] * (len(rs) - n), got


def parallel(s, key, n):
    """n requests for `key` at once, each on its own connection, so that
    both workers take some; the responses."""
    out, lock = [], threading.Lock()

    def go():
        r = one(s.port, path='/probe', headers={'X-Key': key})
        with lock:
            out.append(r)
    threads = [threading.Thread(target=go) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def reload_under_load():
    """Rewriting the file under load: from RELOAD_S after the change both
    workers decide by the new rule (20/m instead of 3/m: of 40 parallel
    requests exactly 20 pass, both workers among them, every 429 says
    RateLimit-Limit: 20), and not one request of the load failed."""
    s = Nginx('3/m')
    load = Load(s.port)
    try:
        rs = s.probe('a', 5)
        probe_limited(3, rs)
        assert limit_of(rs[-1]) == 3
        load.start()
        time.sleep(0.3)
        s.write('20/m')
        time.sleep(RELOAD_S)
        rs = parallel(s, 'b', 40)
        passed = [r for r in rs if r.status != 429]
        assert len(passed) == 20, sorted(r.status for r in rs)
        assert {limit_of(r) for r in rs if r.status == 429} == {20}
        workers = {r.headers.get('x-worker') for r in passed}
        assert len(workers) == 2, f'one worker answered everything: {workers}'
        time.sleep(0.3)
        statuses, errors = load.finish()
        assert not errors, errors[:5]
        assert len(statuses) > 50, len(statuses)
        assert set(statuses) == {200}, sorted(set(statuses))
        err = s.server.stderr_text()
        # Once for the host, not once per worker.
        assert err.count('msg="configuration reloaded"') == 1, err[-3000:]
    finally:
        load.stop_.set()
        s.stop()


def invalid_file_kept():
    """An invalid file is refused with its file:line, logged once for both
    workers; the rules in force stay; the file fixed, it applies."""
    s = Nginx('3/m')
    try:
        # Both workers running the rules: a worker whose shim starts after
        # the file broke says so itself (new_process_keeps_rules).
        s.both_limiting()
        probe_limited(3, s.probe('a', 4))
        s.write('3/m', '\n[limit:bad]\nmatch = GET /x\nrate = lots\n')
        time.sleep(RELOAD_S)
        probe_limited(3, s.probe('b', 12))
        err = s.server.stderr_text()
        lines = [ln for ln in err.splitlines() if 'configuration refused' in ln]
        assert len(lines) == 1, lines
        bad = open(s.config).read().splitlines().index('rate = lots') + 1
        assert f'err="{s.config}:{bad}: bad rate \'lots\'' in lines[0], lines[0]
        # Fixed: in force.
        s.write('5/m')
        time.sleep(RELOAD_S)
        probe_limited(5, s.probe('c', 7))
        err = s.server.stderr_text()
        assert err.count('configuration refused') == 1
        assert err.count('msg="configuration reloaded"') == 1
    finally:
        s.stop()


# ---- legacy_server -----------------------------------------------------------------

def unchanged_rules_keep_state():
    """A reload keeps every bucket: a client out of budget on an unchanged
    rule stays so, and a changed rate applies to what clients have used
    (the client that used 3 of 3 a minute is still owed under 4 a minute,
    where a new client gets 4)."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 2/m\n'
                 '[limit:sms]\nmatch = POST /sms\nrate = 3/m\n')
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        assert F.codes(s, 4, '/sms', 'POST') == [200] * 3 + [429]
        text = open(s.config).read().replace('rate = 3/m', 'rate = 4/m')
        rewrite(s.config, text)
        time.sleep(RELOAD_S)
        r = s.get('/books')
        assert r.status == 429 and limit_of(r) == 2, r
        r = s.get('/sms', 'POST')
        assert r.status == 429 and limit_of(r) == 4, r
        assert F.codes(s, 5, '/sms', 'POST', family=socket.AF_INET6) == \
            [200] * 4 + [429]
    finally:
        s.stop()


def touched_file_is_no_reload():
    """A file touched, or rewritten the same by a config manager, is not
    a reload: nothing logged, nothing counted, and it is in force."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 2/m\n')
    try:
        assert F.codes(s, 1) == [200]
        rewrite(s.config, open(s.config).read())
        time.sleep(RELOAD_S)
        assert F.codes(s, 2) == [200, 429]
        assert 'reloaded' not in s.server.stderr_text()
        out = subprocess.run([os.path.join(REPO, 'build', 'rlshimctl'), '-c',
                              s.config, 'status', '--json'],
                             capture_output=True, text=True, timeout=10)
        import json
        st = json.loads(out.stdout)['config']
        assert st['state'] == 'in_force' and st['reloads'] == 0, st
    finally:
        s.stop()


def new_process_keeps_rules():
    """A server started while the file is broken (a worker respawned, a
    restart after a bad edit) takes the rules the host keeps in force,
    instead of refusing every connection; the file fixed, it applies."""
    port2 = servers.free_port()
    shm = f'rlshim-reload-{os.getpid()}-keep'
    s = F.Legacy(f'!raw\n[global]\nports = {{port}} {port2}\nshm = {shm}\n'
                 '[limit:books]\nmatch = GET /books\nrate = 2/m\n', shm=shm)
    b = None
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        good = open(s.config).read()
        rewrite(s.config, good + '[limit:bad]\nrate = lots\n')
        time.sleep(RELOAD_S)
        assert F.codes(s, 1) == [429]
        d = os.path.join(TMP, f'keep{os.getpid()}')
        os.makedirs(d, exist_ok=True)
        b = servers.Server('legacy', d, SHIM, s.config, port2)
        b.start()
        r = one(port2)
        # The same rule, the same bucket: this client is out of budget.
        assert r.status == 429 and limit_of(r) == 2, r
        err = b.stderr_text()
        assert 'msg="configuration refused, using the one in force on this ' \
            'host"' in err and "bad rate 'lots'" in err, err
        assert 'msg="limiting"' in err, err
        # Fixed (a new rate): both servers apply it, to the same bucket.
        rewrite(s.config, good.replace('rate = 2/m', 'rate = 5/m'))
        time.sleep(RELOAD_S)
        for p in (port2, s.port):
            r = one(p)
            assert r.status == 429 and limit_of(r) == 5, r
    finally:
        if b:
            b.stop()
        s.stop()


def emptied_file_refused():
    """A file emptied (or caught half-written, before its first rule) is
    refused: the rules in force stay, the log says what is missing."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 2/m\n')
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        rewrite(s.config, f'[global]\nports = {s.port}\nshm = {s.shm}\n')
        time.sleep(RELOAD_S)
        assert F.codes(s, 2) == [429, 429]
        err = s.server.stderr_text()
        assert 'no [limit:*] rule (to lift every limit on purpose, set ' \
            'mode = dry-run)' in err, err
    finally:
        s.stop()


def restart_needed():
    """shm and ports cannot change under a running server: the reload says
    they need a restart and keeps the ones in force; the rest applies."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 2/m\n')
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        other = s.shm + '-other'
        text = open(s.config).read()
        text = text.replace(f'shm = {s.shm}', f'shm = {other}')
        text = text.replace(f'ports = {s.port}', f'ports = {s.port} 1')
        text = text.replace('rate = 2/m', 'rate = 3/m')
        rewrite(s.config, text)
        time.sleep(RELOAD_S)
        r = s.get()
        assert r.status == 429 and limit_of(r) == 3, r
        assert not os.path.exists(f'/dev/shm/{other}')
        err = s.server.stderr_text()
        assert 'restart_needed="shm,ports"' in err, err
    finally:
        s.stop()


def restart_needed_status():
    """A reload that changes the ports: status says a restart is needed
    (what, since when; --json restart_needed), until the server is
    started again with the file."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 10/m\n')
    port, shm = s.port, s.shm
    try:
        assert F.codes(s, 1) == [200]
        st = json.loads(ctl_ok(s.config, 'status', '--json'))
        assert st['restart_needed'] == [] and \
            st['restart_needed_since_ms'] is None, st
        text = open(s.config).read()
        rewrite(s.config, text.replace(f'ports = {port}', f'ports = {port} 1'))
        time.sleep(RELOAD_S)
        assert s.get().status == 200
        assert 'restart_needed="ports"' in s.server.stderr_text()
        st = json.loads(ctl_ok(s.config, 'status', '--json'))
        assert st['restart_needed'] == ['ports'], st
        assert abs(st['restart_needed_since_ms'] - time.time() * 1000) < 30000, st
        out = ctl_ok(s.config, 'status')
        assert re.search(r'^restart:\s+a reload \S+ ago changed ports: the '
                         r'servers keep the old value until they are '
                         r'restarted$', out, re.M), out
    finally:
        s.stop(unlink=False)
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 10/m\n', port=port,
                 shm=shm)
    try:
        assert F.codes(s, 1) == [200]
        st = json.loads(ctl_ok(s.config, 'status', '--json'))
        assert st['restart_needed'] == [], st
        assert 'restart:' not in ctl_ok(s.config, 'status')
    finally:
        s.stop()


def ctl_ok(config, *args):
    p = subprocess.run([os.path.join(REPO, "build", "rlshimctl"), '-c', config, *args], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 0, p
    return p.stdout


def stop_with_agent(s, redis, log):
    """Stop a server, its Redis and the agent its shim started."""
    s.stop()
    redis.stop()
    subprocess.run(['pkill', '-f', f'rlshimd.*{s.config}'])
    try:
        os.unlink(log)
    except FileNotFoundError:
        pass


def agent_restarts():
    """rlshimd, started by the shim for [redis], restarts itself on a
    changed file (a new pid, the new sync interval); the server goes on
    answering throughout."""
    import test_redis as R
    redis = R.Redis()
    conf = (f'[redis]\nurl = redis://127.0.0.1:{redis.port}/0\n'
            'sync_interval = 50ms\n'
            '[limit:books]\nmatch = GET /books\nrate = 600/m\n')
    s = F.Legacy(conf)
    log = servers.agent_log(s.shm)
    try:
        assert s.get().status == 200
        assert wait_for(lambda: os.path.exists(log) and
                        'agent started' in open(log).read(), 10)
        text = open(s.config).read().replace('sync_interval = 50ms',
                                             'sync_interval = 80ms')
        rewrite(s.config, text)

        def restarted():
            t = open(log).read()
            return 'sync_interval=80ms' in t
        statuses = []
        deadline = time.monotonic() + 10
        while not restarted() and time.monotonic() < deadline:
            statuses.append(s.get().status)
            time.sleep(0.05)
        assert restarted(), open(log).read()
        t = open(log).read()
        assert 'restarting on the changed configuration' in t, t
        pids = re.findall(r'pid=(\d+) msg="agent started"', t)
        assert len(pids) == 2 and pids[0] == pids[1], pids  # exec: same pid
        assert set(statuses) <= {200}, statuses
        assert s.get().status == 200
    finally:
        stop_with_agent(s, redis, log)


def definitions_exhausted():
    """A segment holds 64 rules (names, with their algorithm) over its
    life: a reload that renames 40 of 41 needs more, and is refused by the
    servers and by rlshimd alike, each saying why; both keep the rules in
    force (the agent keeps running, rather than restart into a
    configuration it cannot serve)."""
    import test_redis as R
    redis = R.Redis()
    rules = ''.join(f'[limit:r{i}]\nmatch = GET /r{i}\nrate = {{rate}}\n'
                    for i in range(40))
    conf = (f'[redis]\nurl = redis://127.0.0.1:{redis.port}/0\n'
            '[limit:books]\nmatch = GET /books\nrate = 2/m\n' + rules)
    s = F.Legacy(conf.replace('{rate}', '100/s'))
    log = servers.agent_log(s.shm)
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        assert wait_for(lambda: os.path.exists(log) and
                        'agent started' in open(log).read(), 10)
        text = open(s.config).read().replace('[limit:r', '[limit:s')
        rewrite(s.config, text)
        time.sleep(RELOAD_S)
        # Still the old rules (the books bucket kept its state).
        assert F.codes(s, 2) == [429, 429]
        time.sleep(1.2)  # the agent looks once a second
        err = s.server.stderr_text()
        want = 'the segment holds 64 rules already'
        assert err.count(want) == 1, err[-2000:]
        t = open(log).read()
        assert want in t, t
        assert 'restarting' not in t, t
        assert t.count('agent started') == 1, t
    finally:
        stop_with_agent(s, redis, log)


def denials_summarised():
    """A client hammering a limited rule gets its 429s, and the log says
    so in one line for the rule and interval, with the exact count; not a
    line per denial."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 1/m\n'
                 '[limit:sms]\nmatch = POST /sms\nrate = 1/m\n')
    try:
        got = F.codes(s, 60)
        denied = got.count(429)
        assert got[0] == 200 and denied == 59, got
        # Within the interval nothing is logged per request.
        err = s.server.stderr_text()
        assert err.count('requests denied') <= 1, err
        time.sleep(10.2)
        assert s.get('/other').status == 404  # a request: the next tick
        err = s.server.stderr_text()
        lines = [ln for ln in err.splitlines() if 'requests denied' in ln]
        assert 1 <= len(lines) <= 2, lines
        assert all('rule=books' in ln for ln in lines), lines
        total = sum(int(re.search(r'count=(\d+)', ln).group(1))
                    for ln in lines)
        assert total == denied, (total, denied, lines)
    finally:
        s.stop()


def syslog():
    """log = syslog: the shim's lines go to the syslog socket, logfmt after
    the usual syslog header, with the rlshim identity."""
    require_root('binding the syslog socket /dev/log')
    N[0] += 1
    d = os.path.join(TMP, f'syslog{N[0]}')
    os.makedirs(d)
    port = servers.free_port()
    shm = f'rlshim-reload-{os.getpid()}-{N[0]}'
    config = os.path.join(d, 'rlshim.conf')
    with open(config, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\nlog = syslog\n'
                '[limit:books]\nmatch = GET /books\nrate = 1/m\n')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    env = dict(os.environ, LD_PRELOAD=SHIM, RLSHIM_CONFIG=config)
    argv = [os.path.join(REPO, 'build', 'legacy_server'), '-p', str(port)]
    if os.path.exists('/dev/log'):
        # A syslog daemon has it: ours is mounted over it, in a mount
        # namespace of the server's own.
        path = os.path.join(d, 'log')
        argv = ['unshare', '-m', 'sh', '-c',
                f'mount --bind {path} /dev/log && exec "$@"', 'sh'] + argv
    else:
        path = '/dev/log'
    sock.bind(path)
    sock.settimeout(10)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: servers._listeners(port), 10)
        for _ in range(3):
            one(port)
        msgs = []
        while not any('limiting' in m for m in msgs):
            msgs.append(sock.recv(4096).decode())
        m = [x for x in msgs if 'limiting' in x][0]
        assert re.match(r'<\d+>.*rlshim\[\d+\]: level=info msg="limiting" '
                        rf'config="{re.escape(config)}"', m), m
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert b'msg="limiting"' not in err, err  # not on stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        os.unlink(path)
        try:
            os.unlink(f'/dev/shm/{shm}')
        except FileNotFoundError:
            pass



TESTS = [reload_under_load, invalid_file_kept, unchanged_rules_keep_state,
         touched_file_is_no_reload, new_process_keeps_rules,
         emptied_file_refused, restart_needed, restart_needed_status,
         agent_restarts,
         definitions_exhausted, denials_summarised, syslog]

if __name__ == '__main__':
    sys.exit(run('reload', [(t.__name__, t) for t in TESTS]))
