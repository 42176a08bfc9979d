#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_features.py - the configuration's features through the shim, each
against legacy_server with a configuration of its own: accept-level rules,
the allow list, dry-run, PROXY protocol v1 and v2, several rules on one
request, header styles, on_error, staying inert, budgets surviving a restart,
unguarded ports, Upgrade, slow and oversized heads.
"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SHIM, check_example, connect, exchange, parse_responses,  # noqa: E402
                     recv_all, refused, request, run)
import servers  # noqa: E402

TMP = tempfile.mkdtemp(prefix='rlshim-features-')
N = [0]


class Legacy:
    """legacy_server under the shim with `conf` (the [global] ports and shm
    lines are added)."""

    def __init__(self, conf, port=None, ports=None, shm=None):
        N[0] += 1
        self.dir = os.path.join(TMP, f's{N[0]}')
        os.makedirs(self.dir)
        self.port = port or servers.free_port()
        self.shm = shm or f'rlshim-ft-{os.getpid()}-{N[0]}'
        self.config = os.path.join(self.dir, 'rlshim.conf')
        head = f'[global]\nports = {ports or self.port}\nshm = {self.shm}\n'
        if conf.startswith('!raw\n'):  # the whole file, {port} filled in
            text = conf[5:].replace('{port}', str(self.port))
        else:
            text = head + conf
        with open(self.config, 'w') as f:
            f.write(text)
        self.server = servers.Server('legacy', self.dir, SHIM, self.config, self.port)
        self.server.start()

    def get(self, path='/books', method='GET', family=socket.AF_INET, headers=None):
        raw = exchange(self.port, request(method, path, headers), family)
        rs = parse_responses(raw, [method], first_only=True)
        return rs[0] if rs else None

    def log(self):
        return self.server.access_log()

    def stop(self, unlink=True):
        self.server.stop()
        if unlink:
            try:
                os.unlink(f'/dev/shm/{self.shm}')
            except FileNotFoundError:
                pass


def served(s, path):
    return [e for e in s.log() if (e.get('target') or '').startswith(path)]


def codes(s, n, path='/books', method='GET', **kw):
    return [s.get(path, method, **kw).status for _ in range(n)]


# ---- accept-level rules ------------------------------------------------------------

def accept_rule():
    """A `match = accept` rule closes the 3rd connection at once, without
    reading; the server keeps accepting the others."""
    s = Legacy('[limit:conn]\nmatch = accept\nrate = 2/m\n')
    try:
        assert s.get().status == 200
        assert s.get().status == 200
        assert refused(s.port), 'a refused connection got an answer'
        # Another client (::1) is another key: still served.
        assert s.get(family=socket.AF_INET6).status == 200
        assert len(served(s, '/books')) == 3
    finally:
        s.stop()


def signal_after_refusal():
    """A blocking server that has just had a connection refused at accept
    still sees the SIGTERM that comes right after: the shim does not block
    in accept again on its behalf (the server gets ECONNABORTED, and its
    loop looks at its flag)."""
    for _ in range(5):
        s = Legacy('[limit:conn]\nmatch = accept\nrate = 1/m\n')
        try:
            assert s.get().status == 200
            assert refused(s.port)
            s.server.proc.send_signal(signal.SIGTERM)
            try:
                s.server.proc.wait(10)
            except subprocess.TimeoutExpired:
                raise AssertionError('the server missed its SIGTERM, blocked '
                                     'in accept') from None
        finally:
            s.stop()


def allow_list():
    """Addresses on the allow list are never limited."""
    s = Legacy('allow = ::1\n[limit:one]\nmatch = *\nrate = 1/m\n'
               '[limit:conn]\nmatch = accept\nrate = 1/m\n')
    try:
        assert codes(s, 6, family=socket.AF_INET6) == [200] * 6
        assert s.get().status == 200
        # 127.0.0.1 is not on it: its second connection is refused.
        assert refused(s.port)
    finally:
        s.stop()


def dry_run():
    """mode = dry-run counts and never denies."""
    s = Legacy('mode = dry-run\n[limit:one]\nmatch = *\nrate = 1/m\n')
    try:
        assert codes(s, 5) == [200] * 5
        assert len(served(s, '/books')) == 5
    finally:
        s.stop()


# ---- PROXY protocol ----------------------------------------------------------------

def proxy_v2(src, dst, sport, dport):
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!HH', sport, dport)
    return (b'\r\n\r\n\x00\r\nQUIT\n' + bytes([0x21, 0x11]) +
            struct.pack('!H', len(body)) + body)


def proxy_protocol():
    """From a trusted load balancer, the PROXY header names the client (v1
    and v2), is stripped before the application, and keys the limit."""
    s = Legacy('trusted_proxies = 127.0.0.1/32\nproxy_protocol = on\n'
               '[limit:one]\nmatch = *\nrate = 1/m\n')
    try:
        v1 = lambda a: f'PROXY TCP4 {a} 127.0.0.1 5555 80\r\n'.encode()  # noqa: E731
        get = request('GET', '/books')
        for hdr in (v1('198.51.100.7'), proxy_v2('198.51.100.8', '127.0.0.1', 6, 80)):
            r = parse_responses(exchange(s.port, hdr + get))[0]
            assert r.status == 200, r
            r = parse_responses(exchange(s.port, hdr + get))[0]
            assert r.status == 429, r
        # A header split over several reads, then the request.
        hdr = v1('198.51.100.9')
        r = parse_responses(exchange(s.port, [hdr[:7], hdr[7:30], hdr[30:] + get], gap=0.01))[0]
        assert r.status == 200, r
        # The application saw plain requests: 3 of them.
        assert len(served(s, '/books')) == 3
        # No PROXY header from the trusted peer: refused, nothing served.
        assert exchange(s.port, get) == b''
        # LOCAL (a health check): keyed by the peer itself.
        local = b'\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00'
        assert parse_responses(exchange(s.port, local + get))[0].status == 200
        # ::1 is not trusted: plain HTTP as usual.
        assert s.get(family=socket.AF_INET6).status == 200
    finally:
        s.stop()


# ---- several rules, styles, windows -------------------------------------------------

def refund():
    """When a later rule denies, the units earlier rules took are given
    back: a denied POST /sms costs the api budget nothing."""
    s = Legacy('[limit:api]\nmatch = *\nrate = 3/m\n'
               '[limit:sms]\nmatch = POST /sms\nrate = 1/m\n')
    try:
        assert s.get('/sms', 'POST').status == 200      # api 2 left
        r = s.get('/sms', 'POST')                        # sms denies
        assert r.status == 429 and r.headers['ratelimit-limit'] == '1', r.headers
        assert codes(s, 3) == [200, 200, 429]            # api had 2 left
    finally:
        s.stop()


def header_styles():
    """headers = ietf and x-ratelimit, as DESIGN.md spells them."""
    s = Legacy('headers = ietf\n[limit:sms]\nmatch = POST /sms\nrate = 3/m\n')
    try:
        codes(s, 3, '/sms', 'POST')
        r = s.get('/sms', 'POST')
        assert r.status == 429
        assert r.headers['ratelimit-policy'] == '"sms";q=3;w=60', r.headers
        assert r.headers['ratelimit'] == f'"sms";r=0;t={r.headers["retry-after"]}'
        assert 'ratelimit-limit' not in r.headers
    finally:
        s.stop()
    s = Legacy('headers = x-ratelimit\n[limit:sms]\nmatch = POST /sms\nrate = 3/m\n')
    try:
        codes(s, 3, '/sms', 'POST')
        now = time.time()
        r = s.get('/sms', 'POST')
        assert r.headers['x-ratelimit-limit'] == '3'
        assert r.headers['x-ratelimit-remaining'] == '0'
        reset = int(r.headers['x-ratelimit-reset'])
        assert now + 50 <= reset <= now + 62, (now, reset)
    finally:
        s.stop()


def windows_and_retry():
    """fixed-window through the shim, and Retry-After is when the next
    request passes."""
    s = Legacy('[limit:fw]\nmatch = * /fw\nrate = 2/s\nalgorithm = fixed-window\n'
               '[limit:tb]\nmatch = * /tb\nrate = 1/s\n')
    try:
        got = codes(s, 4, '/fw')
        assert got.count(200) + got.count(404) in (2, 3, 4) and 429 in got, got
        assert s.get('/tb').status != 429
        r = s.get('/tb')
        assert r.status == 429 and r.headers['retry-after'] == '1', r.headers
        time.sleep(1.0)
        assert s.get('/tb').status != 429
    finally:
        s.stop()


# ---- lifecycle -------------------------------------------------------------------------

def budget_survives_restart():
    """The segment outlives the server: a restarted server keeps budgets."""
    port = servers.free_port()
    conf = '[limit:sms]\nmatch = POST /sms\nrate = 2/m\n'
    s = Legacy(conf, port=port)
    shm = s.shm
    try:
        assert codes(s, 3, '/sms', 'POST') == [200, 200, 429]
    finally:
        s.stop(unlink=False)
    s = Legacy(conf, port=port, shm=shm)
    try:
        assert s.get('/sms', 'POST').status == 429
    finally:
        s.stop()


def unguarded_port():
    """A port not in `ports` is left alone: no limit, no segment, and one
    line in the server's log (per process) that says it accepts outside
    `ports`, so an operator who copied the wrong ports finds out."""
    other = servers.free_port()
    s = Legacy('[limit:one]\nmatch = *\nrate = 1/m\n', ports=other)
    try:
        assert codes(s, 3) == [200] * 3
        assert not os.path.exists(f'/dev/shm/{s.shm}')
        lines = [l for l in s.server.stderr_text().splitlines()
                 if 'rlshim' in l]
        assert len(lines) == 1, lines
        assert 'accepting on a port outside ports' in lines[0], lines
        assert f'port={s.port}' in lines[0] and f'ports={other}' in lines[0], lines
    finally:
        s.stop()


def inert_without_accept():
    """A program that inherits LD_PRELOAD but never accepts (a CGI child, a
    shell) sees no file, no log line, no change."""
    d = os.path.join(TMP, 'inert')
    os.makedirs(d)
    conf = os.path.join(d, 'c.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = rlshim-inert-{os.getpid()}\n[limit:a]\nmatch = *\nrate = 1/m\n')
    env = dict(os.environ, LD_PRELOAD=SHIM, RLSHIM_CONFIG=conf)
    p = subprocess.run(['/bin/sh', '-c', 'echo hello; printf "%s" "$(head -c 5 /etc/hostname)" >/dev/null; cat'],
                       input=b'stdin bytes', capture_output=True, env=env, timeout=10)
    assert p.returncode == 0
    assert p.stdout == b'hello\nstdin bytes', p.stdout
    assert p.stderr == b'', p.stderr
    assert not os.path.exists(f'/dev/shm/rlshim-inert-{os.getpid()}')


def bad_config():
    """A configuration that does not parse: the server says so once, with
    file:line, and by default refuses guarded connections; with on_error =
    passthrough it serves them unlimited."""
    s = Legacy('!raw\n[global]\nports = {port}\n[limit:a]\nrat = 3/m\n')
    try:
        assert refused(s.port)
        err = s.server.stderr_text()
        assert f'{s.config}:4: unknown key' in err, err
        assert err.count('refusing guarded connections') == 1
    finally:
        s.stop()
    s = Legacy('!raw\n[global]\nports = {port}\non_error = passthrough\n'
               '[limit:a]\nrat = 3/m\n')
    try:
        assert codes(s, 3) == [200] * 3
        assert 'passing connections through unlimited' in s.server.stderr_text()
    finally:
        s.stop()


# ---- hostile clients ----------------------------------------------------------------------

def oversized_head():
    """A head over 16 KiB gets the shim's 400; the server never sees it."""
    s = Legacy('[limit:a]\nmatch = *\nrate = 100/m\n')
    try:
        raw = request('GET', '/books', {'X-Big': 'a' * 17000})
        r = parse_responses(exchange(s.port, raw))[0]
        assert r.status == 400 and b'too large' in r.body, r
        r = parse_responses(exchange(s.port, [raw[:8000], raw[8000:]], gap=0.02))[0]
        assert r.status == 400, r
        assert served(s, '/books') == []
    finally:
        s.stop()


def client_gone_mid_head():
    """A client that sends half a head and leaves: the server sees nothing,
    and the next client is served."""
    s = Legacy('[limit:a]\nmatch = *\nrate = 100/m\n')
    try:
        c = connect(s.port)
        c.sendall(b'GET /books HTTP/1.1\r\nHost: x\r\n')
        time.sleep(0.1)
        c.close()
        assert s.get().status == 200
        assert len(served(s, '/books')) == 1
    finally:
        s.stop()


def smuggling():
    """Ways to make the shim and the server disagree on where a request
    ends are all refused before the server sees them."""
    s = Legacy('[limit:a]\nmatch = *\nrate = 100/m\n')
    try:
        attempts = [
            b'POST /echo HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
            b'POST /echo HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd',
            b'POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n',
            b'POST /echo HTTP/1.1\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n',
            b'POST /echo HTTP/1.1\r\nContent-Length : 4\r\n\r\nabcd',
            b'POST /echo HTTP/1.1\r\n Content-Length: 4\r\n\r\nabcd',
            b'POST /echo HTTP/1.1\nContent-Length: 4\n\nabcd',
        ]
        for a in attempts:
            raw = exchange(s.port, a)
            r = parse_responses(raw, first_only=True)[0]
            assert r.status == 400 and b'bad_request' in r.body, (a, raw)
        assert served(s, '/echo') == []
    finally:
        s.stop()


def upgrade():
    """After the application answers 101, the connection is another
    protocol and passes untouched; without a 101, framing goes on."""
    s = Legacy('[limit:a]\nmatch = *\nrate = 3/m\n')
    try:
        # legacy_server does not upgrade: the pipelined requests behind the
        # Upgrade request are still framed and limited.
        up = request('GET', '/books', {'Upgrade': 'websocket', 'Connection': 'Upgrade'},
                     close=False)
        rs = parse_responses(exchange(s.port, up + request('GET', '/books', close=False) * 3))
        assert [r.status for r in rs] == [200, 200, 200, 429], rs
    finally:
        s.stop()
    # A server that does switch protocols, under the shim.
    port = servers.free_port()
    d = os.path.join(TMP, 'ws')
    os.makedirs(d)
    conf = os.path.join(d, 'c.conf')
    shm = f'rlshim-ws-{os.getpid()}'
    with open(conf, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\n[limit:a]\nmatch = *\nrate = 3/m\n')
    code = (
        'import socket\n'
        f's = socket.create_server(("127.0.0.1", {port}))\n'
        'c, _ = s.accept()\n'
        'buf = b""\n'
        'while b"\\r\\n\\r\\n" not in buf: buf += c.recv(100)\n'
        'c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: x\\r\\n\\r\\n")\n'
        'rest = buf.split(b"\\r\\n\\r\\n", 1)[1]\n'
        'while len(rest) < 11:\n'
        '    b = c.recv(100)\n'
        '    if not b: break\n'
        '    rest += b\n'
        'c.sendall(rest)\n'
        'c.close()\n')
    env = dict(os.environ, LD_PRELOAD=SHIM, RLSHIM_CONFIG=conf)
    p = subprocess.Popen(['/usr/bin/python3', '-c', code], env=env,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                c = connect(port)
                break
            except OSError:
                time.sleep(0.05)
        c.sendall(request('GET', '/ws', {'Upgrade': 'x', 'Connection': 'Upgrade'}, close=False))
        time.sleep(0.2)
        c.sendall(b'\x81\x05\x00not http')
        got = recv_all(c)
        c.close()
        assert got.startswith(b'HTTP/1.1 101'), got
        assert got.endswith(b'\x81\x05\x00not http'), got
    finally:
        p.kill()
        p.wait()
        try:
            os.unlink(f'/dev/shm/{shm}')
        except FileNotFoundError:
            pass


def examples():
    """Every example configuration loads: rlshimctl check says ok."""
    ctl = os.path.join(os.path.dirname(SHIM), 'rlshimctl')
    ex = os.path.join(os.path.dirname(os.path.dirname(SHIM)), 'examples')
    names = sorted(n for n in os.listdir(ex) if n.endswith('.conf'))
    assert len(names) >= 4, names
    for n in names:
        p = check_example(ctl, os.path.join(ex, n))
        assert p.returncode == 0 and ': ok,' in p.stdout, (n, p.stdout, p.stderr)
    # and a broken one is refused with file:line
    bad = os.path.join(TMP, 'bad.conf')
    with open(bad, 'w') as f:
        f.write('[limit:a]\nrate = 3/x\n')
    p = subprocess.run([ctl, 'check', bad], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and p.stderr.startswith(f'{bad}:2: bad rate'), p.stderr


# ---- headers_on = all: a declined switch ----------------------------------------

def declined_upgrade_fields():
    """An Upgrade the application declines (legacy_server answers it 200)
    is an answer like any other: with headers_on = all it carries the
    fields, and so do the answers pipelined after it in the same write."""
    s = Legacy('headers_on = all\n[limit:a]\nmatch = *\nrate = 3/m\n')
    try:
        up = request('GET', '/books', {'Upgrade': 'websocket', 'Connection': 'Upgrade'},
                     close=False)
        rs = parse_responses(exchange(s.port, up + request('GET', '/books')))
        assert [r.status for r in rs] == [200, 200], rs
        assert [r.headers.get('ratelimit-remaining') for r in rs] == ['2', '1'], \
            [r.headers for r in rs]
    finally:
        s.stop()


def unframable_head_in_pieces():
    """A head the shim cannot frame passes unchanged, also when its blank
    line's CR ends a write (where the fields would have gone at once): a
    line without a colon, written as "...\\r\\n\\r" then "\\nhi"."""
    port = servers.free_port()
    d = os.path.join(TMP, 'unframable')
    os.makedirs(d)
    conf = os.path.join(d, 'c.conf')
    shm = f'rlshim-unf-{os.getpid()}'
    with open(conf, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\nheaders_on = all\n'
                '[limit:a]\nmatch = *\nrate = 3/m\n')
    head = b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nNo colon here\r\n\r'
    code = (
        'import socket, time\n'
        f's = socket.create_server(("127.0.0.1", {port}))\n'
        'c, _ = s.accept()\n'
        'buf = b""\n'
        'while b"\\r\\n\\r\\n" not in buf: buf += c.recv(100)\n'
        f'c.send({head!r})\n'
        'time.sleep(0.1)\n'
        'c.send(b"\\nhi")\n'
        'c.close()\n')
    env = dict(os.environ, LD_PRELOAD=SHIM, RLSHIM_CONFIG=conf)
    p = subprocess.Popen(['/usr/bin/python3', '-c', code], env=env,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                c = connect(port)
                break
            except OSError:
                time.sleep(0.05)
        c.sendall(request('GET', '/'))
        got = recv_all(c)
        c.close()
        assert got == head + b'\nhi', got
    finally:
        p.kill()
        p.wait()
        try:
            os.unlink(f'/dev/shm/{shm}')
        except FileNotFoundError:
            pass


# ---- a 429 a person can read ------------------------------------------------------

FIREFOX_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'


def browser_429():
    """A browser's Accept gets the 429 as a short HTML page saying when to
    retry, with the same fields; curl's */*, an API client's JSON Accept
    and no Accept get today's JSON; a rule's deny_html and deny_json
    files replace the bodies byte for byte; HEAD gets the page's length
    and no body."""
    page = os.path.join(TMP, 'busy.html')
    doc = os.path.join(TMP, 'busy.json')
    with open(page, 'w') as f:
        f.write('<!doctype html><title>Busy</title><p>Caf\u00e9 full, come back soon.</p>\n')
    with open(doc, 'w') as f:
        f.write('{"error": "slow down", "docs": "https://example.com/limits"}\n')
    s = Legacy('[limit:books]\nmatch = GET /books\nrate = 1/m\n'
               '[limit:api]\nmatch = GET /api*\nrate = 1/m\n'
               f'deny_html = {page}\ndeny_json = {doc}\n')
    try:
        assert s.get('/books').status != 429
        r = s.get('/books', headers={'Accept': FIREFOX_ACCEPT})
        assert r.status == 429, r
        assert r.headers['content-type'] == 'text/html; charset=utf-8', r.headers
        assert int(r.headers['content-length']) == len(r.body), r.headers
        body = r.body.decode()
        assert body.startswith('<!DOCTYPE html>'), body
        retry = int(r.headers['retry-after'])
        want = f'Please try again in {retry} second{"s" if retry != 1 else ""}.'
        assert want in body, (want, body)
        assert r.headers['ratelimit-remaining'] == '0', r.headers
        assert r.headers['cache-control'] == 'no-store', r.headers
        for accept in (None, '*/*', 'application/json', 'application/json, text/html'):
            r = s.get('/books', headers={'Accept': accept} if accept else None)
            assert r.status == 429, (accept, r)
            assert r.headers['content-type'] == 'application/json', (accept, r.headers)
            assert r.body == (b'{"error":{"code":"rate_limited","message":'
                              b'"too many requests"}}'), (accept, r.body)
        r = s.get('/books', 'HEAD', headers={'Accept': FIREFOX_ACCEPT})
        assert r.status == 429 and r.body == b'', r
        assert r.headers['content-type'] == 'text/html; charset=utf-8', r.headers
        assert int(r.headers['content-length']) == len(body.encode()), r.headers
        # the rule's own bodies, as the files have them
        assert s.get('/api/x').status != 429
        r = s.get('/api/x', headers={'Accept': FIREFOX_ACCEPT})
        assert r.status == 429, r
        assert r.headers['content-type'] == 'text/html; charset=utf-8', r.headers
        assert r.body == open(page, 'rb').read(), r.body
        r = s.get('/api/x', headers={'Accept': 'application/json'})
        assert r.status == 429, r
        assert r.headers['content-type'] == 'application/json', r.headers
        assert r.body == open(doc, 'rb').read(), r.body
        assert 'retry-after' in r.headers
        # the application saw one of each, none of the refused
        assert len(served(s, '/books')) == 1 and len(served(s, '/api')) == 1
    finally:
        s.stop()
    # a body file that is not what its key says is refused at load, file:line
    bad = os.path.join(TMP, 'bad.json')
    with open(bad, 'w') as f:
        f.write('{"error": "unterminated"')
    conf = os.path.join(TMP, 'badbody.conf')
    with open(conf, 'w') as f:
        f.write(f'[limit:a]\nmatch = *\nrate = 1/m\ndeny_json = {bad}\n')
    out = subprocess.run([os.path.join(os.path.dirname(SHIM), 'rlshimctl'), '-c', conf,
                          'check'], capture_output=True, text=True)
    assert out.returncode == 1, out
    assert f'{conf}:4: deny_json {bad}: not one JSON value (RFC 8259)' in out.stderr + out.stdout, out


def chromium_429():
    """Headless Chromium, a real browser's Accept and all, shows the 429 as
    the page (its DOM has the heading and when to retry), not raw JSON."""
    exe = shutil.which('chromium')
    if not exe:
        if os.environ.get('CI'):
            raise AssertionError('chromium missing in CI (tools/deps.sh installs it)')
        print('skipped: chromium not installed')
        return
    s = Legacy('[limit:books]\nmatch = GET /books\nrate = 1/m\n')
    prof = tempfile.mkdtemp(prefix='chromium-', dir=TMP)
    try:
        assert s.get('/books').status != 429
        out = subprocess.run([exe, '--headless=new', '--no-sandbox', '--disable-gpu',
                              '--no-first-run', f'--user-data-dir={prof}',
                              '--dump-dom', f'http://127.0.0.1:{s.port}/books'],
                             capture_output=True, text=True, timeout=120)
        dom = out.stdout
        assert '<h1>Too Many Requests</h1>' in dom, (out.returncode, dom, out.stderr[-2000:])
        assert 'Please try again in ' in dom, dom
        assert 'rate_limited' not in dom, dom
        assert len(served(s, '/books')) == 1
    finally:
        s.stop()


def remaining_after_request():
    """headers_on = all on a 1,000,000/s rule: every allowed answer says
    what the client has left after its request (limit - 1) and a Reset of
    at least 1 s, not the whole limit and 0 (the bucket refills in a
    microsecond, and a key used a moment ago counted from its past)."""
    s = Legacy('headers_on = all\n[limit:fast]\nmatch = *\nrate = 1000000/s\n')
    try:
        for _ in range(5):
            r = s.get('/books')
            assert r.status == 200, r
            h = {k.lower(): v for k, v in r.headers.items()}
            assert h['ratelimit-limit'] == '1000000', h
            assert h['ratelimit-remaining'] == '999999', h
            assert int(h['ratelimit-reset']) >= 1, h
    finally:
        s.stop()


TESTS = [examples, accept_rule, signal_after_refusal, allow_list, dry_run, proxy_protocol, refund,
         header_styles, windows_and_retry, budget_survives_restart,
         unguarded_port, inert_without_accept, bad_config, oversized_head,
         client_gone_mid_head, smuggling, upgrade]
TESTS.append(declined_upgrade_fields)
TESTS.append(unframable_head_in_pieces)
TESTS.append(browser_429)
TESTS.append(chromium_429)
TESTS.append(remaining_after_request)


def main():
    try:
        return run('features', [(f'features: {t.__name__}', t) for t in TESTS])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
