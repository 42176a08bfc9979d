#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_servers.py KIND - the shim in front of a real, unmodified server.

KIND is one of legacy, python, nginx, lighttpd, busybox, apache, webfs, h2o,
nginx-proxy, apache-proxy, php, php-router (PHP's built-in server, php -S),
gunicorn and gunicorn-gthread (servers.py starts them; apache-prefork and
apache-worker are apache with that MPM instead of Debian's event). Each
scenario asserts what a client sees, and
where the server keeps an access log, what reached the application. One
server per run, one configuration with a rule per scenario (each its own
budget).
"""
import datetime
import email.utils
import os
import random
import re
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SHIM, chunked, connect, exchange, parse_responses,  # noqa: E402
                     recv_all, request, run, statuses, wait_for)
import servers  # noqa: E402

# One rule per scenario, each its own budget: (name, rate, key). A rule
# matches * /t/<name>; key None is the default, the client's address.
RULES = [
    ('five', '5/m', None),
    ('keep', '5/m', None),
    ('pipe', '5/m', None),
    ('split', '1/m', 'header:X-Key'),
    ('drip', '1/m', 'header:X-Key'),
    ('head', '1/m', None),
    ('v10', '1/m', None),
    ('xff', '1/m', None),
    ('v6', '1/m', None),
    ('workers', '20/m', None),
    # issue 26 (servers2): h2c, for h2o
    ('h2', '1/m', None),
]

CONFIG = """\
[global]
ports = {port}
shm = {shm}
trusted_proxies = 127.0.0.1/32
client_ip_header = X-Forwarded-For
""" + ''.join(f"\n[limit:{name}]\nmatch = * /t/{name}\nrate = {rate}\n"
              + (f"key = {key}\n" if key else '')
              for name, rate, key in RULES)


# apache-MPM: the apache kind with that MPM module.
APACHE_MPM = {'apache': 'event', 'apache-prefork': 'prefork',
              'apache-worker': 'worker'}


class Env:
    def __init__(self, kind):
        self.kind = kind
        real = 'apache' if kind in APACHE_MPM else kind
        self.dir = tempfile.mkdtemp(prefix=f'rlshim-it-{kind}-')
        self.shm = f'rlshim-it-{kind}-{os.getpid()}'
        self.port = servers.free_port()
        self.config = os.path.join(self.dir, 'rlshim.conf')
        with open(self.config, 'w') as f:
            f.write(CONFIG.format(port=self.port, shm=self.shm))
        self.echo = None
        echo_port = None
        if real in ('nginx', 'lighttpd', 'apache') or \
                real == 'h2o':  # issue 26 (servers2): h2o proxies /echo too
            # The proxies forward /echo to a legacy_server without the shim:
            # the body the client gets back is what the proxied server read.
            echo_port = servers.free_port()
            self.echo = servers.Server('legacy', os.path.join(self.dir, 'echo'),
                                       None, None, echo_port)
            os.makedirs(self.echo_dir(), exist_ok=True)
            self.echo.start()
        wd = os.path.join(self.dir, 'server')
        os.makedirs(wd, exist_ok=True)
        extra = {}
        if real == 'apache':
            extra['apache_mpm'] = APACHE_MPM[kind]
        self.server = servers.Server(real, wd, SHIM, self.config, self.port,
                                     echo_port, **extra)
        self.server.start()

    def echo_dir(self):
        return os.path.join(self.dir, 'echo')

    def has(self, feature):
        return feature in self.server.features

    def log(self, prefix):
        """Access-log entries for targets starting with `prefix`."""
        return [e for e in self.server.access_log()
                if (e.get('target') or '').startswith(prefix)]

    def close(self):
        self.server.stop()
        if self.echo:
            self.echo.stop()
        try:
            os.unlink(f'/dev/shm/{self.shm}')
        except FileNotFoundError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def one(env, raw, family=socket.AF_INET, method='GET'):
    """One request on its own connection; the first response."""
    rs = parse_responses(exchange(env.port, raw, family), [method],
                         first_only=True)
    assert rs, 'no response'
    return rs[0]


def assert_429(r, version='HTTP/1.1'):
    assert r.status == 429, r
    assert r.version == version, r
    assert r.headers.get('retry-after', '0') != '0', r.headers
    assert int(r.headers['retry-after']) >= 1
    assert r.headers.get('cache-control') == 'no-store'
    assert r.headers.get('connection') == 'close'
    # Date (RFC 9110 6.6.1), IMF-fixdate, the time of the answer.
    date = r.headers.get('date', '')
    assert re.fullmatch(r'\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT', date), \
        r.headers
    when = email.utils.parsedate_to_datetime(date).timestamp()
    assert abs(when - time.time()) < 5, (date, time.time())


# ---- scenarios ------------------------------------------------------------------

def exact_count(env):
    """A 5/min rule admits exactly 5 of 8; the application sees 5."""
    got = [one(env, request('GET', '/t/five')) for _ in range(8)]
    assert statuses(got).count(429) == 3, statuses(got)
    assert [r.status != 429 for r in got] == [True] * 5 + [False] * 3
    assert_429(got[-1])
    assert got[-1].headers['ratelimit-limit'] == '5'
    assert got[-1].headers['ratelimit-remaining'] == '0'
    if env.has('access_log'):
        assert wait_for(lambda: len(env.log('/t/five')) >= 5)
        time.sleep(0.2)
        assert len(env.log('/t/five')) == 5, env.log('/t/five')


def keepalive(env):
    """On one kept-alive connection: 5 answered by the server, then the
    shim's 429 and the end of the connection."""
    s = connect(env.port)
    got = []
    try:
        for _ in range(6):
            s.sendall(request('GET', '/t/keep', close=False))
            head = b''
            while b'\r\n\r\n' not in head:
                b = s.recv(1)
                assert b, f'closed early after {len(got)} responses'
                head += b
            r = parse_responses(head, ['HEAD'])[0]
            n = int(r.headers.get('content-length', '0'))
            body = b''
            while len(body) < n:
                body += s.recv(n - len(body))
            got.append(r.status)
        assert got[:5].count(429) == 0 and got[5] == 429, got
        assert recv_all(s) == b'', 'connection still open after the 429'
    finally:
        s.close()


def pipelined(env):
    """8 requests in one write: the server answers the 5 allowed, then the
    429 follows and the connection ends."""
    batch = b''.join(request('GET', '/t/pipe', close=False) for _ in range(8))
    rs = parse_responses(exchange(env.port, batch))
    codes = statuses(rs)
    assert codes[:5].count(429) == 0, codes
    assert codes[5:] == [429], codes
    if env.has('access_log'):
        assert wait_for(lambda: len(env.log('/t/pipe')) >= 5)
        time.sleep(0.2)
        assert len(env.log('/t/pipe')) == 5


def split_everywhere(env):
    """A head split in two at every byte position is counted once and
    limited: per position, a fresh key passes once and is denied after."""
    base = request('GET', '/t/split', {'X-Key': 'k000'})
    for cut in range(1, len(base)):
        raw = base.replace(b'k000', f'k{cut:03d}'.encode())
        for attempt in range(2):
            rs = parse_responses(exchange(env.port, [raw[:cut], raw[cut:]],
                                          gap=0.003))
            assert rs, f'no answer for a head split at {cut}'
            if attempt == 0:
                assert rs[0].status != 429, (cut, rs)
            else:
                assert rs[0].status == 429, (cut, rs)
    if env.has('access_log'):
        time.sleep(0.2)
        assert len(env.log('/t/split')) == len(base) - 1


def drip(env):
    """One byte per write: still framed, counted and limited."""
    raw = request('GET', '/t/drip', {'X-Key': 'drip'})
    for attempt in range(2):
        rs = parse_responses(exchange(env.port, [raw[i:i + 1] for i in range(len(raw))],
                                      gap=0.002))
        assert rs and (rs[0].status == 429) == (attempt == 1), rs


def bodies(env):
    """1 MiB by Content-Length and a chunked body arrive byte-identical."""
    data = random.Random(7).randbytes(1 << 20)
    rs = parse_responses(exchange(env.port, request('POST', env.server.echo_path, body=data)))
    assert rs[0].status == 200, rs
    assert rs[0].body == data, f'echo differs: {len(rs[0].body)} bytes back'
    if env.has('chunked_echo'):
        raw = request('POST', env.server.echo_path,
                      {'Transfer-Encoding': 'chunked'}, chunked(data, 65536))
        rs = parse_responses(exchange(env.port, raw))
        assert rs[0].status == 200, rs
        assert rs[0].body == data, f'chunked echo differs: {len(rs[0].body)} bytes'


def head_request(env):
    """A denied HEAD gets the 429's headers and no body."""
    one(env, request('HEAD', '/t/head'), method='HEAD')
    raw = exchange(env.port, request('HEAD', '/t/head'))
    r = parse_responses(raw, ['HEAD'])[0]
    assert_429(r)
    assert raw.endswith(b'\r\n\r\n'), 'a body after a HEAD 429'


def http10(env):
    """An HTTP/1.0 request is denied with an HTTP/1.0 status line."""
    one(env, request('GET', '/t/v10', version='HTTP/1.0'))
    r = one(env, request('GET', '/t/v10', version='HTTP/1.0'))
    assert_429(r, 'HTTP/1.0')


def garbage(env):
    """Bytes the shim cannot frame get its 400; the server never sees them."""
    before = len(env.server.access_log()) if env.has('access_log') else 0
    raw = exchange(env.port, b'\x01\x02garbage\r\n\r\n')
    r = parse_responses(raw)[0]
    assert r.status == 400 and b'bad_request' in r.body, raw
    raw = exchange(env.port, b'GET /t/five HTTP/1.1\nHost: x\n\n')
    assert b'bad_request' in raw, raw
    if env.has('access_log'):
        time.sleep(0.2)
        assert len(env.server.access_log()) == before


def tls(env):
    """TLS bytes pass through untouched: whatever the server makes of them,
    the shim neither answers nor limits."""
    hello = bytes.fromhex('16030100a5010000a10303') + bytes(range(32)) + b'\x00' * 64
    raw = exchange(env.port, hello, shut=True)
    assert b'bad_request' not in raw and b'rate_limited' not in raw, raw


def forwarded_for(env):
    """X-Forwarded-For is believed from a trusted proxy only."""
    xff = lambda a: request('GET', '/t/xff', {'X-Forwarded-For': a})  # noqa: E731
    # 127.0.0.1 is trusted: each forwarded client has its own budget.
    assert one(env, xff('203.0.113.7')).status != 429
    assert one(env, xff('203.0.113.7')).status == 429
    assert one(env, xff('203.0.113.8')).status != 429
    # A chain: the rightmost untrusted hop is the client.
    assert one(env, xff('203.0.113.9, 127.0.0.1')).status != 429
    assert one(env, xff('198.51.100.1, 203.0.113.9')).status == 429
    if env.has('ipv6'):
        # ::1 is not trusted: its header is ignored, ::1 is the client.
        assert one(env, xff('203.0.113.20'), socket.AF_INET6).status != 429
        assert one(env, xff('203.0.113.21'), socket.AF_INET6).status == 429


def ipv6(env):
    """::1 and 127.0.0.1 are different clients."""
    assert one(env, request('GET', '/t/v6')).status != 429
    assert one(env, request('GET', '/t/v6')).status == 429
    assert one(env, request('GET', '/t/v6'), socket.AF_INET6).status != 429
    assert one(env, request('GET', '/t/v6'), socket.AF_INET6).status == 429


def workers(env):
    """nginx's two workers (apache's two children, gunicorn's two workers,
    php -S's three processes) share one budget: of 40 parallel requests
    exactly 20 pass, and at least two workers answered some."""
    results = []
    lock = threading.Lock()

    def go():
        r = one(env, request('GET', '/t/workers'))
        with lock:
            results.append(r)
    threads = [threading.Thread(target=go) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r.status != 429]
    assert len(ok) == 20, statuses(results)
    pids = {r.headers.get('x-worker') for r in ok}
    assert 2 <= len(pids) <= env.server.worker_procs, pids


def still_serving(env):
    """After all that, the server still answers and the shim said once,
    per process, which configuration it uses."""
    r = one(env, request('GET', '/books'))
    assert r.status == 200 and b'SICP' in r.body, r
    err = env.server.stderr_text()
    assert 'msg="limiting"' in err, err[-2000:]
    assert f'config="{env.config}"' in err
    # Each of the shim's lines starts with ts=, RFC 3339 UTC with ms.
    lines = [ln for ln in err.splitlines() if 'rlshim level=' in ln]
    assert lines, err[-2000:]
    for ln in lines:
        m = re.match(r'ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z rlshim level=', ln)
        assert m, ln
        when = datetime.datetime.fromisoformat(m.group(1)).replace(
            tzinfo=datetime.timezone.utc).timestamp()
        assert abs(when - time.time()) < 600, ln


# issue 26 (servers2) ------------------------------------------------------------

H2_PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
# What the shim answers a preface with (src/shim: SETTINGS, then GOAWAY
# HTTP_1_1_REQUIRED), as test_diff.py's _OWN_H2.
H2_REFUSAL = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0,
                    0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d])
H2C_UPGRADE = (b'GET /t/h2 HTTP/1.1\r\nHost: x\r\n'
               b'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n'
               b'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n')


def h2_frame(ftype, flags, stream, payload=b''):
    return (len(payload).to_bytes(3, 'big') + bytes([ftype, flags])
            + stream.to_bytes(4, 'big') + payload)


def h2_prior_knowledge(port, paths):
    """The preface, SETTINGS and a GET stream (HPACK: :method GET, :scheme
    http, literal :path and :authority) per path, in one send; then the
    frames read back: [(type, flags, stream)] until every stream has its
    HEADERS, a GOAWAY, the end, or 5 s without a byte; and all bytes."""
    def lit(idx, value):
        return bytes([idx, len(value)]) + value.encode()
    out = H2_PREFACE + h2_frame(4, 0, 0)
    ids = [1 + 2 * i for i in range(len(paths))]
    for sid, path in zip(ids, paths):
        out += h2_frame(1, 0x5, sid, b'\x82\x86' + lit(4, path)
                        + lit(1, f'127.0.0.1:{port}'))
    s = connect(port, timeout=5)
    frames, raw, buf = [], b'', b''
    try:
        s.sendall(out)
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            raw += b
            buf += b
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], 'big'):
                n = int.from_bytes(buf[:3], 'big')
                frames.append((buf[3], buf[4],
                               int.from_bytes(buf[5:9], 'big') & 0x7fffffff))
                buf = buf[9 + n:]
            answered = {sid for t, _, sid in frames if t == 1}
            if any(t == 7 for t, _, _ in frames) or answered >= set(ids):
                break
    finally:
        s.close()
    return frames, raw


def h2c(env):
    """h2o speaks HTTP/2 in cleartext (without the shim, checked first on
    a second, bare h2o: it answers a prior-knowledge stream in HTTP/2 and
    an `Upgrade: h2c` with 101). Under the shim neither is a way around
    the rules: the preface gets the shim's SETTINGS + GOAWAY and no stream
    an answer; the h2c offer is blanked, so h2o answers in HTTP/1.1 and the
    request is counted (the next is 429); nothing reached h2o as HTTP/2."""
    d = os.path.join(env.dir, 'bare-h2o')
    os.makedirs(d)
    bare = servers.Server(env.server.kind, d, None, None, servers.free_port())
    bare.start()
    try:
        frames, raw = h2_prior_knowledge(bare.port, ['/books'])
        assert (1, 1) in {(t, sid) for t, _, sid in frames}, \
            f'bare h2o did not answer HTTP/2 by prior knowledge: {raw[:200]!r}'
        raw = exchange(bare.port, H2C_UPGRADE, shut=True, timeout=5)
        assert raw.startswith(b'HTTP/1.1 101 '), \
            f'bare h2o did not switch to h2c: {raw[:200]!r}'
    finally:
        bare.stop()
    frames, raw = h2_prior_knowledge(env.port, ['/t/h2'] * 3)
    assert raw == H2_REFUSAL, f'the preface was not refused: {raw[:300]!r}'
    r = one(env, H2C_UPGRADE)
    assert r.version == 'HTTP/1.1' and r.status not in (101, 429), r
    assert_429(one(env, H2C_UPGRADE))
    if env.has('access_log'):
        time.sleep(0.2)
        log = env.log('/t/h2')
        assert len(log) == 1, log
        h2 = [ln for ln in open(env.server.access_log_path)
              if 'HTTP/2' in ln]
        assert not h2, h2


SCENARIOS = [exact_count, keepalive, pipelined, split_everywhere, drip,
             bodies, head_request, http10, garbage, tls, forwarded_for,
             ipv6, workers, still_serving]
SCENARIOS.insert(-1, h2c)   # issue 26 (servers2)

# What a scenario needs of the server; one it lacks is not a test for it
# (python's http.server answers HTTP/1.0 and closes: no keep-alive to test).
NEEDS = {keepalive: 'keepalive', pipelined: 'pipelining', bodies: 'echo',
         ipv6: 'ipv6', workers: 'workers'}
NEEDS[h2c] = 'h2c'   # issue 26 (servers2): servers that speak HTTP/2 in clear


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else 'legacy'
    try:
        env = Env(kind)
    except Exception as e:
        print(f'[  FAILED  ] 1 test(s): cannot start {kind}: {e}')
        return 1
    tests = []
    for f in SCENARIOS:
        need = NEEDS.get(f)
        if need and not env.has(need):
            print(f'# {kind}: {f.__name__} does not apply (no {need})')
            continue
        tests.append((f'{kind}: {f.__name__}', lambda f=f: f(env)))
    try:
        return run(f'shim/{kind}', tests)
    finally:
        env.close()


if __name__ == '__main__':
    sys.exit(main())
