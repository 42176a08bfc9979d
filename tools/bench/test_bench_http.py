#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_bench_http.py - bench_http.py's --rules and its user head, without
nginx: the rule list (ip first, unknown or repeated names refused), the
rules' sections, and the token (HS256 over the key file's bytes, sub and a
future exp, ~200 bytes). bench_tls.py's HTTPS mode: nginx's configuration
with and without `ssl`, the counts it takes, its four variants, its tables'
differences and goals, and its TLS clients against a Python HTTPS server
(a certificate made by openssl, skipped without it).

    python3 tools/bench/test_bench_http.py
"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as B  # noqa: E402
import bench_tls as T  # noqa: E402


def check(cond, what):
    if not cond:
        print(f'FAIL: {what}')
        sys.exit(1)


def refused(text):
    try:
        B.parse_rules(text)
    except ValueError:
        return True
    return False


def unb64(s: bytes) -> bytes:
    return base64.urlsafe_b64decode(s + b'=' * (-len(s) % 4))


def test_rules():
    check(B.parse_rules('cookie,jwt') == ['ip', 'cookie', 'jwt'],
          'ip is added first')
    check(B.parse_rules('jwt,ip') == ['ip', 'jwt'], 'ip moved first')
    check(B.parse_rules('ip') == ['ip'], 'ip alone')
    check(refused('ip,cookies'), 'an unknown rule refused')
    check(refused('jwt,jwt'), 'a repeated rule refused')
    sec = B.rule_section('jwt', Path('/tmp/x/jwt.key'))
    check('key = jwt:sub\njwt_secret = /tmp/x/jwt.key\n' in sec and
          'rate = 100000000/s' in sec, 'jwt rule: the secret, never limits')
    check('jwt_secret' not in B.rule_section('jwt-unverified', None),
          'jwt-unverified: no secret')
    check('key = cookie:session_id\n' in B.rule_section('cookie', None),
          'cookie rule')


def test_user_head():
    head = B.head_user(8080)
    check(head.startswith(B.head_small(8080)[:-2]) and
          head.endswith(b'\r\n\r\n'), 'the small head and more fields')
    fields = dict(line.split(b': ', 1) for line in head.split(b'\r\n')[1:]
                  if b': ' in line)
    sid = fields[b'Cookie'].split(b'=', 1)[1]
    check(len(sid) == 32 and all(c in b'0123456789abcdef' for c in sid),
          'session_id is 32 hex')
    tok = fields[b'Authorization'].split(b' ', 1)[1]
    check(180 <= len(tok) <= 240, f'token ~200 bytes ({len(tok)})')
    h, p, s = tok.split(b'.')
    check(json.loads(unb64(h)) == {'alg': 'HS256', 'typ': 'JWT'}, 'header')
    want = hmac.new(B.JWT_SECRET, h + b'.' + p, hashlib.sha256).digest()
    check(unb64(s) == want, 'signed with the key file\'s bytes')
    claims = json.loads(unb64(p))
    check(claims['sub'] == 'user-4711' and
          claims['exp'] > time.time() + 3600 >= claims['iat'] + 3600,
          'sub, iat, exp in the future')
    check(len(B.JWT_SECRET) >= 32, 'a key of 32 bytes or more (RFC 7518)')


def test_nginx_conf():
    root = tempfile.mkdtemp(prefix='test-bench-')
    try:
        plain = B.Nginx(root, 1)
        conf = (plain.work / 'nginx.conf').read_text()
        check(f'listen 127.0.0.1:{plain.port} reuseport;' in conf and
              'ssl' not in conf, 'http: no ssl anywhere')
        tls = B.Nginx(root, 1, tls=(Path('/c/cert.pem'), Path('/c/key.pem')),
                      shim_rule=B.NEVER_LIMITS)
        conf = (tls.work / 'nginx.conf').read_text()
        check(f'listen 127.0.0.1:{tls.port} ssl reuseport;' in conf,
              'https: listen ... ssl')
        check('ssl_certificate /c/cert.pem;\n' in conf and
              'ssl_certificate_key /c/key.pem;\n' in conf and
              'ssl_protocols TLSv1.2 TLSv1.3;' in conf,
              'https: the certificate, its key, TLS 1.3 offered')
        check(f'ports = {tls.port}' in tls.config.read_text(),
              'the shim guards the https port')
    finally:
        shutil.rmtree(root)


def refused_counts(text):
    try:
        T.parse_counts(text, '--requests')
    except ValueError:
        return True
    return False


def test_tls_args():
    check(T.parse_counts('200,1200', 'x') == (200, 1200), 'N1,N2')
    for bad in ('200', '1200,200', '0,10', '5,5', 'a,b', '1,2,3'):
        check(refused_counts(bad), f'counts {bad!r} refused')
    v = T.variants((Path('c'), Path('k')))
    check([(s, k) for s, k, _ in v] ==
          [('http', 'a'), ('http', 'b'), ('https', 'a'), ('https', 'b')],
          'four variants, http first')
    for s, k, kw in v:
        check(('tls' in kw) == (s == 'https'), f'{s} {k}: tls iff https')
        check(kw.get('shim_rule') == (B.NEVER_LIMITS if k == 'b' else None),
              f'{s} {k}: the shim iff b, never limiting')


def test_tls_tables():
    # Ir per request: the shim adds 2,000 in plaintext, 2,500 over TLS.
    tot = {('http', 'a'): 10000, ('http', 'b'): 12000,
           ('https', 'a'): 20000, ('https', 'b'): 22500}
    ad = T.shim_added(tot)
    check(ad['http'] == (2000, 1.2) and ad['https'] == (2500, 1.125),
          'b - a and b / a per scheme')
    check(T.goal_ir(ad) == '**not met** (+500)', 'more over TLS: not met')
    tot[('https', 'b')] = 21900
    check(T.goal_ir(T.shim_added(tot)) == 'met (-100)', 'less: met')
    r = T.row('x', tot, ',.0f')
    check(r == '| x | 10,000 | 12,000 | +2,000 | 20,000 | 21,900 | +1,900 '
          '| -100 |', f'a row: each scheme, b - a, their difference: {r}')
    objs = {'nginx': 9.0, 'libssl.so.3': 5.0, 'libcrypto.so.3': 9.0,
            'librlshim.so': 3.0, 'libc.so.6': 2.0, '???': 1.0}
    g = T.object_groups(objs)
    check(g == {'TLS (libssl + libcrypto)': 14.0, 'nginx': 9.0,
                'librlshim.so': 3.0, 'other (libc, ld.so, ...)': 3.0},
          f'object groups: {g}')
    # System calls: the shim's timed stat is left out of the goal.
    calls = {('http', 'a'): {'read': 1.0, 'newfstatat': 1.0},
             ('http', 'b'): {'read': 1.0, 'newfstatat': 1.012},
             ('https', 'a'): {'read': 2.0, 'newfstatat': 1.0},
             ('https', 'b'): {'read': 2.0, 'newfstatat': 1.014,
                              'recvfrom': 1.0}}
    check(T.per_request_added(calls, 'http') == 0.0, 'timed stat left out')
    check(T.per_request_added(calls, 'https') == 1.0, 'a recvfrom counted')
    check(T.goal_calls(0.001) == 'met' and
          T.goal_calls(1.0) == '**not met** (+1.000)', 'goal +0')
    lines, _ = T.syscalls_section({'small': calls}, 'request')
    check('| small | 2.000 | 2.012 | +0.000 | +0.012 | 3.000 | 4.014 | '
          '**+1.000** | +0.014 | **not met** (+1.000) |' in lines,
          'the system calls summary row')


class _Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def do_GET(self):
        body = b'hello'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_tls_clients():
    if not shutil.which('openssl'):
        print('skip: the TLS clients (no openssl)')
        return
    root = Path(tempfile.mkdtemp(prefix='test-bench-tls-'))
    try:
        cert, key = T.make_cert(root)
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(cert, key)
        srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Answer)
        srv.socket = sctx.wrap_socket(srv.socket, server_side=True)
        seen = []
        real = srv.get_request

        def counted():
            seen.append(1)
            return real()
        srv.get_request = counted
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        port = srv.server_address[1]
        try:
            ctx = T.client_context()
            B.keepalive_client(port, 5, B.head_small(port), ctx, 0.001)
            check(len(seen) == 1, f'5 requests on one connection ({seen})')
            T.client('keepalive', 'browser', 'https', ctx)(port, 3)
            check(len(seen) == 2, 'the browser head on one more')
            T.client('connections', 'ab', 'https', ctx)(port, 3)
            check(len(seen) == 5, '3 connections, a request each')
            with B.connect(port, ctx) as s:
                check(s.version() == 'TLSv1.3' and
                      s.selected_alpn_protocol() is None,
                      'TLS 1.3; http/1.1 offered, the server chose none')
        finally:
            srv.shutdown()
            srv.server_close()
    finally:
        shutil.rmtree(root)


def main():
    test_rules()
    test_user_head()
    test_nginx_conf()
    test_tls_args()
    test_tls_tables()
    test_tls_clients()
    print('ok')


if __name__ == '__main__':
    main()
