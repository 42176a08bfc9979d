#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_diff.py - differential: the same byte streams to each real server
with and without the shim, side by side.

For every server kind (nginx with 2 workers, lighttpd, python's http.server
with --protocol HTTP/1.1, busybox httpd, apache; webfs, h2o, and nginx and
apache as proxies in front of a legacy_server: see KINDS) two servers run at once on
different ports, one with the shim and one without, serving one document
root. Each stream goes to both at the same time, cut into the same 1-8
sends with the same tiny pauses, from a loopback source address of its own
(127.2.x.y), and is compared:

  (a) counted   the shim's rules never limit (`*` 100000/s and `* /secret`
                100000/s, an exact path: it matches /secret/x too), so the shim's allowed count for `*`, read from
                `rlshimctl status --json` before and after the stream, must
                equal the requests the shim server read from that address
                by its own log: every request the server handled was
                counted exactly once, nothing it logged is missing from the
                count. The log is the access log; python's also has a line
                for a handler that raised (no access line then); lighttpd's
                access log leaves out a request the client left in its body,
                so its error log (debug.log-request-header) counts the heads
                it read. A log line with no request line (nginx and lighttpd
                log a 400 for blank lines and then the end) is no request.
                Every answer carrying the secret file must have been counted
                by `* /secret`. At the end the totals of the whole run must
                agree too. A stream starting with a TLS record byte passes
                uncounted by design: then the server may only refuse it.
  (b) same      the bytes each server sends back, with Date, Last-Modified,
                ETag, Expires, nginx's X-Worker (pid) and the servers' ports
                blanked, are the same with and without the shim; except that
                the shim may refuse what it cannot frame for certain: then
                the shim server's stream is the bare server's answers up to
                a response boundary, followed by the shim's own 400 (its
                JSON body) or, for the HTTP/2 preface, its SETTINGS + GOAWAY
                (DESIGN.md: "every stream is counted ... or the connection
                is refused"), and nothing after it. The refused request must
                not have reached the server: the server read only the
                requests answered before it ("refused but logged" if it read
                the refused one too, its head having gone through before its
                body was found bad; "answers lost" if it read more, whose
                answers never came). The shim blanks an `Upgrade: h2c` offer
                (so that no server switches to HTTP/2 uncounted): the bare
                server is sent the stream blanked the same way.

issue 26 adds php -S (docroot mode and with a router script), whose log is
its stderr, and gunicorn with sync and gthread workers (access.log): a
stream the shim charged on a connection php -S closed unanswered as an
"Invalid request" counts as charged, never served; where php -S refused a
read as malformed, bare or under the shim, its answers depend on where the
reads fell and are not compared (the counts are). The php docroot also has
secret.php (it prints SECRET_PHP), and the corpus its PATH_INFO forms
(/secret.php/x): an exact rule `* /secret.php` (script) must count every
answer carrying SECRET_PHP, and `* /secret` every one carrying the file.
EXTRA_RULES and SECRET_MARKS are the per-kind hook for more rules (an
exact `* /secret.php` rule) and for which rule must count which answer.

The streams: a corpus from the request-smuggling literature (CL.TE, TE.CL,
TE.TE obfuscations, repeated and odd Content-Length, chunk-size spellings,
bare LF, obs-fold, NUL and high bytes), every spelling of a path to
/secret, GETs with bodies, HEAD, pipelines of 2-50 with Connection: close
and HTTP/1.0 in them, big heads, the HTTP/2 preface; then random mutations
of those (byte flips, inserted CR/LF/SP/TAB/;/", deletions, duplicated
lines) from a seeded RNG. Most streams half-close after the last send; the
others, and every stream to /echo (nginx and lighttpd proxy it, and give
up on a request whose client half-closed meanwhile as the timing falls),
keep the connection open until the server has been quiet for QUIET, then
half-close.

    python3 tests/integration/test_diff.py               # RL_DIFF_STREAMS=800
    RL_DIFF_STREAMS=5000 RL_DIFF_SEED=random python3 tests/integration/test_diff.py
    python3 tests/integration/test_diff.py nginx apache  # only these kinds
    RL_DIFF_SEED=7 RL_DIFF_ONLY=123,140 python3 tests/integration/test_diff.py
    RL_DIFF_REPLAY="[b'GET / HTTP/1.1\\r\\n', b'\\r\\n']" python3 tests/integration/test_diff.py
        # one stream, as printed by a failure (a list of sends, or bytes)
    RL_SHIM=/other/librlshim.so ...                      # another build

A failure prints the seed, the stream's number, the stream as a Python
bytes literal and its sends, and a shrunk stream that still fails the same
way.
"""
import ast
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, SHIM, TLSConn, run, tls_context  # noqa: E402
import servers  # noqa: E402

CTL = os.path.join(REPO, 'build', 'rlshimctl')
TMP = None          # the work directory, made by main()
STREAMS = int(os.environ.get('RL_DIFF_STREAMS') or 800)
_seed = os.environ.get('RL_DIFF_SEED') or '1'
SEED = random.SystemRandom().randrange(1 << 32) if _seed == 'random' else int(_seed)
ONLY = {int(x) for x in (os.environ.get('RL_DIFF_ONLY') or '').split(',') if x}
REPLAY = os.environ.get('RL_DIFF_REPLAY')
IDLE = 1.0          # s without a byte after a half-close: give up
QUIET = 0.15        # s without a byte before a keep-alive stream half-closes
SETTLE = 2.0        # s at most for a server's log to catch up with the shim
SHRINK_TRIES = 150  # re-runs spent shrinking one failing stream, at most
SHRINK_MAX = 6      # failing streams shrunk per kind, at most ...
SHRINK_SECONDS = float(os.environ.get('RL_DIFF_SHRINK_SECONDS') or 20)
                    # ... and seconds spent shrinking per kind

SECRET = b'secret file 9d2e41: counted by the secret rule\n'
PUB = b'public file\n'
MTIME = 1700000000   # every docroot file's mtime: same Last-Modified

KINDS = ('nginx', 'lighttpd', 'python11', 'busybox', 'apache')
KIND_OF = {'nginx': 'nginx', 'lighttpd': 'lighttpd', 'python11': 'python',
           'busybox': 'busybox', 'apache': 'apache'}
LABEL = {'python11': 'python --protocol HTTP/1.1'}
# issue 26 (servers2): more real servers. For nginx-proxy and apache-proxy
# (nginx and apache with the shim, proxying every path to a legacy_server
# without it, which servers.py starts) the log the counts are held against
# is the proxy's own access log, not the backend's: the shim is loaded into
# the proxy and frames what the proxy's reads return, so the application
# whose reads must each be counted once is the proxy. The proxy refuses
# some requests itself (a 400, a 414) that it read, logged and the shim
# counted, and these never reach the backend; the backend's log has every
# request from 127.0.0.1 (the proxy), so it cannot be split per stream.
# The backend is held to the weaker check that it can: over the whole run
# it read no more requests than the shim counted (Pair.backend_log).
KINDS += ('webfs', 'h2o', 'nginx-proxy', 'apache-proxy')
# Kinds whose log has no line for requests they read and never answered
# (see judge): h2o's access log is written with the answer, and it never
# answers a request whose body the client left unfinished; webfs, on reading
# the client's end of file, closes and drops the pipelined requests it has
# read but not parsed (with and without the shim: how many it answered
# before then depends on when its read sees the end, see dropped_pipeline).
# Neither has a log of the heads it reads (lighttpd's HeadLog).
UNANSWERED_UNLOGGED = {'h2o', 'webfs'}
KIND_OF.update({'webfs': 'webfs', 'h2o': 'h2o', 'nginx-proxy': 'nginx-proxy',
                'apache-proxy': 'apache-proxy'})

# `secret` is an exact path: it also counts every path below it (PATH_INFO,
# issue 26), and each spelling of /secret a server serves the file for.
RULES = ('[limit:all]\nmatch = *\nrate = 100000/s\n'
         '[limit:secret]\nmatch = * /secret\nrate = 100000/s\n')

# issue 26: PHP's built-in server (docroot mode, and with a router script)
# and gunicorn (sync and gthread workers, fixtures/wsgi_app.py)
KINDS += ('php', 'php-router', 'gunicorn', 'gunicorn-gthread')
KIND_OF.update({'php': 'php', 'php-router': 'php-router',
                'gunicorn': 'gunicorn', 'gunicorn-gthread': 'gunicorn-gthread'})
PHP_KINDS = ('php', 'php-router')
# Servers that never replace a process that died: php -S (its worker, or
# its first process, which serves too) and webfs (one process). webfs 1.21
# also corrupts its heap on a long pipeline kept open ("pipeline 50, no
# close"): bare, it dies of it (munmap_chunk(): invalid pointer); under the
# shim, which hands it the same bytes in other reads, it lives on but
# answers a later connection's request 400 unlogged. So when such a stream
# kills the bare webfs, the one under the shim is started afresh too.
RESTARTED_KINDS = PHP_KINDS + ('webfs',)
FRESH_TWIN_KINDS = ('webfs',)
# The php kinds' docroot also has secret.php, a script that prints this.
SECRET_PHP = b'secret script 5b7c03: counted by the secret rules\n'
# Per kind: configuration appended to RULES for its shim server (every rule
# 100000/s: none may limit), and which answers must have been counted by
# which rules: (bytes, rule names), every answer carrying the bytes counted
# by each rule named. The hook for rules of one kind: an exact
# `* /secret.php` rule (which also matches the PATH_INFO forms below it,
# /secret.php/x) goes into EXTRA_RULES['php'] and its name next to
# 'secret' in SECRET_MARKS['php'].
EXTRA_RULES = {k: '' for k in KINDS}
SECRET_MARKS = {k: ((SECRET, ('secret',)),) for k in KINDS}
for _k in PHP_KINDS:
    EXTRA_RULES[_k] = '[limit:script]\nmatch = * /secret.php\nrate = 100000/s\n'
    SECRET_MARKS[_k] = ((SECRET, ('secret',)), (SECRET_PHP, ('script',)))

# issue 27: `--tls`, the same streams over TLS, to the servers that
# terminate TLS themselves as test_tls.py starts them (test_tls.tls_server:
# nginx `ssl http2`, apache mod_ssl + mod_http2 in both MPMs, lighttpd
# mod_openssl, python's http.server wrapped with ssl, HTTP/1.1), bare and
# under the shim, which then frames the plaintext through libssl. The
# client offers no ALPN (HTTP/1.1, as the plaintext streams are) and sends
# each piece of a stream as an SSL write of its own, so that the records,
# and the server's SSL_reads, are cut where the plaintext streams are; its
# half-close is a close_notify, then the TCP half-close (harness.TLSConn).
# Judged as in cleartext, but for a stream starting with a TLS record byte:
# inside TLS it is bytes like any, which the shim frames (and refuses).
TLS_OF = {'nginx-tls': 'nginx', 'lighttpd-tls': 'lighttpd',
          'python11-tls': 'python', 'apache-tls': 'apache',
          'apache-prefork-tls': 'apache-prefork'}
TLS_KINDS = tuple(TLS_OF)
# the plaintext kind each stands beside (its name on the command line)
TLS_BASE = {'nginx-tls': 'nginx', 'lighttpd-tls': 'lighttpd',
            'python11-tls': 'python11', 'apache-tls': 'apache',
            'apache-prefork-tls': 'apache-prefork'}
for _k in TLS_KINDS:
    KIND_OF[_k] = 'apache' if TLS_OF[_k].startswith('apache') else TLS_OF[_k]
    LABEL[_k] = LABEL.get(TLS_BASE[_k], TLS_BASE[_k]) + ' over TLS'
    EXTRA_RULES[_k] = ''
    SECRET_MARKS[_k] = ((SECRET, ('secret',)),)
CERT = None         # (cert, key, both) for the TLS kinds, made by main()


# ---- the corpus -------------------------------------------------------------------

H = b'Host: t\r\n'


def rq(method=b'GET', target=b'/books', headers=b'', body=b'',
       version=b'HTTP/1.1', host=True):
    return (method + b' ' + target + b' ' + version + b'\r\n'
            + (H if host else b'') + headers + b'\r\n' + body)


def get(target=b'/books', extra=b'', close=False, version=b'HTTP/1.1'):
    return rq(b'GET', target, extra + (b'Connection: close\r\n' if close else b''),
              version=version)


def post(target, body, headers=b''):
    return rq(b'POST', target, headers, body)


def chunk(data, ext=b''):
    return b'%x' % len(data) + ext + b'\r\n' + data + b'\r\n'


LAST = b'0\r\n\r\n'
PATHS = (b'/secret', b'/%73ecret', b'/%73%65%63%72%65%74', b'/./secret',
         b'/x/../secret', b'//secret', b'///secret', b'/secret/.',
         b'/secret/', b'/secret%2F', b'/secret%2f', b'/%2e%2e/secret',
         b'/x/%2e%2e/secret', b'/x/%2E%2E/secret', b'/x/..%2fsecret',
         b'/x%2f..%2fsecret', b'/.%2e/secret', b'/%2e/secret',
         b'/secret?x=1', b'/secret;x=1', b'/SECRET', b'/Secret',
         b'/secret%00', b'/secret%20', b'/secret.', b'/secret%2e',
         b'/s%65cret', b'/%253cret', b'/x/./../secret', b'/x/y/../../secret',
         b'/secret/x/..', b'/secret/..', b'/x/..', b'/..', b'/../secret',
         b'/x\\..\\secret', b'\\secret', b'secret', b'*',
         b'http://t/secret', b'HTTP://t/%73ecret', b'http://t//secret',
         b'/' + b'a' * 300 + b'/../secret',
         b'/' + b'x/' * 400 + b'../' * 400 + b'secret',
         b'/' + b'x/' * 800 + b'../' * 800 + b'secret',
         b'/x/' + b'%2e%2e/' * 3 + b'secret', b'/%2e%2e%2fsecret',
         b'/secret#frag', b'/x#/../secret', b'/secret\xa0', b'/secret\x85',
         b'/secr\xc3\xa9t', b'/books', b'/pub', b'/x/', b'/x', b'/',
         # below the exact path: counted by it, whatever the server does
         b'/secret/x', b'/secret/x/y', b'/secret%2Fx', b'/%73ecret/x',
         b'/x/../secret/x')

# issue 26: secret.php (the php kinds' docroot) and its PATH_INFO forms
PHP_PATHS = (b'/secret.php', b'/secret.php/', b'/secret.php/x',
             b'/secret.php/x/y', b'/secret.php/x?q=1', b'/secret.php?x=1',
             b'/%73ecret.php/x', b'/secret%2ephp/x', b'/secret.ph%70/x',
             b'/secret.php%2fx', b'/secret.php%2Fx', b'//secret.php/x',
             b'/./secret.php/x', b'/x/../secret.php/x', b'/x/%2e%2e/secret.php/x',
             b'/secret.php/../secret.php/x', b'/secret.php/x/..',
             b'/secret.php/x/../..', b'/secret.php;x', b'/secret.php;x/y',
             b'/SECRET.php/x', b'/secret.PHP/x', b'/secret.php%00/x',
             b'/secret.php%20/x', b'/secret.php./x', b'/x/secret.php/x',
             b'http://t/secret.php/x', b'/secret.php/x%2f..%2f..',
             b'/secret.php//x', b'/pub.php/x')

TE_SPELLINGS = (
    b'Transfer-Encoding: chunked\r\n',
    b'Transfer-Encoding : chunked\r\n',
    b'Transfer-Encoding:chunked\r\n',
    b'Transfer-Encoding:\tchunked\r\n',
    b'Transfer-Encoding: xchunked\r\n',
    b'Transfer-Encoding: chunked, identity\r\n',
    b'Transfer-Encoding: identity, chunked\r\n',
    b'Transfer-Encoding: chunked,\r\n',
    b'Transfer-Encoding: ,chunked\r\n',
    b'Transfer-Encoding: CHUNKED\r\n',
    b'Transfer-Encoding: "chunked"\r\n',
    b'Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n',
    b'Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n',
    b'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n',
    b'Transfer-Encoding: chunked \r\n',
    b'Transfer-Encoding:\x0bchunked\r\n',
    b'Transfer-Encoding: \x00chunked\r\n',
    b'Transfer-Encoding\r\n : chunked\r\n',
    b'X: y\r\n Transfer-Encoding: chunked\r\n',
    b'X: y\nTransfer-Encoding: chunked\r\n',
    b'Transfer-Encoding: chunked\n',
    b'Transfer_Encoding: chunked\r\n',
    b'Transfer-Encoding: gzip, chunked\r\n',
    b'Transfer-Encoding: identity\r\n',
    b'Transfer-Encoding: cow\r\n',
    b'transfer-encoding: chunked\r\n',
    b'Transfer-\xc9ncoding: chunked\r\n',
)

CL_SPELLINGS = (b'5', b'005', b'+5', b'-5', b' 5', b'5 ', b'5\t', b'0x5',
                b'5.0', b'5e0', b'5, 5', b'5,5', b'5, 6', b'', b'abc',
                b'99999999999999999999', b'18446744073709551621', b'\x005',
                b'5\x00', b'\xff5')

CHUNK_SIZES = (b'5', b'05', b'0005', b'000000000000000000005', b'A', b'a',
               b'0x5', b'5;ext=1', b'5 ;ext=1', b'5;ext="q;x"', b'5;', b'5 ',
               b'5\t', b'-5', b'+5', b' 5', b'5;e\x00', b'5;\xff',
               b'ffffffffffffffffff5', b'5\n')


def corpus():
    """(name, bytes): the hand-written streams, before any mutation."""
    c = []
    add = lambda name, data: c.append((name, data))  # noqa: E731
    body5 = b'hello'
    smug = get(b'/secret')
    # plain requests, the controls
    add('GET /books', get())
    add('GET /books close', get(close=True))
    add('GET /books HTTP/1.0', get(version=b'HTTP/1.0'))
    add('HEAD /books', rq(b'HEAD', b'/books'))
    add('HEAD /secret', rq(b'HEAD', b'/secret'))
    add('OPTIONS *', rq(b'OPTIONS', b'*'))
    add('get /books (lower case)', rq(b'get', b'/books'))
    add('CONNECT', rq(b'CONNECT', b't:80'))
    add('no Host', rq(host=False))
    add('two Host', rq(headers=H))
    add('HTTP/0.9', b'GET /books\r\n')
    add('HTTP/1.2', get(version=b'HTTP/1.2'))
    add('HTTP/2.0 request line', get(version=b'HTTP/2.0'))
    add('HTTP/1.10', get(version=b'HTTP/1.10'))
    add('http/1.1 lower', get(version=b'http/1.1'))
    add('double space', b'GET  /books HTTP/1.1\r\n' + H + b'\r\n')
    add('tab separator', b'GET\t/books HTTP/1.1\r\n' + H + b'\r\n')
    add('trailing space', b'GET /books HTTP/1.1 \r\n' + H + b'\r\n')
    add('leading CRLF', b'\r\n' + get())
    add('leading CRLF x3', b'\r\n\r\n\r\n' + get())
    add('leading LF', b'\n' + get())
    add('leading SP', b' ' + get())
    add('empty', b'')
    add('just CRLF', b'\r\n\r\n')
    add('garbage', b'\x16\x03\x01\x00\x05hello')
    add('incomplete head', b'GET /secret HTTP/1.1\r\n' + H)
    add('incomplete line', b'GET /secret HTT')
    # every spelling of /secret, as HTTP/1.1 and in a pipeline
    for p in PATHS:
        add(f'path {p[:40]!r}', get(p))
    add('paths pipelined', b''.join(get(p) for p in PATHS[:20]) + get(close=True))
    add('paths pipelined HTTP/1.0 last', b''.join(get(p) for p in PATHS[20:40])
        + get(b'/secret', version=b'HTTP/1.0'))
    # CL.TE, TE.CL, TE.TE
    add('CL.TE', post(b'/echo', b'0\r\n\r\n' + smug,
                      b'Content-Length: %d\r\nTransfer-Encoding: chunked\r\n'
                      % (5 + len(smug))))
    add('TE.CL', post(b'/echo', b'%x\r\n' % len(smug) + smug + b'\r\n' + LAST,
                      b'Content-Length: 4\r\nTransfer-Encoding: chunked\r\n'))
    add('CL.CL different', post(b'/echo', body5 + smug,
                                b'Content-Length: 5\r\nContent-Length: %d\r\n'
                                % (5 + len(smug))))
    add('CL.CL same', post(b'/echo', body5, b'Content-Length: 5\r\n'
                           b'Content-Length: 5\r\n') + smug)
    for te in TE_SPELLINGS:
        body = chunk(body5) + LAST + smug
        add(f'TE {te[:36]!r}', post(b'/echo', body, te))
        add(f'TE+CL {te[:32]!r}', post(b'/echo', body, te
                                       + b'Content-Length: 3\r\n'))
    for cl in CL_SPELLINGS:
        add(f'CL {cl!r}', post(b'/echo', body5 + smug,
                               b'Content-Length: ' + cl + b'\r\n'))
    add('Content-Length : 5', post(b'/echo', body5 + smug,
                                   b'Content-Length : 5\r\n'))
    add('CL 0 then body', post(b'/echo', smug, b'Content-Length: 0\r\n'))
    add('CL short body, then EOF', post(b'/echo', b'he', b'Content-Length: 5\r\n'))
    for cs in CHUNK_SIZES:
        add(f'chunk size {cs!r}', post(b'/echo', cs + b'\r\n' + body5 + b'\r\n'
                                       + LAST + smug,
                                       b'Transfer-Encoding: chunked\r\n'))
    add('chunked with trailer', post(b'/echo', chunk(body5) + b'0\r\nX-T: 1\r\n\r\n'
                                     + smug, b'Transfer-Encoding: chunked\r\n'))
    add('chunked, bare LF after data', post(b'/echo', b'5\r\nhello\n0\r\n\r\n'
                                            + smug, b'Transfer-Encoding: chunked\r\n'))
    add('chunked, data longer than size', post(b'/echo', b'3\r\nhello\r\n'
                                               + LAST + smug,
                                               b'Transfer-Encoding: chunked\r\n'))
    add('chunked, no last chunk then EOF', post(b'/echo', chunk(body5),
                                                b'Transfer-Encoding: chunked\r\n'))
    add('chunked, many small chunks', post(b'/echo', b''.join(
        chunk(bytes([65 + i % 26])) for i in range(200)) + LAST + get(close=True),
        b'Transfer-Encoding: chunked\r\n'))
    add('chunked HTTP/1.0', post(b'/echo', chunk(body5) + LAST,
                                 b'Transfer-Encoding: chunked\r\n').replace(
                                     b'HTTP/1.1', b'HTTP/1.0', 1))
    # bare LF, obs-fold, NUL and high bytes
    add('bare LF everywhere', b'GET /secret HTTP/1.1\nHost: t\n\n')
    add('bare LF request line', b'GET /secret HTTP/1.1\nHost: t\r\n\r\n')
    add('bare LF header', b'GET /secret HTTP/1.1\r\nHost: t\nX: y\r\n\r\n')
    add('bare LF end of head', b'GET /secret HTTP/1.1\r\nHost: t\r\n\n')
    add('bare CR', b'GET /secret HTTP/1.1\r\nHost: t\rX: y\r\n\r\n')
    add('obs-fold', get(b'/secret', b'X-A: a\r\n b\r\n'))
    add('obs-fold tab', get(b'/secret', b'X-A: a\r\n\tb\r\n'))
    add('obs-fold first line', b'GET /secret HTTP/1.1\r\n Host: t\r\n\r\n')
    add('NUL in name', get(b'/secret', b'X-\x00: a\r\n'))
    add('NUL in value', get(b'/secret', b'X-A: a\x00b\r\n'))
    add('NUL in target', get(b'/sec\x00ret'))
    add('high byte in name', get(b'/secret', b'X-\xff: a\r\n'))
    add('high bytes in value', get(b'/secret', b'X-A: \xff\xfe\x80\r\n'))
    add('DEL in value', get(b'/secret', b'X-A: a\x7fb\r\n'))
    add('space in name', get(b'/secret', b'X A: a\r\n'))
    add('space before colon', get(b'/secret', b'X-A : a\r\n'))
    add('empty name', get(b'/secret', b': a\r\n'))
    add('no colon', get(b'/secret', b'X-A a\r\n'))
    add('CR in value', get(b'/secret', b'X-A: a\rb\r\n'))
    add('Connection: close, then more', get(close=True) + smug)
    add('HTTP/1.0 keep-alive, then more',
        get(version=b'HTTP/1.0', extra=b'Connection: keep-alive\r\n') + smug)
    # GET/HEAD with bodies
    add('GET with CL body', rq(b'GET', b'/books', b'Content-Length: %d\r\n'
                               % len(smug), smug))
    add('GET with chunked body', rq(b'GET', b'/books',
                                    b'Transfer-Encoding: chunked\r\n',
                                    chunk(smug) + LAST))
    add('HEAD with CL body', rq(b'HEAD', b'/books', b'Content-Length: %d\r\n'
                                % len(smug), smug))
    add('GET CL 0', rq(b'GET', b'/secret', b'Content-Length: 0\r\n'))
    add('POST /echo', post(b'/echo', body5, b'Content-Length: 5\r\n'))
    add('POST /secret', post(b'/secret', body5, b'Content-Length: 5\r\n'))
    add('POST chunked /echo', post(b'/echo', chunk(body5) + chunk(b'world') + LAST,
                                   b'Transfer-Encoding: chunked\r\n'))
    add('POST Expect 100-continue', post(b'/echo', body5, b'Content-Length: 5\r\n'
                                         b'Expect: 100-continue\r\n'))
    add('PUT /books', rq(b'PUT', b'/books', b'Content-Length: 5\r\n', body5))
    add('DELETE /secret', rq(b'DELETE', b'/secret'))
    # pipelines
    for n in (2, 5, 10, 20, 50):
        add(f'pipeline {n}', b''.join(get(b'/secret' if i % 3 == 1 else b'/books',
                                          close=i == n - 1) for i in range(n)))
    add('pipeline 50, no close', b''.join(get() for _ in range(50)))
    add('pipeline with HEAD', get() + rq(b'HEAD', b'/secret') + get(b'/secret')
        + rq(b'HEAD', b'/books') + get(close=True))
    add('pipeline, close in the middle', get() + get(close=True) + get(b'/secret')
        + get(b'/secret'))
    add('pipeline, HTTP/1.0 in the middle', get() + get(version=b'HTTP/1.0')
        + get(b'/secret'))
    add('pipeline with POSTs', get() + post(b'/echo', body5, b'Content-Length: 5\r\n')
        + get(b'/secret') + post(b'/echo', chunk(body5) + LAST,
                                 b'Transfer-Encoding: chunked\r\n') + get(close=True))
    add('pipeline, proxied POST then a bad chunk',
        post(b'/echo', body5, b'Content-Length: 5\r\n') + get()
        + post(b'/echo', b'5\r\n' + chunk(body5) + LAST,
               b'Transfer-Encoding: chunked\r\n'))
    add('pipeline, bad request third', get() + get(b'/secret')
        + b'GET /secret HTTP/1.1\r\nHost: t\r\nX: a\x00\r\n\r\n' + get())
    add('pipeline, CL+TE second', get() + post(b'/echo', chunk(body5) + LAST,
                                               b'Content-Length: 10\r\n'
                                               b'Transfer-Encoding: chunked\r\n')
        + get(b'/secret'))
    add('pipeline, GET body second', get() + rq(b'GET', b'/books',
                                                b'Content-Length: %d\r\n' % len(smug),
                                                smug) + get())
    # big heads
    for kib in (1, 2, 4, 8, 9, 15, 17):
        cookie = b'Cookie: a=' + b'c' * (kib * 1024 - 60) + b'\r\n'
        add(f'{kib} KiB cookie', get(b'/secret', cookie))
    add('big heads pipelined', b''.join(get(b'/secret', b'Cookie: a=' + b'c' * n
                                            + b'\r\n')
                                        for n in (100, 1500, 3000, 7000, 200)))
    add('many headers', get(b'/secret', b''.join(b'X-%d: %d\r\n' % (i, i)
                                                 for i in range(300))))
    add('long target', get(b'/books?' + b'q' * 9000))
    # HTTP/2
    preface = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
    settings = b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'
    add('HTTP/2 preface', preface + settings)
    add('HTTP/2 preface only', preface)
    add('HTTP/2 preface after a GET', get() + preface + settings)
    add('h2c upgrade', get(b'/secret', b'Connection: Upgrade, HTTP2-Settings\r\n'
                           b'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n'))
    add('websocket upgrade', get(b'/books', b'Connection: Upgrade\r\nUpgrade: websocket\r\n'
                                 b'Sec-WebSocket-Version: 13\r\n'
                                 b'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n')
        + get(b'/secret'))
    # issue 26: a script and its PATH_INFO forms (php's docroot has
    # secret.php; elsewhere these are 404s)
    for p in PHP_PATHS:
        add(f'path {p[:40]!r}', get(p))
    add('PATH_INFO POST', post(b'/secret.php/x', body5, b'Content-Length: 5\r\n'))
    add('PATH_INFO HEAD', rq(b'HEAD', b'/secret.php/x'))
    return c


# ---- mutations and streams ----------------------------------------------------------

INSERTS = (b'\r', b'\n', b' ', b'\t', b';', b'"', b'\r\n', b'\x00', b'\xff',
           b',', b':', b'0')


def mutate(rng, data):
    """One random change; returns (bytes, what was done)."""
    if not data:
        return rng.choice(INSERTS), 'insert into empty'
    op = rng.randrange(7)
    i = rng.randrange(len(data))
    if op == 0:
        bit = 1 << rng.randrange(8)
        return (data[:i] + bytes([data[i] ^ bit]) + data[i + 1:],
                f'flip bit {bit:#x} @{i}')
    if op == 1:
        ins = rng.choice(INSERTS)
        return data[:i] + ins + data[i:], f'insert {ins!r} @{i}'
    if op == 2:
        n = rng.choice((1, 1, 1, 2, 4))
        return data[:i] + data[i + n:], f'delete {n} @{i}'
    if op == 3:
        lines = data.split(b'\n')
        k = rng.randrange(len(lines))
        lines.insert(k, lines[k])
        return b'\n'.join(lines), f'duplicate line {k}'
    if op == 4:
        lines = data.split(b'\n')
        k = rng.randrange(len(lines))
        del lines[k]
        return b'\n'.join(lines), f'delete line {k}'
    if op == 5:
        c = data[i:i + 1]
        return (data[:i] + bytes([rng.choice(b'\r\n \t;"0aA:,/.%')]) + data[i + 1:],
                f'replace {c!r} @{i}')
    # swap the case of a byte, or a digit for another
    c = data[i]
    if 48 <= c <= 57:
        r = bytes([48 + (c - 48 + rng.randrange(1, 10)) % 10])
    else:
        r = bytes([c ^ 0x20]) if 65 <= (c & ~0x20) <= 90 else bytes([c])
    return data[:i] + r + data[i + 1:], f'change {bytes([c])!r} to {r!r} @{i}'


class Stream:
    def __init__(self, idx, name, pieces, gaps, shut):
        self.idx = idx
        self.name = name
        self.pieces = pieces      # list of bytes, sent one by one
        self.gaps = gaps          # seconds before each piece after the first
        self.shut = shut          # half-close right after the last piece

    @property
    def data(self):
        return b''.join(self.pieces)

    def replay(self):
        return repr(self.pieces) if len(self.pieces) > 1 else repr(self.data)

    def __repr__(self):
        return f'#{self.idx} {self.name}'


def split(rng, data):
    if len(data) < 2:
        return [data]
    n = rng.randint(1, 8)
    cuts = sorted(rng.sample(range(1, len(data)), min(n - 1, len(data) - 1)))
    return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


def make_streams(seed, count):
    """The corpus once, unmutated, then mutations of it, up to `count`
    streams; each cut at random places. Depends on the seed only."""
    rng = random.Random(seed)
    base = corpus()
    out = []
    for i in range(count):
        if i < len(base):
            name, data = base[i]
        else:
            name, data = base[rng.randrange(len(base))]
            what = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                data, w = mutate(rng, data)
                what.append(w)
            name = f'{name}; ' + ', '.join(what)
        pieces = split(rng, data)
        gaps = [rng.choice((0, 0, 0.001, 0.002, 0.005)) for _ in pieces[1:]]
        # a proxied /echo is answered after an upstream round trip, and
        # nginx and lighttpd give up on (or close after) a request whose
        # client half-closed meanwhile, as the timing falls: those streams
        # half-close only once the server has been quiet for QUIET
        shut = rng.random() < 0.75 and b'/echo' not in data
        out.append(Stream(i, name, pieces, gaps, shut))
    return out


# ---- the servers ------------------------------------------------------------------------

_PY_CRASH = re.compile(r"^Exception occurred during processing of request "
                       r"from \('([^']+)'")


# lighttpd writes %I as '-' for a head it refused before reading it whole
# (431), which servers.Server's pattern does not take.
_LOG_RE = {'lighttpd': re.compile(r'^(\S+) "(.*)" (\d{3}) (\S+)$')}


def new_lines(tail, path):
    """The whole lines added to the file at `path` since `tail` last read
    it (tail.pos; a line not ended yet waits in tail.rest)."""
    try:
        with open(path, 'rb') as f:
            f.seek(tail.pos)
            new = f.read()
    except OSError:
        return []
    tail.pos += len(new)
    lines = (tail.rest + new).split(b'\n')
    tail.rest = lines.pop()
    return lines


class LogTail:
    """A server's access log read as it grows: entries per client address."""

    def __init__(self, server):
        self.server = server
        self.kind = server.base   # a proxy kind logs as its base kind
        # webfs: its -d lines on stderr, read as servers.py does
        self._webfs = servers.WebfsLog(None) if server.kind == 'webfs' \
            else None
        self.pos = 0
        self.rest = b''
        self.by_ip = {}
        self.current = None   # the address of the stream being sent
        self.total = 0
        self._bb_open = {}
        self._last = {}       # servers.log_entry's, for php -S's repeats

    def _path(self):
        s = self.server
        return {'python': s.stderr_path, 'busybox': s.stderr_path,
                'webfs': s.stderr_path, 'legacy': s.stdout_path,
                'php': s.stderr_path, 'php-router': s.stderr_path}.get(
            self.kind, s.access_log_path)

    def poll(self):
        for raw in new_lines(self, self._path()):
            self._line(raw.decode('utf-8', 'replace').rstrip('\r'))

    def _add(self, ip, e):
        if ip == '-' and self.kind == 'h2o':
            # issue 26 (servers2): h2o asks for the peer's address only
            # when it writes the line, and logs '-' when the connection is
            # gone by then (the client closed first: the shim's own 400
            # ends a connection at once). Streams go one at a time to a
            # pair: the line is the current stream's.
            ip = self.current
        self.by_ip.setdefault(ip, []).append(e)
        self.total += 1

    def _line(self, line):
        if self._webfs is not None:
            # an entry's status is filled in by a later line, in place. A
            # status without a request line (webfs's 400 for blank lines
            # and then the end) gets target '', as nginx logs it: no request.
            for e in self._webfs.feed(line):
                e['line'] = line
                if e['method'] is None:
                    e['target'] = ''
                self._add(e['client'], e)
            return
        if self.kind in servers.PHP_KINDS + servers.GUNICORN_KINDS:
            # issue 26: their own lines (servers.log_entry). php -S's
            # "Invalid request" (it closed without an answer: a bad head,
            # an early EOF, or more than one request in its first read) is
            # kept as no request (target '', 400: see requests()), its
            # `invalid` letting judge() take what the shim charged for that
            # connection as charged, never served.
            e = servers.log_entry(self.kind, line, self._last)
            if e is not None:
                self._add(e['client'], {'target': e['request'],
                                        'status': e['status'], 'line': line})
                return
            inv = servers.invalid_entry(self.kind, line)
            if inv is not None and self.kind in servers.PHP_KINDS:
                self._add(inv['client'], {'target': '', 'status': 400,
                                          'line': line, 'invalid': True})
            return
        if self.kind == 'busybox':
            m = servers.Server._BB.match(line)
            if not m:
                return
            ip, cport, what, val = m.groups()
            ip = servers._fold_ip(ip)
            if what == 'url':
                e = {'target': val, 'status': None, 'line': line}
                self._bb_open[(ip, cport)] = e
                self._add(ip, e)
            else:
                e = self._bb_open.pop((ip, cport), None)
                st = int(val) if val.strip().isdigit() else None
                if e is None:    # an error answered before the url
                    self._add(ip, {'target': None, 'status': st, 'line': line})
                else:
                    e['status'] = st
            return
        m = _LOG_RE.get(self.kind, servers.Server._RE[self.kind]).match(line)
        if not m and self.kind == 'python':
            # a handler that raised: the request was read, never logged
            m = _PY_CRASH.match(line)
            if m:
                self._add(servers._fold_ip(m.group(1)),
                          {'target': None, 'status': None, 'line': line})
            return
        if not m:
            return
        g = m.groups()
        self._add(servers._fold_ip(g[0]),
                  {'target': g[1], 'status': int(g[2]), 'line': line})

    def entries(self, ip):
        return self.by_ip.get(ip, [])


# lighttpd logs each request head it reads to error.log with this; its access
# log has no line for a request whose body the client never finished.
LIGHTTPD_HEADS = '\ndebug.log-request-header = "enable"\n'
_HEAD_LINE = re.compile(rb'^\S+ \S+ \(connections\.c\.\d+\) fd:\d+ rqst: (.*)$')


class HeadLog:
    """lighttpd's error.log with debug.log-request-header: the request heads
    it has read (one line per header line; a head starts after a line
    that is not one of those, or after the empty line ending the last)."""

    def __init__(self, server):
        self.path = server.error_log_path
        self.pos = 0
        self.rest = b''
        self.total = 0
        self.in_head = False

    def poll(self):
        for ln in new_lines(self, self.path):
            m = _HEAD_LINE.match(ln)
            if not m:
                self.in_head = False
                continue
            if not self.in_head:
                self.total += 1
            self.in_head = m.group(1) != b''


class Pair:
    """One kind, twice: without the shim and with it, one document root."""

    def __init__(self, kind, echo_port):
        self.kind = kind
        self.dir = os.path.join(TMP, kind)
        self.docroot = os.path.join(self.dir, 'docroot')
        self.shm = f'rlshim-diff-{os.getpid()}-{kind}'
        proto = 'HTTP/1.1' if kind == 'python11' else None
        real = KIND_OF[kind]
        extra = LIGHTTPD_HEADS if real == 'lighttpd' else None
        port = servers.free_port()
        self.config = os.path.join(self.dir, 'rlshim.conf')
        os.makedirs(self.dir, exist_ok=True)
        with open(self.config, 'w') as f:
            f.write(f'[global]\nports = {port}\nshm = {self.shm}\n' + RULES
                    + EXTRA_RULES.get(kind, ''))
        # the TLS kinds: the client's context, trusting the run's certificate
        self.tls = tls_context(CERT[0]) if kind in TLS_OF else None
        if self.tls:
            import test_tls
            self.bare, self.shim = (
                test_tls.tls_server(TLS_OF[kind], os.path.join(self.dir, w),
                                    shim, config, p, echo_port, *CERT,
                                    lighttpd_extra=extra)
                for w, shim, config, p in (
                    ('bare', None, None, servers.free_port()),
                    ('shim', str(SHIM), self.config, port)))
        else:
            self.bare = servers.Server(real, os.path.join(self.dir, 'bare'),
                                       None, None, servers.free_port(),
                                       echo_port, python_protocol=proto,
                                       lighttpd_extra=extra)
            self.shim = servers.Server(real, os.path.join(self.dir, 'shim'),
                                       str(SHIM), self.config, port, echo_port,
                                       python_protocol=proto,
                                       lighttpd_extra=extra)
        # one document root for both (the fixture writes its files into
        # whatever docroot is, at start)
        self.bare.docroot = self.shim.docroot = servers.Path(self.docroot)
        self.shim_heads = None
        try:
            self.bare.start()
            self.shim.start()
        except Exception:
            self.stop()
            raise
        self._files()
        self.bare_log = LogTail(self.bare)
        self.shim_log = LogTail(self.shim)
        # nginx-proxy, apache-proxy: what reached the backend (see KINDS)
        self.backend_log = LogTail(self.shim.backend) \
            if self.shim.backend else None
        if real == 'lighttpd':
            self.shim_heads = HeadLog(self.shim)
        self.counts = None
        # issue 26: php -S never replaces a process that died (its worker
        # or its first process, which serves too): how many each side has
        self.procs = {w: self._alive(w) for w in ('bare', 'shim')}

    def _alive(self, which):
        s = getattr(self, which)
        return len(servers.group_alive(s.proc.pid)) if s.proc else 0

    def died(self, which):
        """Whether a process of a RESTARTED_KINDS server on that side
        died since it started; then it is started again (its log appended
        to)."""
        if self.kind not in RESTARTED_KINDS or \
                self._alive(which) >= self.procs[which]:
            return False
        self.restart(which)
        return True

    def restart(self, which):
        s = getattr(self, which)
        s.stop()
        s.start()
        self.procs[which] = self._alive(which)

    def mark(self):
        """Where the logs stand before a stream (see logged())."""
        if self.shim_heads:
            self.shim_heads.poll()
            return self.shim_heads.total
        return None

    def logged(self, ip, mark):
        """How many requests the shim server read from `ip` since `mark`,
        by its own logs: the access log's entries, or for lighttpd, whose
        access log leaves out a request the client left in its body, the
        heads it logged on receipt in the window, when those are more (its
        access log has a 431 for a head too big to log)."""
        self.shim_log.poll()
        n = len(requests(self.shim_log.entries(ip)))
        if self.shim_heads:
            self.shim_heads.poll()
            n = max(n, self.shim_heads.total - mark)
        return n

    def _files(self):
        d = self.docroot
        os.makedirs(os.path.join(d, 'x', 'y'), exist_ok=True)
        files = [('secret', SECRET), ('pub', PUB), ('x/pub', PUB)]
        if self.kind in PHP_KINDS:
            files.append(('secret.php', b'<?php echo "'
                          + SECRET_PHP.replace(b'\n', b'\\n') + b'";\n'))
        for name, data in files:
            with open(os.path.join(d, name), 'wb') as f:
                f.write(data)
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                os.utime(os.path.join(root, n), (MTIME, MTIME))
        os.utime(d, (MTIME, MTIME))

    def ctl(self):
        """{rule: allowed} of the shim's segment, or {} before its first
        accept."""
        for attempt in range(50):
            try:
                p = subprocess.run([CTL, '-c', self.config, 'status', '--json'],
                                   capture_output=True, timeout=10)
            except OSError:     # rebuilt under us (make while running)
                time.sleep(0.1)
                continue
            if p.returncode == 0:
                return {r['name']: r['allowed']
                        for r in json.loads(p.stdout)['rules']}
            if b'no server under the shim has accepted' in p.stderr:
                return {}
            time.sleep(0.1)
        raise AssertionError(f'rlshimctl status: {p.stderr.decode()}')

    def stop(self):
        for s in (self.bare, self.shim):
            try:
                s.stop()
            except Exception:  # noqa: BLE001
                pass
        try:
            os.unlink(f'/dev/shm/{self.shm}')
        except FileNotFoundError:
            pass


_UPGRADE = re.compile(rb'(?im)^(upgrade[ \t]*:)([^\r\n]*)')
_H2C = re.compile(rb'(?i)(?<![!#$%&\'*+.^_`|~0-9a-z-])h2c(?![!#$%&\'*+.^_`|~0-9a-z-])')


def blank_h2c(st):
    """The stream as the shim passes it on: an `h2c` offered in Upgrade is
    blanked (three spaces), so that no server switches to HTTP/2, whose
    streams the shim does not frame. The bare server is sent this, the
    shim server the stream itself."""
    data = st.data
    if b'h2c' not in data.lower():
        return st
    new = _UPGRADE.sub(lambda m: m.group(1) + _H2C.sub(b'   ', m.group(2)), data)
    if new == data:
        return st
    pieces, at = [], 0
    for p in st.pieces:
        pieces.append(new[at:at + len(p)])
        at += len(p)
    return Stream(st.idx, st.name, pieces, st.gaps, st.shut)


# ---- the client -------------------------------------------------------------------------

def exchange(port, src, st, tls=None):
    """Send the stream from `src`, then read until the server closes.
    Returns (bytes, how it ended). With `tls` (an ssl.SSLContext), over a
    TLS session: each piece its own SSL write, the half-close a
    close_notify and then the TCP half-close (harness.TLSConn)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = bytearray()
    how = 'closed'
    try:
        s.bind((src, 0))
        s.settimeout(5)
        try:
            s.connect(('127.0.0.1', port))
        except OSError as e:
            return b'', f'connect: {e}'
        if tls is not None:
            try:
                s = TLSConn(s, tls)
            except OSError as e:    # ssl.SSLError, a reset, a timeout
                s.close()
                return b'', f'TLS handshake: {e!r}'
        shut = False
        try:
            for i, p in enumerate(st.pieces):
                if i and st.gaps[i - 1]:
                    time.sleep(st.gaps[i - 1])
                s.sendall(p)
            if st.shut:
                s.shutdown(socket.SHUT_WR)
                shut = True
        except OSError:     # EPIPE, ECONNRESET, ENOTCONN: it closed first
            how = 'closed while sending'
            shut = True
        s.settimeout(IDLE if shut else QUIET)
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                if shut:
                    how = 'timeout'
                    break
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                shut = True
                s.settimeout(IDLE)
                continue
            except ConnectionResetError:
                how = 'reset'
                break
            if not b:
                break
            out += b
    finally:
        s.close()
    return bytes(out), how


_NORM = re.compile(rb'(?im)^(date|last-modified|etag|expires|x-worker):[^\r\n]*')
_ALLOW = re.compile(rb'(?im)^(allow: *)([^\r\n]*)')


def normalise(raw, ports):
    """Blank what differs by time or by server process, and the servers'
    own ports (in Location)."""
    raw = _NORM.sub(lambda m: m.group(1) + b': *', raw)
    # apache lists Allow's methods in each process's own hash order
    raw = _ALLOW.sub(lambda m: m.group(1) + b', '.join(
        sorted(x.strip() for x in m.group(2).split(b','))), raw)
    for p in ports:
        raw = raw.replace(b':%d' % p, b':PORT')
    # gunicorn's 400 for a long request line says how much of it one read
    # had brought (where the client's segments or the shim's reads fell)
    raw = _GUNICORN_LONG.sub(rb'\1*\2', raw)
    return raw


_GUNICORN_LONG = re.compile(rb'(Request Line is too large \()\d+( &gt; \d+\))')


# The shim's own 400 (src/shim/reply.c): these fields in any order, maybe
# with others (Date), and its JSON body, or none after a HEAD.
_OWN_400 = re.compile(rb'HTTP/1\.[01] 400 Bad Request\r\n((?:[!-9;-~]+:[^\r\n]*\r\n)*)\r\n')
_OWN_FIELDS = (b'content-type: application/json', b'connection: close',
               b'cache-control: no-store')
_OWN_BODY = re.compile(rb'\{"error":\{"code":"bad_request","message":"[^"\\]*(?:\\.[^"\\]*)*"\}\}')
_OWN_H2 = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0,
                 0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d])


def responses(raw):
    """Split what a server sent into responses: [(start, end, status)], and
    the offset where that stopped being possible (len(raw) if never). A
    Content-Length response followed at once by a status line while its
    body would not be is taken for a HEAD answer."""
    out = []
    pos = 0
    while pos < len(raw):
        if not raw.startswith(b'HTTP/', pos):
            return out, pos
        end = raw.find(b'\r\n\r\n', pos)
        if end < 0:
            return out, pos
        lines = raw[pos:end].split(b'\r\n')
        try:
            status = int(lines[0].split(b' ')[1][:3])
        except (IndexError, ValueError):
            return out, pos
        hdr = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(b':')
            hdr[k.strip().lower()] = v.strip()
        at = end + 4
        if 100 <= status < 200 or status in (204, 304):
            nxt = at
        elif hdr.get(b'transfer-encoding', b'').lower() == b'chunked':
            p = at
            nxt = None
            while True:
                le = raw.find(b'\r\n', p)
                if le < 0:
                    break
                try:
                    n = int(raw[p:le].split(b';')[0], 16)
                except ValueError:
                    break
                p = le + 2
                if n == 0:
                    te = raw.find(b'\r\n\r\n', p - 2)
                    nxt = te + 4 if te >= 0 else None
                    break
                p += n + 2
            if nxt is None:
                return out, pos
        elif b'content-length' in hdr:
            try:
                n = int(hdr[b'content-length'])
            except ValueError:
                return out, pos
            if n and raw.startswith(b'HTTP/1.', at) and \
                    not raw.startswith(b'HTTP/1.', at + n):
                nxt = at          # a HEAD answer
            else:
                nxt = min(at + n, len(raw))
        else:
            nxt = len(raw)
        out.append((pos, nxt, status))
        pos = nxt
    return out, pos


def own_refusal(raw):
    """Where the shim's own refusal starts, if `raw` ends with one (and
    nothing follows it): its 400 with the JSON body (none after a HEAD), or
    HTTP/2 SETTINGS + GOAWAY. None otherwise."""
    if raw.endswith(_OWN_H2):
        return len(raw) - len(_OWN_H2), 'h2'
    at = raw.rfind(b'HTTP/1.')
    while at >= 0:
        m = _OWN_400.match(raw, at)
        if m:
            fields = [f.strip().lower() for f in m.group(1).split(b'\r\n') if f]
            fields = [b': '.join(x.strip() for x in f.split(b':', 1)) for f in fields]
            lengths = [f[16:] for f in fields if f.startswith(b'content-length: ')]
            rest = raw[m.end():]
            if all(f in fields for f in _OWN_FIELDS) and len(lengths) == 1 and (
                    rest == b'' or (rest.isascii() and len(rest) == int(lengths[0])
                                    and _OWN_BODY.fullmatch(rest))):
                return at, '400'
            return None
        at = raw.rfind(b'HTTP/1.', 0, at)
    return None


def in_body(refusal):
    """Whether the shim's own 400 says it refused a body, not a head."""
    return b'chunk' in refusal or b'trailer' in refusal


def final_count(raw, upto):
    """Final (non-1xx) responses in raw[:upto]."""
    rs, _ = responses(raw[:upto])
    return sum(1 for _, _, st in rs if st >= 200)


class Outcome:
    """What one stream did on one kind: its problems, each (class, how,
    message); `how` tells findings of one class apart (which answer stood
    against which), for grouping and shrinking."""

    def __init__(self, st, kind):
        self.st = st
        self.kind = kind
        self.problems = []
        self.overcharged = 0  # charged, never served: the server closed
        self.raced = False    # the answer lost to a reset while sending
        self.boundary = False  # php -S answered by where its reads fell
        self.bare_died = False  # the bare server lost a process to it

    def add(self, cls, how, msg):
        self.problems.append((cls, how, msg))

    def keys(self):
        return {(c, h) for c, h, _ in self.problems}


def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def answer_at(raw, at):
    """The status of the answer holding byte `at`: '200', 'nothing' past
    the end, 'bytes' where no answer can be read."""
    if at >= len(raw):
        return 'nothing'
    rs, _ = responses(raw)
    for a, e, stt in rs:
        if a <= at < e:
            return str(stt)
    return 'bytes'


def show(raw, at=None, width=600):
    if at is None or at < 150 or len(raw) <= width:
        return repr(raw[:width]) + (f'... ({len(raw)} bytes)' if len(raw) > width else '')
    a = at - 150
    return f'({len(raw)} bytes) ...{raw[a:a + width]!r}...'


def log_lines(entries):
    return ''.join(f'\n      log: {e["line"][:300]}' for e in entries[:12])


def requests(entries):
    """The log entries that are requests. A 400 without a request line is
    none: nginx ("") and lighttpd ("  ", or " <the last target> " from its
    buffer) log one for a connection that sent bytes but no request line
    (blank lines, a lone CR, then a bad line or the end), which nothing could
    have counted. lighttpd's 431 with a blank line is a request: a head too
    big for it to log."""
    def request_line(e):
        t = e['target']
        return t is None or not (t == '' or t[0].isspace()) or e['status'] != 400
    return [e for e in entries if request_line(e)]


def dropped_pipeline(st, nb, ns):
    """Whether the two answers differ only in how many of a half-closed
    stream's pipelined requests were answered before the server closed
    (webfs, UNANSWERED_UNLOGGED): both whole answers, one the other's
    prefix, the longer's next answer kept alive."""
    if not st.shut:
        return False
    longer, shorter = (nb, ns) if len(nb) > len(ns) else (ns, nb)
    if not longer.startswith(shorter):
        return False
    rs, stop = responses(longer)
    return stop == len(longer) and len(shorter) in {0} | {e for _, e, _ in rs}


def stray_empty_line(data, nb, ns):
    """A stream that ends in an empty line after its last head: lighttpd
    answers that line 400 or not as its reads fall (the shim hands it the
    head whole where the bare server got it in pieces). Only then may the
    two differ, by that one 400 at the end."""
    if not data.endswith(b'\r\n\r\n\r\n'):
        return False
    longer, shorter = (nb, ns) if len(nb) > len(ns) else (ns, nb)
    if not longer.startswith(shorter):
        return False
    rs, stop = responses(longer[len(shorter):])
    return len(rs) == 1 and rs[0][2] == 400


def server_closed(raw, kind):
    """Whether the server ended the connection with its last answer in
    `raw`: Connection: close, HTTP/1.0 without keep-alive, or a server that
    answers one request per connection."""
    rs, _ = responses(raw)
    if not rs:
        return False
    if kind == 'busybox':
        return True
    start, end, _ = rs[-1]
    head = raw[start:raw.find(b'\r\n\r\n', start)].lower()
    conn = b''
    for ln in head.split(b'\r\n')[1:]:
        k, _, v = ln.partition(b':')
        if k.strip() == b'connection':
            conn += v
    if b'close' in conn:
        return True
    return head.startswith(b'http/1.0') and b'keep-alive' not in conn


def php_malformed(log, ip):
    """Whether php -S logged a connection from `ip` closed unanswered as
    malformed (LogTail keeps those lines as `invalid` entries)."""
    return any(e.get('invalid') and 'Malformed' in e['line']
               for e in log.entries(ip))


def judge(pair, st, ip, bare, shim, before, after, nlogged):
    """The checks of one stream; returns an Outcome. nlogged: the requests
    the server read by its logs (Pair.logged)."""
    o = Outcome(st, pair.kind)
    (braw, bhow), (sraw, show_) = bare, shim
    ports = (pair.bare.port, pair.shim.port)
    nb, ns = normalise(braw, ports), normalise(sraw, ports)
    refused = None
    counted = after.get('all', 0) - before.get('all', 0)
    if nb != ns and stray_empty_line(st.data, nb, ns):
        ns = nb
    served = final_count(ns, len(ns))   # answers the shim server sent
    if nb != ns and pair.kind in UNANSWERED_UNLOGGED and \
            dropped_pipeline(st, nb, ns):
        ns = nb
    if nb != ns and nb == b'' and (
            bhow == 'closed while sending' or
            (bhow == 'reset' and show_ in ('closed', 'closed while sending') and
             b'connection: close' in ns.lower() and
             (ns.count(b'HTTP/1.') < st.data.count(b' HTTP/1.') or
              re.match(rb'HTTP/1\.[01] [45]\d\d ', ns)))):
        # issue 26 (servers2): the races below on the bare side: the bare
        # server closed with this client's bytes unread (webfs answers a
        # POST 501 or a bad head 400 without reading on), its reset
        # destroyed its answers; the shim server's came through.
        o.raced = True
        nb = ns
    if nb != ns and ns == b'' and show_ == 'closed while sending':
        # The server closed while this client still sent: its close with
        # bytes unread sends a reset, which can destroy what was answered
        # before it reached the client (the shim answers, drains what has
        # come and shuts down, but cannot wait for the rest: RFC 9112
        # 9.6's lingering close is the server's). Timing, not framing: the
        # counts are still checked.
        o.raced = True
        ns = nb
    if (nb != ns and ns == b'' and show_ == 'reset' and bhow == 'closed' and
            b'connection: close' in nb.lower() and
            (nb.count(b'HTTP/1.') < st.data.count(b' HTTP/1.') or
             re.match(rb'HTTP/1\.[01] [45]\d\d ', nb))):
        # The same, after the client sent all: the server answered with
        # Connection: close and closed with bytes unread, pipelined
        # requests (busybox reads the first head only) or the rest of a
        # head it refused (its 400 to a target too long or a method it
        # does not know), so its kernel resets; bare, the answer won the
        # race, here it did not (seen on busybox under CI's load).
        o.raced = True
        ns = nb
    if nb != ns and pair.kind in PHP_KINDS and (
            php_malformed(pair.bare_log, ip) or php_malformed(pair.shim_log, ip)):
        # issue 26: php -S 8.2 refuses, closing unanswered ("Invalid
        # request (Malformed HTTP request)"), a read that splits a request
        # target, or that holds bytes of a request after one it has read
        # whole (run as a pipeline, they are refused together). What it
        # answers then depends on where the reads fall: the client's
        # sends bare, the shim's (which hands on a head whole, and reads
        # ahead to frame the next request) under the shim. Read
        # boundaries, not framing: the counts are still checked.
        o.boundary = True
        ns = nb
    if nb != ns:
        own = own_refusal(ns)
        if own is None:
            at = first_diff(nb, ns)
            b_at, s_at = answer_at(nb, at), answer_at(ns, at)
            o.add('answers differ',
                  ('no answer with the shim, ' +
                   ('to requests it counted' if counted > final_count(ns, len(ns))
                    else 'to what it never counted'))
                  if s_at == 'nothing' else f'bare {b_at}, shim {s_at}',
                  f'the answers differ at byte {at} (bare: {bhow}, shim: {show_}):'
                  f'\n      bare: {show(nb, at)}\n      shim: {show(ns, at)}')
        else:
            at, what = own
            rs, stop = responses(ns[:at])
            bounds = {0} | {e for _, e, _ in rs}
            if at not in bounds or stop < at:
                o.add('refusal mid-answer', what,
                      f'the shim\'s own {what} starts at byte {at}, inside an '
                      f'answer of the application:\n      shim: {show(ns, at)}')
            elif not nb.startswith(ns[:at]):
                d = first_diff(nb, ns)
                o.add('answers differ',
                      f'bare {answer_at(nb, d)}, shim {answer_at(ns, d)} '
                      f'before its own {what}',
                      f'the answers before the shim\'s own {what} differ at '
                      f'byte {d}:\n      bare: {show(nb, d)}\n      shim: {show(ns, d)}')
            else:
                refused = (at, what)
    # (a) counted
    logged = requests(pair.shim_log.entries(ip))
    o.logged = logged
    delta = {r: after.get(r, 0) - before.get(r, 0)
             for r in set(after) | set(before) | {'all', 'secret'}}
    if st.data[:1] == b'\x16' and pair.tls is None:
        # a TLS record: the connection passes untouched (DESIGN.md, "What
        # bad input gets"), uncounted; the server may only refuse it
        # (inside TLS it is bytes like any, framed and judged as such)
        served = [e for e in logged if e['status'] is None or e['status'] < 400]
        if delta['all'] or served:
            o.add('count', 'TLS pass-through',
                  f'a stream starting with a TLS record byte: the shim counted '
                  f'{delta["all"]}, the server served {len(served)}'
                  + log_lines(logged))
    elif delta['all'] > nlogged and (server_closed(ns, pair.kind) or
                                     (ns == b'' and st.data[:1] in (b'\r', b'\n')) or
                                     any(e.get('invalid') for e in
                                         pair.shim_log.entries(ip))):
        # Requests pipelined behind an answer with which the server ended
        # the connection (an error, Connection: close, one request per
        # connection) were read and charged by the shim, which decides
        # before the server sees them, but never served. So is a request
        # after a leading empty line that the server refuses silently
        # (busybox, lighttpd; RFC 9112 2.2 says a server SHOULD ignore
        # it, and the shim does). Charged, never passed uncounted: the
        # safe side, and a known limit (README).
        o.overcharged = delta['all'] - nlogged
    elif (pair.kind in UNANSWERED_UNLOGGED and delta['all'] > nlogged
          and nb == ns and served <= nlogged):
        # issue 26 (servers2): requests the server read and never
        # answered, without a line in its log (UNANSWERED_UNLOGGED), that
        # the shim charged as it passed them on: the same answers with and
        # without the shim, and no answer without its log line (fewer when
        # a reset destroyed answers, on both sides alike).
        o.overcharged = delta['all'] - nlogged
    elif delta['all'] != nlogged:
        o.add('count', 'shim counted more' if delta['all'] > nlogged
              else 'server logged more',
              f'the shim counted {delta["all"]} request(s) (rule *), the server '
              f'logged {nlogged}' + log_lines(logged))
    need = {}
    for mark, rules in SECRET_MARKS.get(pair.kind, ((SECRET, ('secret',)),)):
        for r in rules:
            need[r] = need.get(r, 0) + sraw.count(mark)
    for r, secrets in need.items():
        if secrets > delta.get(r, 0):
            o.add('secret uncounted', r,
                  f'the secret file (or script) was served {secrets} time(s), '
                  f'the rule {r} counted {delta.get(r, 0)}')
    if refused:
        # the requests answered before the refusal are all the server may
        # have read: one more is the refused request itself (its head went
        # through before its body was found bad), more than that are
        # requests it read and answered, whose answers never came
        k = final_count(ns, refused[0])
        n = max(nlogged, len(logged))
        served = [e for e in logged[k:] if e['status'] is None or e['status'] < 400]
        if n > k + 1:
            o.add('answers lost', refused[1],
                  f'the shim refused with its own {refused[1]} after {k} '
                  f'answer(s), but the server had read {n} request(s); the '
                  f'answers without the shim:\n      bare: {show(nb)}'
                  + log_lines(logged))
        elif n > k and not served and in_body(ns[refused[0]:]):
            # A bad chunked body is found after its head went through: the
            # server read that request, but never served it (DESIGN.md: a
            # bad body reaches the application up to the bad byte).
            pass
        elif n > k:
            o.add('refused but served' if served else 'refused but logged',
                  refused[1],
                  f'the shim refused with its own {refused[1]} after {k} '
                  f'answer(s), yet the server read the refused request too '
                  f'(by its logs):' + log_lines(logged))
    return o


_ip = [0]
_ip_lock = threading.Lock()


def fresh_ip():
    """A loopback source address no stream has used yet."""
    with _ip_lock:
        _ip[0] += 1
        n = _ip[0]
    return f'127.{2 + n // 62500}.{n // 250 % 250}.{1 + n % 250}'


def run_one(pair, st):
    """Send `st` to both servers at once, wait for the shim's count and the
    server's log to settle; return the Outcome."""
    t_start = time.monotonic()
    ip = fresh_ip()
    if pair.counts is None:
        pair.counts = pair.ctl()
    before = pair.counts
    mark = pair.mark()
    pair.shim_log.current = ip
    bare_st = blank_h2c(st)
    res = {}

    def one(which, port, stream):
        try:
            res[which] = exchange(port, ip, stream, pair.tls)
        except Exception as e:  # noqa: BLE001
            res[which] = (b'', f'client error: {e!r}')

    t = threading.Thread(target=one, args=('bare', pair.bare.port, bare_st))
    t.start()
    one('shim', pair.shim.port, st)
    t.join()
    # the count and the log agree, or have not moved for a while
    t0 = time.monotonic()
    prev, since = None, t0
    while True:
        after = pair.ctl()
        n = pair.logged(ip, mark)
        now = (after.get('all', 0), n)
        t = time.monotonic()
        if now != prev:
            prev, since = now, t
        elif now[0] - before.get('all', 0) == n or t - since > 0.3:
            break
        if t - t0 > SETTLE:
            break
        time.sleep(0.02)
    pair.bare_log.poll()
    pair.counts = after
    o = judge(pair, st, ip, res['bare'], res['shim'], before, after, n)
    if pair.died('bare'):
        # php -S 8.2 dies of some requests ("Out of memory" on stderr, a
        # body it cannot allocate): the bare answers are lost to it, not
        # comparable; the shim server must not have died of them.
        o.bare_died = True
        o.problems = [p for p in o.problems if p[0] not in ANSWER_CLASSES]
        if pair.kind in FRESH_TWIN_KINDS:
            pair.restart('shim')
    if pair.died('shim'):
        o.add('answers differ', 'the shim server died',
              'a process of the server under the shim died of this stream '
              '(it was started again)')
    if REPLAY:      # one stream by hand: show what came back
        print(f'# {pair.kind} bare ({res["bare"][1]}): {res["bare"][0]!r}\n'
              f'# {pair.kind} shim ({res["shim"][1]}): {res["shim"][0]!r}\n'
              f'# {pair.kind} shim counted {after.get("all", 0) - before.get("all", 0)}, '
              f'logged {n}', flush=True)
    o.ip = ip
    o.delta = after.get('all', 0) - before.get('all', 0)
    o.nlogged = n
    o.heads = pair.shim_heads.total - mark if pair.shim_heads else None
    o.seconds = time.monotonic() - t_start
    return o


# ---- shrinking -----------------------------------------------------------------------------

def _candidates(st):
    """Smaller variants of a stream, biggest cuts first."""
    data = st.data
    if len(st.pieces) > 1:
        yield Stream(st.idx, st.name, [data], [], st.shut)
    if not st.shut and b'/echo' not in data:
        yield Stream(st.idx, st.name, st.pieces, st.gaps, True)
    # whole requests (cut after each empty line), then lines, then bytes
    for sep in (b'\r\n\r\n', b'\n'):
        parts = []
        rest = data
        while sep in rest:
            i = rest.index(sep) + len(sep)
            parts.append(rest[:i])
            rest = rest[i:]
        if rest:
            parts.append(rest)
        for i in range(len(parts)):
            if len(parts) > 1:
                yield _one(st, b''.join(parts[:i] + parts[i + 1:]))
    n = len(data) // 2
    while n >= 1:
        for i in range(0, len(data), n):
            yield _one(st, data[:i] + data[i + n:])
        n //= 2


def _one(st, data):
    """One send; half-closed at once unless it goes to a proxied /echo (see
    make_streams)."""
    return Stream(st.idx, st.name, [data], [], b'/echo' not in data)


def shrink(pair, st, keys, until):
    """The smallest stream found, within SHRINK_TRIES re-runs and before
    `until` (monotonic), that still fails in one of the ways `keys`
    (Outcome.keys()); and its Outcome."""
    best, best_o = st, None
    tries = 0
    improved = True
    while improved and tries < SHRINK_TRIES:
        improved = False
        for cand in _candidates(best):
            if tries >= SHRINK_TRIES or time.monotonic() > until:
                break
            if len(cand.data) > len(best.data) or (
                    len(cand.data) == len(best.data) and
                    len(cand.pieces) >= len(best.pieces) and cand.shut == best.shut):
                continue
            tries += 1
            o = run_one(pair, cand)
            if o.keys() & keys:
                best, best_o = cand, o
                improved = True
                break
    return best, best_o


# ---- running ----------------------------------------------------------------------------------

class KindRun:
    def __init__(self, kind):
        self.kind = kind
        self.outcomes = []     # every stream's Outcome
        self.failed = []       # Outcomes with problems
        self.shrunk = {}       # (class, how) -> (Stream, Outcome)
        self.ran = 0
        self.error = None
        self.totals = None     # (allowed, logged) over the whole run, the
                               # requests charged behind a closing answer
                               # counted with the logged
        self.seconds = 0.0
        self.seconds_streams = 0.0

    def groups(self, classes):
        """{(class, how): [(Outcome, message)]} for the given classes."""
        g = {}
        for o in self.failed:
            for cls, how, msg in o.problems:
                if cls in classes:
                    g.setdefault((cls, how), []).append((o, msg))
        return g


def run_kind(kr, pair, streams):
    t0 = time.monotonic()
    try:
        for st in streams:
            o = run_one(pair, st)
            kr.ran += 1
            kr.outcomes.append(o)
            if o.problems:
                kr.failed.append(o)
        # the whole run, once every log has caught up: the shim's total,
        # and each stream's requests by the logs as they are now (a line
        # written after its stream was judged is found here)
        def final(o):
            if o.st.data[:1] == b'\x16' and pair.tls is None:
                return o.delta      # passed through, uncounted
            n = len(requests(pair.shim_log.entries(o.ip)))
            return max(n, o.heads) if o.heads is not None else n

        deadline = time.monotonic() + SETTLE
        while True:
            pair.shim_log.poll()
            allowed = pair.ctl().get('all', 0)
            logged = sum(final(o) + o.overcharged for o in kr.outcomes)
            if allowed == logged or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        kr.totals = (allowed, logged)
        for o in kr.outcomes:
            n = final(o)
            if o.st.data[:1] == b'\x16' and pair.tls is None:
                continue
            if n != o.nlogged and not any(c == 'count' for c, _, _ in o.problems):
                o.add('count', 'logged late',
                      f'the shim counted {o.delta} request(s) (rule *), the '
                      f'server logged {o.nlogged} by the time the stream was '
                      f'judged and {n} by the end of the run'
                      + log_lines(pair.shim_log.entries(o.ip)))
                if o not in kr.failed:
                    kr.failed.append(o)
        kr.seconds_streams = time.monotonic() - t0
        # one shrunk stream for each way of failing (the first streams to
        # fail each way), a few per kind
        until = time.monotonic() + SHRINK_SECONDS
        for key, found in kr.groups(ANSWER_CLASSES | COUNT_CLASSES).items():
            if len(kr.shrunk) >= SHRINK_MAX or time.monotonic() > until:
                break
            kr.shrunk[key] = shrink(pair, found[0][0].st, {key}, until)
    except Exception:  # noqa: BLE001
        import traceback
        kr.error = traceback.format_exc()
    kr.seconds = time.monotonic() - t0


def describe(o, st=None):
    st = st or o.st
    return (f'stream {st!r} (RL_DIFF_SEED={SEED} RL_DIFF_ONLY={st.idx}), '
            f'{"half-closed" if st.shut else "kept open"} after '
            f'{len(st.pieces)} send(s), from {o.ip}:\n'
            f'      RL_DIFF_REPLAY="{st.replay()}"')


def report(kr, classes):
    """The failures of one kind in `classes`, grouped by how they failed:
    up to two streams of each, and the shrunk one."""
    out = []
    groups = kr.groups(classes)
    n = len({id(o) for found in groups.values() for o, _ in found})
    for (cls, how), found in groups.items():
        out.append(f'  {cls}{": " + how if how else ""}: {len(found)} stream(s)'
                   f' ({" ".join(str(o.st.idx) for o, _ in found[:40])}'
                   f'{" ..." if len(found) > 40 else ""})')
        for o, msg in found[:2]:
            out.append(f'    {describe(o)}\n      {msg}')
        small, so = kr.shrunk.get((cls, how), (None, None))
        if so is not None:
            msg = [m for c, h, m in so.problems if (c, h) == (cls, how)][0]
            out.append(f'    shrunk to {len(small.data)} bytes: '
                       f'{describe(so, small)}\n      {msg}')
    return f'{n} of {kr.ran} streams:\n' + '\n'.join(out)


ANSWER_CLASSES = {'answers differ', 'refusal mid-answer', 'answers lost'}
COUNT_CLASSES = {'count', 'secret uncounted', 'refused but logged',
                 'refused but served'}


def replay_streams():
    v = REPLAY
    if os.path.exists(v):
        v = open(v).read()
    obj = ast.literal_eval(v.strip())
    pieces = [obj] if isinstance(obj, bytes) else list(obj)
    # half-closed at once unless it goes to a proxied /echo (make_streams)
    shut = os.environ.get('RL_DIFF_SHUT', '1' if b'/echo' not in b''.join(pieces)
                          else '0') == '1'
    return [Stream(0, 'replay', pieces, [0.002] * (len(pieces) - 1), shut)]


def main():
    global TMP, CERT
    TMP = tempfile.mkdtemp(prefix='rlshim-diff-')
    words = [w.lower() for w in sys.argv[1:]]
    # --tls: the TLS kinds instead (nginx then is nginx-tls); a TLS kind
    # may also be named (nginx-tls) beside plaintext ones
    tls = '--tls' in words
    words = [w for w in words if w != '--tls']
    pool = TLS_KINDS if tls else KINDS
    names = set(KINDS) | set(TLS_KINDS)

    def picks(w, k):
        # a word that names a kind is that kind only (nginx, not
        # nginx-proxy); other words pick every kind they are part of
        # (python: python11)
        b = TLS_BASE.get(k, k)
        return w == k or w == b or (w in b and w not in names)
    kinds = [k for k in pool if not words or any(picks(w, k) for w in words)]
    kinds += [k for k in TLS_KINDS if not tls and k in words]
    if any(k in TLS_OF for k in kinds):
        import test_tls
        CERT = test_tls.make_cert(TMP)
        os.chmod(TMP, 0o755)    # apache's children read the certificate
    for k in kinds:
        if not servers.available(KIND_OF[k]):
            print(f'[  FAILED  ] 1 test(s): {KIND_OF[k]} is not installed '
                  f'(tools/deps.sh installs it)')
            return 1
    for f in (SHIM, CTL):
        if not os.path.exists(f):
            print(f'[  FAILED  ] 1 test(s): {f} missing: run make')
            return 1
    if REPLAY:
        streams = replay_streams()
    else:
        streams = make_streams(SEED, STREAMS)
        if ONLY:
            streams = [s for s in streams if s.idx in ONLY]
    # RL_DIFF_REPEAT=N: every stream N times (is a difference steady?)
    streams = streams * int(os.environ.get('RL_DIFF_REPEAT') or 1)
    print(f'# seed {SEED}, {len(streams)} stream(s), kinds: {" ".join(kinds)}',
          flush=True)
    t0 = time.monotonic()
    echo = servers.Server('legacy', os.path.join(TMP, 'echo'), None, None,
                          servers.free_port())
    echo.start()
    pairs = {}
    runs = {k: KindRun(k) for k in kinds}
    state = {'done': False}

    def run_all():
        if state['done']:
            return
        state['done'] = True
        threads = []
        for k in kinds:
            try:
                pairs[k] = Pair(k, echo.port)
            except Exception:  # noqa: BLE001
                import traceback
                runs[k].error = 'starting the servers: ' + traceback.format_exc()
                continue
            threads.append(threading.Thread(target=run_kind,
                                            args=(runs[k], pairs[k], streams)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k in pairs:
            kr = runs[k]
            slow = sorted(kr.outcomes, key=lambda o: -o.seconds)[:3]
            print(f'# {k}: {kr.ran} streams in {kr.seconds_streams:.1f} s '
                  f'(slowest: ' + ', '.join(f'#{o.st.idx} {o.seconds:.1f} s'
                                            for o in slow)
                  + f'), {len(kr.failed)} failing; {kr.seconds:.1f} s with '
                  f'shrinking', flush=True)
            raced = [o for o in kr.outcomes if o.raced]
            if raced:
                print(f'# {k}: {len(raced)} stream(s) whose answers a reset '
                      f'destroyed (a close with bytes unread): '
                      + ' '.join(f'#{o.st.idx}' for o in raced), flush=True)
            dead = [o for o in kr.outcomes if o.bare_died]
            if dead:
                print(f'# {k}: {len(dead)} stream(s) killed a process of the '
                      f'bare server (restarted; answers not compared), the '
                      f'server under the shim lived: '
                      + ' '.join(f'#{o.st.idx}' for o in dead), flush=True)
            bound = [o for o in kr.outcomes if o.boundary]
            if bound:
                print(f'# {k}: {len(bound)} stream(s) whose answers were not '
                      f'compared: php -S refused a read as malformed (a split '
                      f'target, or more than one request in it), bare or with '
                      f'the shim', flush=True)
            over = [o for o in kr.outcomes if o.overcharged]
            if over:
                print(f'# {k}: {sum(o.overcharged for o in over)} request(s) in '
                      f'{len(over)} stream(s) charged but never served: '
                      f'pipelined behind an answer that closed the '
                      f'connection', flush=True)

    def answers(kind):
        run_all()
        kr = runs[kind]
        if kr.error:
            raise AssertionError(kr.error)
        if kr.groups(ANSWER_CLASSES):
            raise AssertionError('answers with the shim differ from those '
                                 'without it, in ' + report(kr, ANSWER_CLASSES))

    def counted(kind):
        run_all()
        kr = runs[kind]
        if kr.error:
            raise AssertionError(kr.error)
        msgs = []
        if kr.groups(COUNT_CLASSES):
            msgs.append('requests not counted exactly once, in '
                        + report(kr, COUNT_CLASSES))
        if kr.totals and kr.totals[0] != kr.totals[1]:
            msgs.append(f'over the whole run the shim counted {kr.totals[0]} '
                        f'request(s) (rule *), the server logged {kr.totals[1]}')
        # issue 26 (servers2): nothing reached a proxy's backend uncounted
        bl = pairs[kind].backend_log if kind in pairs else None
        if bl is not None and kr.totals:
            bl.poll()
            if bl.total > kr.totals[0]:
                msgs.append(f'the backend behind the proxy read {bl.total} '
                            f'request(s), the shim counted {kr.totals[0]}')
        if msgs:
            raise AssertionError('\n'.join(msgs))

    tests = []
    for k in kinds:
        name = LABEL.get(k, k)
        tests.append((f'{name}: every request served was counted once',
                      lambda k=k: counted(k)))
        tests.append((f'{name}: the same answers with and without the shim',
                      lambda k=k: answers(k)))
    try:
        rc = run(f'diff (seed {SEED}, {SHIM})', tests)
    finally:
        for p in pairs.values():
            p.stop()
        echo.stop()
    print(f'# {time.monotonic() - t0:.1f} s')
    if rc == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print(f'# work directories kept in {TMP}; replay a stream with '
              f'RL_DIFF_SEED={SEED} RL_DIFF_ONLY=N or RL_DIFF_REPLAY=...')
    return rc


if __name__ == '__main__':
    sys.exit(main())
