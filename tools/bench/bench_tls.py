#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/bench_tls.py - what the shim costs nginx over HTTPS (issue
27), beside what it costs in plaintext, all from the same run. Python 3
stdlib only; needs nginx (Debian's, with its ssl module), openssl, strace
and valgrind on PATH and a built build/librlshim.so (`make`).

    python3 tools/bench/bench_tls.py [--shim build/librlshim.so]
        [--only instructions,syscalls,handshake] [--heads small,ab,browser]
        [--requests 200,1200] [--connections 50,150] [--top 15] [--keep DIR]

Prints markdown to stdout (progress goes to stderr). Four servers per
figure: nginx alone (a) and nginx under the shim (b), each serving http
(`listen 127.0.0.1:PORT`) and https (`listen 127.0.0.1:PORT ssl`, a
self-signed RSA 2048 certificate made at the start by `openssl req`, TLS
1.3 negotiated); one worker, keep-alive, the shim's rule never limits
(bench_http's NEVER_LIMITS). Only nginx is measured: the client is Python
(its ssl module) and runs outside valgrind and strace.

1. instructions: user-space instructions per keep-alive request, nginx
   under callgrind (`master_process off`), N1 and N2 requests on one
   connection in two fresh processes, (Ir at N2 - Ir at N1) / (N2 - N1):
   the handshake and start-up cancel. By object (nginx, libssl.so.3,
   libcrypto.so.3, libc, librlshim.so, ...) and, for the shim's added
   cost over TLS, by function; bench_http's callgrind and cgout machinery.
2. syscalls: `strace -f -c -p` on the one worker (`master_process on`),
   the same two request counts on the same warmed-up worker; per syscall.
3. handshake: per new connection (one request each, the client closing
   it): (count at C2 - count at C1) / (C2 - C1) connections, instructions
   and system calls, http beside https.

The shim's figures are (b) - (a), per request or per connection; the goal
of issue 27: (b) - (a) over https <= (b) - (a) over http, and +0 system
calls. Before counting, the same nginx under the shim at `rate = 1/m` is
asked twice over one TLS connection: the second request must get the
shim's 429, or the shim is not framing HTTPS and the figures mean
nothing.
"""

import argparse
import datetime
import os
import platform
import shutil
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as B  # noqa: E402
import cgout  # noqa: E402

log = B.log
SHIM_OBJ = B.SHIM_OBJ
TLS_HEADS = ['small', 'ab', 'browser']
# The object split's groups: what TLS itself costs, the server, the shim.
TLS_OBJS = ('libssl.so.3', 'libcrypto.so.3')
SCHEMES = ('http', 'https')
KEYS = ('a', 'b')


def make_cert(root: Path) -> tuple[Path, Path]:
    """A self-signed certificate for CN=localhost, RSA 2048, made now."""
    cert, key = root / 'cert.pem', root / 'key.pem'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                    '-nodes', '-keyout', str(key), '-out', str(cert),
                    '-days', '2', '-subj', '/CN=localhost'],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def client_context() -> ssl.SSLContext:
    """The client's TLS: no verification (a certificate of the run), no
    session kept, so every connection is a full handshake; HTTP/1.1 the
    only protocol offered (ALPN), as a client of an HTTP/1 server."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(['http/1.1'])
    return ctx


def parse_counts(text: str, what: str) -> tuple[int, int]:
    """--requests / --connections: N1,N2 with 0 < N1 < N2."""
    try:
        n1, n2 = (int(x) for x in text.split(','))
    except ValueError:
        raise ValueError(f'{what}: two counts N1,N2, not {text!r}') from None
    if not 0 < n1 < n2:
        raise ValueError(f'{what}: 0 < N1 < N2, not {text!r}')
    return n1, n2


def variants(tls: tuple[Path, Path]) -> list[tuple[str, str, dict]]:
    """(scheme, key, Nginx keywords): nginx alone and under the shim, each
    over http and over https."""
    out = []
    for scheme in SCHEMES:
        for key in KEYS:
            kw = {} if key == 'a' else {'shim_rule': B.NEVER_LIMITS}
            if scheme == 'https':
                kw['tls'] = tls
            out.append((scheme, key, kw))
    return out


# Seconds between an answer and the next request on a keep-alive
# connection: nginx's read after its answer (SSL_read reads until libssl
# says WANT_READ) then always finds the socket empty, as behind a network's
# round trip, whether or not valgrind or strace slow nginx down. Without
# it that read found the next request in 1-3% of requests (the client
# faster than the traced worker), which moved the counts by as much.
PAUSE = 0.005


def client(kind: str, head: str, scheme: str, ctx: ssl.SSLContext):
    """client(port, n): n keep-alive requests on one connection (kind
    'keepalive', PAUSE between them) or n connections of one request each
    ('connections'), of head `head`, over scheme."""
    fn = B.HEADS[head][1]
    tls = ctx if scheme == 'https' else None
    if kind == 'keepalive':
        return lambda port, n: B.keepalive_client(port, n, fn(port), tls,
                                                  PAUSE)
    return lambda port, n: B.connections_client(port, n, fn(port), tls)


def check_framed(root: str, tls: tuple[Path, Path],
                 ctx: ssl.SSLContext) -> str:
    """The shim limits HTTPS per request: at 1/m, the second request on one
    TLS connection gets its 429. Returns the protocol and cipher that
    connection negotiated."""
    srv = B.Nginx(root, 1, shim_rule=B.NEVER_LIMITS.replace(
        '100000000/s', '1/m'), tls=tls)
    got = []
    try:
        srv.start()
        with B.connect(srv.port, ctx) as s:
            f = s.makefile('rb')
            for _ in range(2):
                s.sendall(B.head_small(srv.port))
                line = f.readline()
                got.append(line)
                if not line.startswith(b'HTTP/1.1 200'):
                    break
                B.read_answer_rest(f)
            proto = f'{s.version()}, {s.cipher()[0]}'
        srv.check_shim()
        logs = srv.logs()
    finally:
        srv.stop()
    if got[:1] != [b'HTTP/1.1 200 OK\r\n'] or len(got) != 2 or \
            not got[1].startswith(b'HTTP/1.1 429'):
        raise RuntimeError(f'the shim does not limit HTTPS per request: '
                           f'{got!r}\n{logs[-2000:]}')
    if 'TLS: requests framed through libssl' not in logs:
        raise RuntimeError('the shim did not say it frames TLS:\n'
                           + logs[-2000:])
    return proto


# -- the figures ------------------------------------------------------------

def run_all(what: str, measure, tls, heads, ctx, kind, n1, n2):
    """{head: {(scheme, key): measure(kw, client, n1, n2, tag)}}."""
    out = {}
    for h in heads:
        out[h] = {}
        for scheme, key, kw in variants(tls):
            r = measure(kw, client(kind, h, scheme, ctx), n1, n2,
                        f'{what}-{h}-{scheme}-{key}')
            out[h][(scheme, key)] = r
            log(f'  {what} {h} {scheme} ({key}): '
                f'{sum(r.values()):,.3f}')
    return out


def shim_added(tot: dict) -> dict:
    """Per scheme: (b) - (a), and b / a."""
    return {s: (tot[(s, 'b')] - tot[(s, 'a')],
                tot[(s, 'b')] / tot[(s, 'a')] if tot[(s, 'a')] else 0.0)
            for s in SCHEMES}


def goal_ir(added: dict) -> str:
    """Issue 27's goal for instructions: over https the shim adds no more
    than over http."""
    d = added['https'][0] - added['http'][0]
    return ('met' if d <= 0 else '**not met**') + f' ({d:+,.0f})'


# The shim's system calls by the clock, not by request: the hot reload's
# `stat` of its configuration and `fstat` of its segment, once a second at
# most (both newfstatat), which the paced client's seconds show.
TIMED = 'newfstatat'


def per_request_added(calls: dict, scheme: str) -> float:
    """(b) - (a) of the system calls of a request over scheme, the
    shim's timed ones (TIMED) left out."""
    return sum(calls[(scheme, 'b')].get(n, 0) - calls[(scheme, 'a')].get(n, 0)
               for n in set(calls[(scheme, 'a')]) | set(calls[(scheme, 'b')])
               if n != TIMED)


def goal_calls(d: float) -> str:
    """+0 system calls over https; counts are of 1,000 requests or so, so
    a call in every request is 1.000 and one in the whole run 0.001."""
    return 'met' if abs(d) < 0.01 else f'**not met** ({d:+.3f})'


def object_groups(objs: dict) -> dict:
    """An object split's groups: TLS (libssl + libcrypto), nginx, the
    shim, and the rest (libc, the loader, ...)."""
    g = {'TLS (libssl + libcrypto)': 0.0, 'nginx': 0.0, SHIM_OBJ: 0.0,
         'other (libc, ld.so, ...)': 0.0}
    for o, v in objs.items():
        if o in TLS_OBJS:
            g['TLS (libssl + libcrypto)'] += v
        elif o == 'nginx':
            g['nginx'] += v
        elif o == SHIM_OBJ:
            g[SHIM_OBJ] += v
        else:
            g['other (libc, ld.so, ...)'] += v
    return g


def cols_header(first: str, fmt_cols=None) -> list[str]:
    return [f'| {first} | http (a) | http (b) | http b - a | https (a) | '
            'https (b) | https b - a | (https - http) of b - a |',
            '|---|' + '---:|' * 7]


def row(name: str, v: dict, fmt: str) -> str:
    dh = v[('http', 'b')] - v[('http', 'a')]
    dt = v[('https', 'b')] - v[('https', 'a')]
    return (f'| {name} | {v[("http", "a")]:{fmt}} | {v[("http", "b")]:{fmt}} '
            f'| {dh:+{fmt}} | {v[("https", "a")]:{fmt}} | '
            f'{v[("https", "b")]:{fmt}} | {dt:+{fmt}} | {dt - dh:+{fmt}} |')


def split_table(per: dict, fmt: str, names=None, bold_total=True) -> list[str]:
    """Rows of a {(scheme, key): {name: value}} per name (objects or
    syscalls), then the total."""
    runs = list(per)
    if names is None:
        names = sorted({n for r in runs for n, v in per[r].items()
                        if abs(v) >= (0.5 if fmt.startswith(',') else 0.0005)},
                       key=lambda n: (-max(per[r].get(n, 0) for r in runs),
                                      n))
    out = []
    for n in names:
        out.append(row(n, {r: per[r].get(n, 0) for r in runs}, fmt))
    tot = {r: sum(per[r].values()) for r in runs}
    t = row('**total**', tot, fmt)
    out.append(t)
    return out


def unnamed_merged(fns: dict) -> dict:
    """Code in no object (`???`, valgrind's and the loader's trampolines)
    sits at other addresses in each process: one row for all of it."""
    out = {}
    for (o, fn), v in fns.items():
        k = (o, '(code outside any object)') if o == '???' else (o, fn)
        out[k] = out.get(k, 0) + v
    return out


def function_rows(ins: dict, top: int) -> list[str]:
    """The functions whose cost the shim changes over https, by |(b) - (a)|:
    the shim's own and those of libssl, libcrypto, libc, nginx that its
    run calls more (or less) than nginx alone; clones merged."""
    m = {r: unnamed_merged(cgout.merge_clones(ins[r])) for r in ins}
    fns = set().union(*m.values())
    rows = []
    for f in fns:
        v = {r: m[r].get(f, 0) for r in ins}
        dt = v[('https', 'b')] - v[('https', 'a')]
        dh = v[('http', 'b')] - v[('http', 'a')]
        if abs(dt) >= 1 or abs(dh) >= 1:
            rows.append((f, v, dt, dh))
    rows.sort(key=lambda r: (-abs(r[2]), -abs(r[3]), r[0]))
    out = [f'| function (object) | https (b) | https (a) | https b - a | '
           'http b - a |', '|---|---:|---:|---:|---:|']
    for (o, fn), v, dt, dh in rows[:top]:
        out.append(f'| `{fn}` ({o}) | {v[("https", "b")]:,.0f} | '
                   f'{v[("https", "a")]:,.0f} | {dt:+,.0f} | {dh:+,.0f} |')
    rest_t = sum(r[2] for r in rows[top:])
    rest_h = sum(r[3] for r in rows[top:])
    out.append(f'| the other {max(0, len(rows) - top)} functions | | | '
               f'{rest_t:+,.0f} | {rest_h:+,.0f} |')
    return out


def instructions_section(res: dict, top: int, per: str) -> tuple[list, dict]:
    """Per head: the object split and the functions; the totals."""
    out, totals = [], {}
    for h, ins in res.items():
        objs = {r: cgout.by_object(ins[r]) for r in ins}
        out += [f'#### {h}: {B.HEADS[h][0]} ({B.head_len(h):,} bytes), '
                f'Ir per {per}', '']
        out += cols_header('object')
        out += split_table(objs, ',.0f')
        out += ['', 'Grouped:', '']
        out += cols_header('group')
        out += split_table({r: object_groups(objs[r]) for r in objs}, ',.0f',
                           names=list(object_groups({})))
        out += ['', f'Where (b) - (a) goes over https (exclusive Ir per {per}, '
                f'top {top} functions by |https b - a|):', '']
        out += function_rows(ins, top)
        out.append('')
        totals[h] = ({r: sum(objs[r].values()) for r in objs},
                     {r: objs[r].get(SHIM_OBJ, 0) for r in objs})
    return out, totals


def summary_ir(totals: dict, per: str) -> list[str]:
    out = [f'| head | bytes | http (a) | http (b) | b / a | b - a | of which '
           f'{SHIM_OBJ} | https (a) | https (b) | b / a | b - a | of which '
           f'{SHIM_OBJ} | goal: https b - a <= http b - a |',
           '|---|---:|' + '---:|' * 10 + '---|']
    for h, (tot, shim) in totals.items():
        ad = shim_added(tot)
        out.append(
            f'| {h} | {B.head_len(h):,} | {tot[("http", "a")]:,.0f} | '
            f'{tot[("http", "b")]:,.0f} | {ad["http"][1]:.3f} | '
            f'{ad["http"][0]:+,.0f} | {shim[("http", "b")]:,.0f} | '
            f'{tot[("https", "a")]:,.0f} | {tot[("https", "b")]:,.0f} | '
            f'**{ad["https"][1]:.3f}** | **{ad["https"][0]:+,.0f}** | '
            f'{shim[("https", "b")]:,.0f} | {goal_ir(ad)} |')
    out.append('')
    return out


def syscalls_section(res: dict, per: str) -> tuple[list, dict]:
    out, totals = [], {}
    for h, calls in res.items():
        out += [f'#### {h}: system calls per {per}', '']
        out += cols_header('syscall')
        out += split_table(calls, '.3f')
        out.append('')
        totals[h] = {r: sum(calls[r].values()) for r in calls}
    out += [f'System calls per {per} (goal: +0 over https; b - a without '
            f'the shim\'s `{TIMED}`, its hot reload\'s, by the clock: '
            'column "timed"):', '',
            '| head | http (a) | http (b) | b - a | timed | https (a) | '
            'https (b) | b - a | timed | goal |',
            '|---|' + '---:|' * 8 + '---|']
    for h, tot in totals.items():
        c = res[h]
        timed = {s: c[(s, 'b')].get(TIMED, 0) - c[(s, 'a')].get(TIMED, 0)
                 for s in SCHEMES}
        d = {s: per_request_added(c, s) for s in SCHEMES}
        out.append(f'| {h} | {tot[("http", "a")]:.3f} | '
                   f'{tot[("http", "b")]:.3f} | {d["http"]:+.3f} | '
                   f'{timed["http"]:+.3f} | {tot[("https", "a")]:.3f} | '
                   f'{tot[("https", "b")]:.3f} | **{d["https"]:+.3f}** | '
                   f'{timed["https"]:+.3f} | {goal_calls(d["https"])} |')
    out.append('')
    return out, totals


# -- measurements (bench_http's machinery) --------------------------------

# What the count leaves out, so that two runs give the same figures
# (callgrind stops collecting on entry to each function named and starts
# again on its return):
# - the handshake's RSA signature (libcrypto's RSA_private_encrypt, the
#   whole private-key operation: blinding, both exponentiations), which
#   is not the same number of instructions from one handshake to the next
#   (RSA blinding: RSA_setup_blinding's modular inverse, the BN_* loops),
#   by some hundred thousand: the difference of two processes, each with
#   its own handshake, spread that over its requests (+-300 a request
#   between runs, in functions no request calls). It runs once a
#   handshake and for nothing else; the rest of a handshake (X25519, the
#   key schedule, the records) is the same count every time.
# - what runs by the clock, not by request: nginx's ngx_time_update (its
#   cached time strings, formatted anew each second) and the shim's
#   rl_shim_tick_slow (its once-a-second summaries and hot-reload look),
#   whose counts follow how many seconds a run lasted, which valgrind and
#   the machine's load decide (+-80 a request between two runs of the same
#   plaintext nginx).
# The per-connection figures (--only handshake) count everything.
STEADY = ('--toggle-collect=RSA_private_encrypt',
          '--toggle-collect=ngx_time_update',
          '--toggle-collect=rl_shim_tick_slow', '--collect-atstart=yes')


def measure_ir(root, tool_args=STEADY):
    def m(kw, cl, n1, n2, tag):
        return B.instructions_per_request(root, kw, cl, n1, n2, tag,
                                          tool_args)
    return m


def measure_calls(root):
    def m(kw, cl, n1, n2, tag):
        return B.syscalls_run(root, kw, cl, n1, n2)
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--shim', default=str(B.SHIM),
                    help='the shim to preload (default build/librlshim.so)')
    ap.add_argument('--only', default='instructions,syscalls,handshake',
                    help='sections to run (comma separated)')
    ap.add_argument('--heads', default=','.join(TLS_HEADS),
                    help=f'request heads (of {",".join(TLS_HEADS)})')
    ap.add_argument('--requests', default='200,1200',
                    help='N1,N2 keep-alive requests on one connection '
                    '(default 200,1200)')
    ap.add_argument('--connections', default='50,150',
                    help='C1,C2 connections of one request each, for the '
                    'handshake (default 50,150)')
    ap.add_argument('--top', type=int, default=15,
                    help='functions listed per head (default 15)')
    ap.add_argument('--count-all', action='store_true',
                    help='count everything in the keep-alive figures too (by '
                    'default callgrind leaves out the handshake\'s RSA '
                    'signature and what runs by the clock: STEADY)')
    ap.add_argument('--keep', default=None,
                    help='a directory to keep the callgrind outputs in')
    args = ap.parse_args()
    only = set(args.only.split(','))
    try:
        n1, n2 = parse_counts(args.requests, '--requests')
        c1, c2 = parse_counts(args.connections, '--connections')
    except ValueError as e:
        print(f'bench_tls: {e}', file=sys.stderr)
        return 1
    heads = args.heads.split(',')
    for h in heads:
        if h not in TLS_HEADS:
            print(f'bench_tls: no head {h!r} (of {", ".join(TLS_HEADS)})',
                  file=sys.stderr)
            return 1
    path = os.environ.get('PATH', '') + ':/usr/sbin:/sbin'
    for tool in ('nginx', 'openssl', 'strace') + \
            (('valgrind',) if only & {'instructions', 'handshake'} else ()):
        if not shutil.which(tool, path=path):
            print(f'bench_tls: {tool} not found', file=sys.stderr)
            return 1
    shim = Path(args.shim).resolve()
    if not shim.exists():
        print(f'bench_tls: {shim} missing: run make', file=sys.stderr)
        return 1
    if args.keep:
        B.KEEP = args.keep
        os.makedirs(B.KEEP, exist_ok=True)

    root = tempfile.mkdtemp(prefix='rlshim-bench-tls-')
    shim_id = B.shim_identity(shim)
    B.SHIM = Path(root) / 'librlshim.so'
    shutil.copyfile(shim, B.SHIM)
    p = print
    try:
        tls = make_cert(Path(root))
        ctx = client_context()
        log('the shim frames HTTPS? (1/m: 200 then 429 on one connection)')
        proto = check_framed(root, tls, ctx)
        now = datetime.datetime.now(datetime.timezone.utc)
        p(f'Command: `python3 tools/bench/bench_tls.py'
          f'{" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""}`. '
          f'Run of {now:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} vCPUs, '
          f'Linux {platform.release()}, '
          f'{B.tool_version(["nginx", "-v"])}, {ssl.OPENSSL_VERSION} '
          f'(the client\'s), {B.tool_version(["openssl", "version"])} '
          f'(nginx\'s libssl), '
          f'{B.tool_version(["valgrind", "--version"])}.')
        p()
        p(f'Shim (b): {shim_id}.')
        p()
        p('nginx as bench_http\'s (one worker, `keepalive_requests 1000000`, '
          f'a {len(B.INDEX_HTML)}-byte `index.html`), over http `listen '
          '127.0.0.1:PORT reuseport` and over https `listen 127.0.0.1:PORT '
          'ssl reuseport` + `ssl_certificate` of `openssl req -x509 -newkey '
          'rsa:2048 -nodes -subj /CN=localhost` (made at the run\'s start) '
          '+ `ssl_protocols TLSv1.2 TLSv1.3` (nginx\'s defaults otherwise: '
          'no session cache, session tickets on). The client: Python\'s '
          '`ssl`, no verification, ALPN `http/1.1`; negotiated: '
          f'{proto}; outside valgrind and strace. '
          '(a) nginx alone, (b) under `LD_PRELOAD=librlshim.so` with '
          '`[limit:all] match = * rate = 100000000/s key = ip` (never '
          'limits); checked first: at `rate = 1/m` the second request on '
          'one TLS connection gets the shim\'s 429.')
        p()
        if 'instructions' in only:
            log('instructions per keep-alive request (callgrind)')
            res = run_all('ir', measure_ir(root, () if args.count_all
                                           else STEADY), tls, heads, ctx,
                          'keepalive', n1, n2)
            lines, totals = instructions_section(res, args.top, 'request')
            p('### User-space instructions per keep-alive request')
            p()
            p('Command: `valgrind --tool=callgrind nginx ...` (`master_process '
              f'off`), N = {n1} and N = {n2} requests on one connection '
              f'({PAUSE * 1000:.0f} ms between an answer and the next '
              'request, so that nginx\'s read after its answer finds '
              'nothing, as behind a network) in '
              f'two fresh processes; (Ir at {n2} - Ir at {n1}) / {n2 - n1}, '
              'every cost line charged to its object and function '
              '(cgout.py).')
            p()
            for line in summary_ir(totals, 'request') + lines:
                p(line)
            sys.stdout.flush()
        if 'syscalls' in only:
            log('system calls per keep-alive request (strace -c)')
            res = run_all('calls', measure_calls(root), tls, heads, ctx,
                          'keepalive', n1, n2)
            lines, _ = syscalls_section(res, 'request')
            p('### System calls per keep-alive request')
            p()
            p('Command: `strace -f -c -o FILE -p <worker pid>`, N = '
              f'{n1} and N = {n2} requests on one connection, both on the '
              f'same worker warmed up by 100; (calls at {n2} - calls at '
              f'{n1}) / {n2 - n1}.')
            p()
            for line in lines:
                p(line)
            sys.stdout.flush()
        if 'handshake' in only:
            log('per new connection: the handshake (callgrind, strace -c)')
            ir = run_all('hs-ir', measure_ir(root, ()), tls, ['small'], ctx,
                         'connections', c1, c2)
            calls = run_all('hs-calls', measure_calls(root), tls, ['small'],
                            ctx, 'connections', c1, c2)
            lines, totals = instructions_section(ir, args.top, 'connection')
            p('### Per new connection: the handshake')
            p()
            p(f'C = {c1} and C = {c2} connections one after another, each '
              'one small request answered and then closed by the client '
              '(over https a full handshake each: the client keeps no '
              'session, and sends its request once the server\'s session '
              'tickets came and 5 ms more; it ends the connection with its '
              'FIN, no close_notify, and waits for the server\'s close); '
              '(count at '
              f'{c2} - count at {c1}) / {c2 - c1}. Instructions as above '
              '(callgrind, two fresh processes), system calls as above '
              '(strace, one worker warmed up by 100 connections).')
            p()
            for line in summary_ir(totals, 'connection') + lines:
                p(line)
            for line in syscalls_section(calls, 'connection')[0]:
                p(line)
            sys.stdout.flush()
    finally:
        B.cleanup_segments()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
