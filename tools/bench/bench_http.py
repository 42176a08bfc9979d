#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/bench_http.py - the shim in front of nginx, each figure next to
its baseline from the same run. Python 3 stdlib only; needs nginx, wrk and
strace on PATH and a built build/librlshim.so (`make`); valgrind for the
instruction counts, ab (apache2-utils) for the head ab-real.

    python3 tools/bench/bench_http.py [--duration 10] [--reps 3]
        [--workers 1,2] [--only throughput,syscalls,instructions,accuracy]
        [--shim build/librlshim.so] [--shim-b OTHER/build/librlshim.so]
        [--heads small,ab,ab-real,browser] [--requests 2000,4000]
        [--top 15] [--keep DIR] [--rules ip,cookie,jwt,jwt-unverified]

Prints markdown to stdout (progress goes to stderr):

1. throughput: wrk -t1 -c32 against nginx serving a small static file with
   keep-alive, as (a) nginx alone, (b) nginx under LD_PRELOAD=librlshim.so
   with a rule that never limits, (B) the same under --shim-b if given,
   (c) nginx alone with its own limit_req at an equally non-limiting rate.
   Variants interleaved a,b,(B),c,a,b,(B),c,...; medians of req/s and of
   wrk's p50/p99 latency; --reps and --duration (the lead's figures: 5 x
   10 s).
2. syscalls: strace -f -c attached to the one nginx worker while a client
   sends N sequential keep-alive requests on one connection, for N = 2000
   and N = 4000 (--requests); (count(4000) - count(2000)) / 2000 = system
   calls per request, as (a), (b) and (B), per syscall name, for each head
   (--heads): small (`GET /index.html` + Host, 41 bytes), ab (ab's own
   head, ~107 bytes, sent by the Python client), ab-real (`ab -k -c 1 -n
   N` itself as the client) and browser (Firefox's fields and a 1.4 KiB
   Cookie, ~1.9 KiB). Exact, unlike times.
   instructions (when valgrind is installed): the same clients against
   nginx under callgrind; user-space instructions per request by object
   and the shim's top functions, the same difference of two runs, read
   from callgrind's output file by cgout.py (every line, checked against
   callgrind's total).
   --rules (instructions only): instead of (b) and (B), nginx under the
   shim once per rule named (`key = ip` always among them, the others'
   reference), each never limiting; per head and rule the instructions
   per request, their ratio to and difference from the ip rule's and
   nginx alone's. The head `user` carries what they key by: a session
   cookie and an HS256 bearer token (signed with a key file made in the
   run's temp directory, mode 0600).
3. accuracy: one client key at 5000/s, burst 1, under the shim, and nginx's
   limit_req at 5000r/s (no burst), each driven over its limit by wrk;
   admitted (non-429) per second / 5000. Then both again with a bucket of
   5 requests, which shows what burst 1 loses to gaps in the arrivals.

Besides each wrk run it reports the CPU used by everything else on the
machine meanwhile, so that a disturbed run can be told from a slow variant.

Every nginx runs from its own temp directory with its own port; every shim
run gets a fresh segment /dev/shm/rlshim-bench-<pid>-<n>, removed after.
Shim B is copied under the same file name as the shim (another directory),
so that callgrind names its object and functions alike.
"""

import argparse
import base64
import datetime
import glob
import hashlib
import hmac
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The tests' helpers for ports and process groups serve the benchmark too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'integration'))
from servers import children_of, free_port, group_alive  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgout  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / 'build' / 'librlshim.so'
SHM_PREFIX = f'rlshim-bench-{os.getpid()}'
MTIME = 1767225599  # 2025-12-31 23:59:59 UTC: index.html's, every run
INDEX_HTML = (b'<!DOCTYPE html>\n<html>\n<head>\n'
              b'<title>Welcome to nginx!</title>\n</head>\n<body>\n'
              b'<h1>Welcome to nginx!</h1>\n<p>If you see '
              b'this page, the nginx web server is successfully installed and '
              b'working.</p>\n</body>\n</html>\n')

# wrk scripts. done() runs in its own Lua state, so per-thread counters are
# collected through the thread objects setup() was given.
LUA_LATENCY = r'''
done = function(summary, latency, requests)
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d " ..
    "status_errors=%d connect_errors=%d read_errors=%d write_errors=%d " ..
    "timeouts=%d\n",
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    summary.errors.status, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout))
end
'''

LUA_STATUS = r'''
local threads = {}
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  ok = 0
  limited = 0
  other = 0
end
function response(status, headers, body)
  if status == 429 then
    limited = limited + 1
  elseif status == 200 then
    ok = ok + 1
  else
    other = other + 1
  end
end
done = function(summary, latency, requests)
  local o, l, x = 0, 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok")
    l = l + t:get("limited")
    x = x + t:get("other")
  end
  io.write(string.format(
    "RESULT ok=%d limited=%d other=%d requests=%d duration_us=%d " ..
    "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d\n",
    o, l, x, summary.requests, summary.duration,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.timeout))
end
'''

NGINX_CONF = '''\
worker_processes {workers};
daemon off;
master_process {master};
{user}
pid {work}/nginx.pid;
error_log {work}/error.log warn;

events {{
    use epoll;
    worker_connections 4096;
}}

http {{
    default_type text/html;
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {work}/tmp/client_body;
    proxy_temp_path {work}/tmp/proxy;
    fastcgi_temp_path {work}/tmp/fastcgi;
    uwsgi_temp_path {work}/tmp/uwsgi;
    scgi_temp_path {work}/tmp/scgi;
{limit_zone}
    server {{
        listen 127.0.0.1:{port}{ssl} reuseport;
        root {work}/docroot;
{limit_req}{tls}
    }}
}}
'''

def tls_lines(cert: Path, key: Path) -> str:
    """The server block's TLS lines: the certificate, and TLS 1.3 offered
    (nginx 1.22's default list stops at TLS 1.2)."""
    return (f'        ssl_certificate {cert};\n'
            f'        ssl_certificate_key {key};\n'
            '        ssl_protocols TLSv1.2 TLSv1.3;\n')


_seg = 0
_made_segments: list[str] = []


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Nginx:
    """One nginx (master + workers) in its own temp dir and process group.

    shim_rule: None (no LD_PRELOAD) or the text of a [limit:...] section.
    limit: None or (zone rate 'Nr/s', limit_req line) for nginx's own limit.
    shim_global: more lines of the shim's [global] (e.g. headers_on = all).
    shim: the library to preload (default SHIM), e.g. an older build's.
    http: more lines of nginx's http block (e.g. sendfile on;).
    tls: None, or (certificate, key) files: `listen ... ssl` with them
    (bench_tls.py's HTTPS mode).
    """

    def __init__(self, root: str, workers: int, shim_rule: str | None = None,
                 limit: tuple[str, str] | None = None, master: bool = True,
                 wrapper: list[str] | None = None, shim_global: str = '',
                 shim: Path | None = None, http: str = '',
                 tls: tuple[Path, Path] | None = None):
        global _seg
        self.work = Path(tempfile.mkdtemp(prefix='nginx-', dir=root))
        self.port = free_port()
        self.workers = workers
        self.master = master
        self.wrapper = wrapper or []   # e.g. valgrind: runs nginx itself
        self.proc: subprocess.Popen | None = None
        self._files = []
        self.shm = None
        self.config = None
        self.shim = shim
        (self.work / 'docroot').mkdir()
        (self.work / 'docroot' / 'index.html').write_bytes(INDEX_HTML)
        # One modification time for every run: nginx formats it into each
        # answer's Last-Modified and ETag, and its digit loops cost by the
        # digits (a run at 09:07:03 costs ~10 instructions a request less
        # than one at 19:47:53).
        os.utime(self.work / 'docroot' / 'index.html', (MTIME, MTIME))
        for d in ('client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'):
            (self.work / 'tmp' / d).mkdir(parents=True)
        zone = req = ''
        if limit:
            zone = ('    limit_req_zone $binary_remote_addr zone=z:10m '
                    f'rate={limit[0]};\n'
                    '    limit_req_status 429;\n'
                    '    limit_req_log_level notice;\n')
            req = f'        {limit[1]}\n'
        if http:
            zone = f'    {http}\n' + zone
        user = 'user root root;' if os.geteuid() == 0 else ''
        (self.work / 'nginx.conf').write_text(NGINX_CONF.format(
            workers=workers, user=user, work=self.work, port=self.port,
            master='on' if master else 'off',
            limit_zone=zone, limit_req=req, ssl=' ssl' if tls else '',
            tls=tls_lines(*tls) if tls else ''))
        if shim_rule is not None:
            _seg += 1
            self.shm = f'{SHM_PREFIX}-{_seg}'
            self.config = self.work / 'rlshim.conf'
            self.config.write_text(f'[global]\nports = {self.port}\n'
                                   f'shm = {self.shm}\n{shim_global}\n'
                                   f'{shim_rule}')
            _made_segments.append(self.shm)

    def start(self, timeout: float = 10.0) -> None:
        env = dict(os.environ)
        env.pop('LD_PRELOAD', None)
        env.pop('RLSHIM_CONFIG', None)
        if self.config:
            env['LD_PRELOAD'] = str(self.shim or SHIM)
            env['RLSHIM_CONFIG'] = str(self.config)
        env['PATH'] = env.get('PATH', '') + ':/usr/sbin:/sbin'
        self._files = [open(self.work / 'stdout', 'wb'),
                       open(self.work / 'stderr', 'wb')]
        self.proc = subprocess.Popen(
            [*self.wrapper, 'nginx', '-p', str(self.work),
             '-c', str(self.work / 'nginx.conf'),
             '-e', str(self.work / 'error.log')],
            cwd=self.work, env=env, stdin=subprocess.DEVNULL,
            stdout=self._files[0], stderr=self._files[1],
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f'nginx exited {self.proc.returncode}:\n'
                                   + self.logs())
            if not self.master or len(self.worker_pids()) == self.workers:
                try:
                    # A bare connect: no request, no budget spent.
                    with socket.create_connection(('127.0.0.1', self.port),
                                                  timeout=0.5):
                        break
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('nginx not listening:\n' + self.logs())
            time.sleep(0.05)

    def worker_pids(self) -> list[int]:
        return children_of(self.proc.pid) if self.proc else []

    def logs(self) -> str:
        t = ''
        for n in ('stderr', 'error.log'):
            try:
                t += (self.work / n).read_text(errors='replace')
            except OSError:
                pass
        return t

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        resend = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            self.proc.poll()
            if self.proc.returncode is not None and not group_alive(pgid):
                break
            if time.monotonic() > resend and self.proc.returncode is None:
                # Under valgrind a SIGTERM that lands while the client
                # code runs is sometimes lost; nginx takes a second one.
                resend += 1.0
                try:
                    os.kill(pgid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)
        self.proc = None
        for f in self._files:
            f.close()
        if self.shm:
            try:
                os.unlink(f'/dev/shm/{self.shm}')
            except FileNotFoundError:
                pass

    def check_shim(self) -> None:
        """The shim must have said it is limiting, and made its segment."""
        if not self.config:
            return
        deadline = time.monotonic() + 3.0
        while True:
            text = self.logs()
            if 'msg="limiting"' in text and os.path.exists(
                    f'/dev/shm/{self.shm}'):
                return
            if time.monotonic() > deadline:
                raise RuntimeError('the shim is not active:\n'
                                   + text[-2000:])
            time.sleep(0.05)


def parse_result(out: str) -> dict:
    for line in out.splitlines():
        if line.startswith('RESULT '):
            return {k: int(v) for k, v in
                    (kv.split('=') for kv in line.split()[1:])}
    raise RuntimeError('no RESULT line from wrk:\n' + out)


CLK_TCK = os.sysconf('SC_CLK_TCK')


def cpu_busy_s() -> float:
    """Seconds of user + nice + system time on all CPUs since boot."""
    with open('/proc/stat') as f:
        t = f.readline().split()
    return (int(t[1]) + int(t[2]) + int(t[3])) / CLK_TCK


def proc_cpu_s(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of the processes pids."""
    user = system = 0
    for pid in pids:
        try:
            with open(f'/proc/{pid}/stat', 'rb') as f:
                stat = f.read().decode('ascii', 'replace')
        except OSError:
            continue
        fields = stat[stat.rfind(')') + 2:].split()
        user += int(fields[11])     # utime
        system += int(fields[12])   # stime
    return user / CLK_TCK, system / CLK_TCK


def wrk(args: list[str], script: Path, url: str, srv: 'Nginx') -> dict:
    """Runs wrk against srv. Adds to wrk's RESULT:
    srv_user_s, srv_sys_s: the CPU nginx (master and workers) used;
    other_pct: the CPU that processes other than wrk and this nginx used
    meanwhile, in % of all CPUs: the noise on a shared VM (approximate:
    tick-based accounting, irq and softirq time left out)."""
    pids = [srv.proc.pid, *srv.worker_pids()]
    busy0, srv0, t0 = cpu_busy_s(), proc_cpu_s(pids), time.monotonic()
    p = subprocess.Popen(['wrk', *args, '-s', str(script), url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode(errors='replace')
    p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    busy1, srv1, t1 = cpu_busy_s(), proc_cpu_s(pids), time.monotonic()
    if p.returncode != 0:
        raise RuntimeError(f'wrk failed: {out}')
    r = parse_result(out)
    r['srv_user_s'] = srv1[0] - srv0[0]
    r['srv_sys_s'] = srv1[1] - srv0[1]
    mine = r['srv_user_s'] + r['srv_sys_s'] + ru.ru_utime + ru.ru_stime
    other = max(0.0, (busy1 - busy0) - mine)
    r['other_pct'] = 100.0 * other / ((t1 - t0) * (os.cpu_count() or 1))
    return r


def fmt_int(x: float) -> str:
    return f'{x:,.0f}'


def fmt_us(us: float) -> str:
    return f'{us / 1000:.2f} ms' if us >= 1000 else f'{us:.0f} µs'


# -- 1. throughput ---------------------------------------------------------

QUIET_PCT = 5
NEVER_LIMITS = '[limit:all]\nmatch = *\nrate = 100000000/s\nkey = ip\n'
NGINX_NEVER = ('100000000r/s',
               'limit_req zone=z burst=1000000 nodelay;')


def bench_throughput(root: str, workers: int, duration: int, reps: int,
                     lua: Path, shim_b: Path | None = None) -> list[str]:
    variants = [('a', 'nginx alone', {}),
                ('b', 'nginx + librlshim.so (never limits)',
                 {'shim_rule': NEVER_LIMITS}),
                ('c', 'nginx + its own limit_req (never limits)',
                 {'limit': NGINX_NEVER})]
    if shim_b:
        variants.insert(2, ('B', 'nginx + shim B (--shim-b, the same rule)',
                            {'shim_rule': NEVER_LIMITS, 'shim': shim_b}))
    wrk_args = ['-t1', '-c32', f'-d{duration}s']
    runs = {v[0]: [] for v in variants}
    for rep in range(reps):
        for key, name, kw in variants:
            srv = Nginx(root, workers, **kw)
            try:
                srv.start()
                srv.check_shim()
                r = wrk(wrk_args, lua,
                        f'http://127.0.0.1:{srv.port}/index.html', srv)
                srv.check_shim()
            finally:
                srv.stop()
            r['rps'] = r['requests'] / (r['duration_us'] / 1e6)
            bad = (r['status_errors'] + r['connect_errors'] + r['read_errors']
                   + r['write_errors'] + r['timeouts'])
            r['bad'] = bad
            runs[key].append(r)
            log(f'  workers={workers} rep {rep + 1}/{reps} ({key}) '
                f'{r["rps"]:,.0f} req/s p50 {r["p50_us"]} µs '
                f'p99 {r["p99_us"]} µs errors {bad} '
                f'other CPU {r["other_pct"]:.0f}%')
    for v in runs.values():
        for r in v:
            r['user_us'] = 1e6 * r['srv_user_s'] / r['requests']
            r['sys_us'] = 1e6 * r['srv_sys_s'] / r['requests']
    fields = ('rps', 'p50_us', 'p99_us', 'user_us', 'sys_us')
    med = {k: {f: statistics.median(r[f] for r in v) for f in fields}
           for k, v in runs.items()}
    out = [f'#### worker_processes {workers}', '',
           '| variant | req/s (median) | runs (req/s) | p50 latency | '
           'p99 latency | nginx CPU per request, user + system | '
           'errors / non-2xx | other CPU load per run |',
           '|---|---:|---|---:|---:|---:|---:|---|']
    for key, name, _ in variants:
        m = med[key]
        each = ', '.join(fmt_int(r['rps']) for r in runs[key])
        other = ', '.join(f'{r["other_pct"]:.0f}%' for r in runs[key])
        bad = sum(r['bad'] for r in runs[key])
        out.append(f'| ({key}) {name} | {fmt_int(m["rps"])} | {each} | '
                   f'{fmt_us(m["p50_us"])} | {fmt_us(m["p99_us"])} | '
                   f'{m["user_us"]:.1f} + {m["sys_us"]:.1f} µs | {bad} | '
                   f'{other} |')
    rps = {k: med[k]['rps'] for k in med}

    def paired(x: str, y: str) -> str:
        return ', '.join(f'{rx["rps"] / ry["rps"]:.2f}'
                         for rx, ry in zip(runs[x], runs[y]))

    def goal(v: float, g: float) -> str:
        return f'>= {g}: ' + ('met' if v >= g else '**not met**')

    order = ','.join(k for k, _, _ in variants)
    rows = [('b', 'a', 'shim / nginx alone', 0.97),
            ('b', 'c', 'shim / nginx limit_req', 1.0)]
    if shim_b:
        rows += [('B', 'a', 'shim B / nginx alone', 0.97),
                 ('B', 'c', 'shim B / nginx limit_req', 1.0),
                 ('B', 'b', 'shim B / shim', None)]
    rows.append(('c', 'a', 'nginx limit_req / nginx alone', None))
    out += ['', f'| ratio | of the medians | per round ({order} run back to '
            'back) | goal (issue 14) |', '|---|---:|---|---|']
    for x, y, what, g in rows:
        out.append(f'| {x}/{y} ({what}) | {rps[x] / rps[y]:.3f} | '
                   f'{paired(x, y)} | '
                   f'{goal(rps[x] / rps[y], g) if g else "(context)"} |')
    out.append('')
    # The same medians over the quiet runs only, when each variant has one.
    quiet = {k: [r for r in v if r['other_pct'] < QUIET_PCT]
             for k, v in runs.items()}
    if all(quiet.values()):
        q = {k: statistics.median(r['rps'] for r in v)
             for k, v in quiet.items()}
        n = ', '.join(f'{k} {len(v)}' for k, v in quiet.items())
        meds = ', '.join(f'{k} {fmt_int(v)}' for k, v in q.items())
        ratios = ', '.join(f'{x}/{y} {q[x] / q[y]:.3f}'
                           for x, y, _, g in rows if g)
        out += [f'Quiet runs only (other CPU load < {QUIET_PCT}%; {n} runs): '
                f'median req/s {meds}; {ratios}.', '']
    else:
        out += [f'Quiet runs only (other CPU load < {QUIET_PCT}%): not every '
                'variant had one.', '']
    return out


# -- 2. system calls per request ------------------------------------------

# RL_BENCH_COOKIE=N adds a Cookie of N bytes to REQUEST (bench_answers.py's
# head; 1,500 makes it straddle nginx's first 1 KiB read).
_COOKIE = int(os.environ.get('RL_BENCH_COOKIE') or 0)
REQUEST = (b'GET /index.html HTTP/1.1\r\nHost: bench\r\n' +
           (b'Cookie: s=' + b'c' * (_COOKIE - 2) + b'\r\n' if _COOKIE > 2 else b'') +
           b'\r\n')

# The heads of issue 14, each a function of the server's port (ab's and a
# browser's Host carry it).


def head_small(port: int) -> bytes:
    return b'GET /index.html HTTP/1.1\r\nHost: bench\r\n\r\n'


def head_ab(port: int) -> bytes:
    """What `ab -k -c 1 -n N http://127.0.0.1:PORT/` (ApacheBench 2.3)
    sends, field for field and in its order."""
    return (b'GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n'
            b'Host: 127.0.0.1:%d\r\nUser-Agent: ApacheBench/2.3\r\n'
            b'Accept: */*\r\n\r\n' % port)


def _cookie(size: int) -> bytes:
    """A Cookie field of `size` bytes (name, colon and CRLF included) of
    the kind a site with analytics sets: a session, a CSRF token, consent
    and tracking ids; deterministic."""
    import hashlib
    parts = [b'session=' + hashlib.sha256(b'session').hexdigest().encode() * 2,
             b'csrftoken=' + hashlib.sha256(b'csrf').hexdigest().encode(),
             b'_ga=GA1.1.1234567890.1764547200',
             b'_ga_Q1W2E3R4T5=GS1.1.1764547200.3.1.1764550800.0.0.0',
             b'consent=analytics%3Dtrue%26ads%3Dfalse%26v%3D2',
             b'lang=en-GB', b'theme=dark', b'tz=Europe%2FBerlin']
    i = 0
    while True:
        field = b'Cookie: ' + b'; '.join(parts) + b'\r\n'
        if len(field) >= size:
            break
        parts.append(b'pref%d=' % i + hashlib.sha256(b'%d' % i).hexdigest()
                     .encode()[:40])
        i += 1
    # Trim the last value to land on size exactly.
    cut = len(field) - size
    return field[:len(field) - 2 - cut] + b'\r\n'


def head_browser(port: int) -> bytes:
    """Firefox's request for a page, with a 1.4 KiB Cookie: ~1.9 KiB, which
    straddles nginx's first 1 KiB read (client_header_buffer_size)."""
    return (b'GET /index.html HTTP/1.1\r\n'
            b'Host: 127.0.0.1:%d\r\n'
            b'User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) '
            b'Gecko/20100101 Firefox/128.0\r\n'
            b'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,'
            b'*/*;q=0.8\r\n'
            b'Accept-Language: en-GB,en;q=0.5\r\n'
            b'Accept-Encoding: gzip, deflate, br, zstd\r\n'
            b'Referer: http://127.0.0.1:%d/articles/2026/12/hot-path\r\n'
            b'Connection: keep-alive\r\n' % (port, port)
            + _cookie(1434) +
            b'Upgrade-Insecure-Requests: 1\r\n'
            b'Sec-Fetch-Dest: document\r\n'
            b'Sec-Fetch-Mode: navigate\r\n'
            b'Sec-Fetch-Site: same-origin\r\n'
            b'Sec-Fetch-User: ?1\r\n'
            b'Priority: u=0, i\r\n\r\n')


def read_answer(f, i: int) -> None:
    """One 200 answer read whole from file f (request i's)."""
    line = f.readline()
    if not line.startswith(b'HTTP/1.1 200'):
        raise RuntimeError(f'request {i}: {line!r}')
    read_answer_rest(f)


def read_answer_rest(f) -> None:
    """An answer's fields and body, after its status line."""
    length = None
    while True:
        h = f.readline()
        if h in (b'\r\n', b''):
            break
        k, _, v = h.partition(b':')
        if k.strip().lower() == b'content-length':
            length = int(v)
    if length is None:
        raise RuntimeError('no Content-Length')
    if len(f.read(length)) != length:
        raise RuntimeError('short body')


def connect(port: int, tls=None) -> socket.socket:
    """A connection to the server, through TLS when tls (an
    ssl.SSLContext) is given: the handshake done."""
    s = socket.create_connection(('127.0.0.1', port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is not None:
        try:
            s = tls.wrap_socket(s, server_hostname='localhost')
        except BaseException:
            s.close()
            raise
    return s


def keepalive_client(port: int, n: int, head: bytes | None = None,
                     tls=None, pause: float = 0.0) -> None:
    """n sequential GETs (REQUEST, or head) on one keep-alive connection,
    each answered 200; over TLS when tls (an ssl.SSLContext) is given;
    pause: seconds between an answer and the next request (the server's
    read after its answer then always finds nothing, as behind a network's
    round trip)."""
    head = head or REQUEST
    with connect(port, tls) as s:
        f = s.makefile('rb')
        for i in range(n):
            if pause and i:
                time.sleep(pause)
            s.sendall(head)
            read_answer(f, i)


def connections_client(port: int, n: int, head: bytes | None = None,
                       tls=None, pause: float = 0.005) -> None:
    """n connections one after another, each one GET answered 200, then
    ended by the client (its FIN; over TLS no close_notify) and the
    server's close awaited. Over TLS a full handshake each (no session
    resumed); the request goes once the server's session tickets came
    (it has read the client's Finished) and `pause` more, so the server
    reads the handshake's end and the request apart, whatever valgrind or
    strace do to its speed."""
    head = head or REQUEST
    for i in range(n):
        with connect(port, tls) as s:
            if tls is not None:
                _tickets(s)
                time.sleep(pause)
            f = s.makefile('rb')
            s.sendall(head)
            read_answer(f, i)
            f.close()
            # SSLSocket.shutdown leaves TLS: the socket's own FIN, then
            # the socket read to the server's.
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):
                pass


def _tickets(s) -> None:
    """Wait for what the server sends after the handshake (TLS 1.3 session
    tickets) and let the session read it."""
    import select
    import ssl
    select.select([s], [], [], 5)
    s.setblocking(False)
    try:
        s.recv(1)
        raise RuntimeError('data before any request')
    except ssl.SSLWantReadError:
        pass
    finally:
        s.settimeout(30)


AB_OK = re.compile(r'^(Complete|Failed|Keep-Alive) requests:\s+(\d+)', re.M)


def ab_client(port: int, n: int) -> None:
    """`ab -k -c 1 -n n` (the issue's client): one keep-alive connection,
    n requests, every one answered in full and kept alive."""
    p = subprocess.run(['ab', '-k', '-c', '1', '-n', str(n),
                        f'http://127.0.0.1:{port}/'], capture_output=True,
                       text=True, timeout=600)
    got = dict(AB_OK.findall(p.stdout))
    if p.returncode != 0 or got != {'Complete': str(n), 'Failed': '0',
                                    'Keep-Alive': str(n)}:
        raise RuntimeError(f'ab -k -c 1 -n {n}: exit {p.returncode}, '
                           f'{got}\n{p.stdout[-1500:]}{p.stderr[-500:]}')


# --rules: the head of a logged-in user, the key file its token is signed
# with (64 bytes: RFC 7518 asks 32 or more) and the rules that key by them.
JWT_SECRET = hashlib.sha256(b'rlshim-bench').hexdigest().encode()
SESSION_ID = b'0f3c9a7be21d4c58a6e9f1b2c3d4e5f6'    # 32 hex, as frameworks
_JWT_IAT = int(time.time())


def b64url(b: bytes) -> bytes:
    return base64.urlsafe_b64encode(b).rstrip(b'=')


def make_jwt(secret: bytes, iat: int) -> bytes:
    """An HS256 JWT of the usual claims (sub, iat, exp a day on), ~200
    bytes."""
    head = b64url(b'{"alg":"HS256","typ":"JWT"}')
    body = b64url(b'{"sub":"user-4711","org":"acme-corp","name":"Ada Lovelace",'
                  b'"iat":%d,"exp":%d}' % (iat, iat + 86400))
    sig = hmac.new(secret, head + b'.' + body, hashlib.sha256).digest()
    return head + b'.' + body + b'.' + b64url(sig)


def head_user(port: int) -> bytes:
    """small + a session cookie + a bearer token: what a logged-in user's
    API client sends."""
    return (b'GET /index.html HTTP/1.1\r\nHost: bench\r\n'
            b'Cookie: session_id=' + SESSION_ID + b'\r\n'
            b'Authorization: Bearer ' + make_jwt(JWT_SECRET, _JWT_IAT) +
            b'\r\n\r\n')


# name: (what, client(port, n), head(port) or None for ab's own)
HEADS = {
    'small': ('`GET /index.html` + Host', head_small),
    'ab': ("ab's head, sent by the Python client", head_ab),
    'ab-real': ('`ab -k -c 1 -n N` itself as the client', None),
    'browser': ('Firefox fields + a 1.4 KiB Cookie', head_browser),
    'user': ('small + `Cookie: session_id=<32 hex>` + `Authorization: Bearer '
             '<HS256 JWT>`', head_user),
}
DEFAULT_HEADS = ['small', 'ab', 'ab-real', 'browser']

# name: (what, the rule's key lines; {secret} the key file)
RULES = {
    'ip': ('`key = ip`', 'key = ip\n'),
    'cookie': ('`key = cookie:session_id`', 'key = cookie:session_id\n'),
    'jwt': ('`key = jwt:sub` + `jwt_secret`',
            'key = jwt:sub\njwt_secret = {secret}\n'),
    'jwt-unverified': ('`key = jwt:sub`, no secret', 'key = jwt:sub\n'),
}


def parse_rules(text: str) -> list[str]:
    """--rules: the names in order, ip first (added if missing: the others
    are read beside it); ValueError for an unknown or repeated one."""
    names = [r for r in text.split(',') if r]
    for r in names:
        if r not in RULES:
            raise ValueError(f'no rule {r!r} (of {", ".join(RULES)})')
    if len(set(names)) != len(names):
        raise ValueError(f'a rule named twice in {text!r}')
    return ['ip'] + [r for r in names if r != 'ip']


def rule_section(name: str, secret: Path | None) -> str:
    """The shim's rule for --rules NAME: never limits, like NEVER_LIMITS."""
    return ('[limit:all]\nmatch = *\nrate = 100000000/s\n' +
            RULES[name][1].format(secret=secret))


def head_table(h, col, names, per, tot, keys, fmt, extra):
    """One head's table: a row per name (per[variant][name]), each variant's
    figure and its difference from (a), then the totals (`extra(k)` after
    each total's difference)."""
    out = [f'#### {h}: {HEADS[h][0]} ({head_len(h):,} bytes)', '',
           f'| {col} | ' + ' | '.join(f'({k})' for k in keys) + ' | ' +
           ' | '.join(f'{k} - a' for k in keys[1:]) + ' |',
           '|---|' + '---:|' * (2 * len(keys) - 1)]
    for n in names:
        v = {k: per[k].get(n, 0) for k in keys}
        out.append(f'| {n} | ' + ' | '.join(f'{v[k]:{fmt}}' for k in keys) +
                   ' | ' + ' | '.join(f'{v[k] - v["a"]:+{fmt}}'
                                      for k in keys[1:]) + ' |')
    out.append('| **total** | ' + ' | '.join(f'**{tot[k]:{fmt}}**'
                                             for k in keys) + ' | ' +
               ' | '.join(f'**{tot[k] - tot["a"]:+{fmt}}{extra(k)}**'
                          for k in keys[1:]) + ' |')
    return out


def head_len(name: str) -> int:
    fn = HEADS[name][1] or head_ab
    return len(fn(free_port()))


def client_for(name: str):
    head = HEADS[name][1]
    if head is None:
        return ab_client
    return lambda port, n: keepalive_client(port, n, head(port))


def parse_strace_c(path: Path) -> dict[str, int]:
    calls = {}
    for line in path.read_text().splitlines():
        t = line.split()
        if len(t) < 5 or t[0].startswith('%') or t[0].startswith('-'):
            continue
        if t[-1] == 'total':
            continue
        try:
            calls[t[-1]] = int(t[3])
        except ValueError:
            continue
    return calls


def strace_count(pid: int, work: Path, tag: str, port: int,
                 n: int, client=None) -> dict[str, int]:
    out = work / f'strace-{tag}-{n}.txt'
    err = work / f'strace-{tag}-{n}.err'
    with open(err, 'wb') as errf:
        p = subprocess.Popen(['strace', '-f', '-c', '-o', str(out),
                              '-p', str(pid)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=errf)
    try:
        deadline = time.monotonic() + 10
        while b'attached' not in err.read_bytes():
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('strace did not attach: '
                                   + err.read_text(errors='replace'))
            time.sleep(0.02)
        (client or keepalive_client)(port, n)
        time.sleep(0.2)   # let the worker finish the connection's close
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return parse_strace_c(out)


def shim_variants(shim_b: Path | None) -> list[tuple[str, str, dict]]:
    """(a) nginx alone, (b) under the shim, (B) under --shim-b: the same
    rule, which never limits."""
    v = [('a', 'nginx alone', {}),
         ('b', 'nginx + shim', {'shim_rule': NEVER_LIMITS})]
    if shim_b:
        v.append(('B', 'nginx + shim B', {'shim_rule': NEVER_LIMITS,
                                           'shim': shim_b}))
    return v


def pct(x: float, base: float) -> str:
    return f'{100 * (x - base) / base:+.1f}%' if base else '-'


def syscalls_run(root: str, kw: dict, client, n1: int,
                 n2: int) -> dict[str, float]:
    srv = Nginx(root, 1, **kw)
    try:
        srv.start()
        client(srv.port, 100)     # warm up, shim activated
        srv.check_shim()
        (wpid,) = srv.worker_pids()
        c1 = strace_count(wpid, srv.work, 'x', srv.port, n1, client)
        c2 = strace_count(wpid, srv.work, 'y', srv.port, n2, client)
    finally:
        srv.stop()
    return {s: (c2.get(s, 0) - c1.get(s, 0)) / (n2 - n1)
            for s in set(c1) | set(c2)}


def bench_syscalls(root: str, heads: list[str], n1: int, n2: int,
                   shim_b: Path | None = None) -> list[str]:
    variants = shim_variants(shim_b)
    keys = [k for k, _, _ in variants]
    out, totals = [], {}
    for h in heads:
        per = {}
        for key, name, kw in variants:
            per[key] = syscalls_run(root, kw, client_for(h), n1, n2)
            log(f'  syscalls {h} ({key}): {sum(per[key].values()):.3f} '
                'per request')
        names = sorted({s for k in keys for s, v in per[k].items() if v},
                       key=lambda s: (-max(per[k].get(s, 0) for k in keys),
                                      s))
        tot = {k: sum(per[k].values()) for k in keys}
        totals[h] = tot
        out += head_table(h, 'syscall', names, per, tot, keys, '.3f',
                          lambda k: '')
        out.append('')
    out += ['All heads, system calls per request (goal: +0):', '',
            '| head | bytes | ' + ' | '.join(f'({k}) {n}' for k, n, _ in
                                             variants) + ' | ' +
            ' | '.join(f'{k} - a' for k in keys[1:]) + ' |',
            '|---|---:|' + '---:|' * (2 * len(keys) - 1)]
    for h, tot in totals.items():
        out.append(f'| {h} | {head_len(h):,} | ' +
                   ' | '.join(f'{tot[k]:.3f}' for k in keys) + ' | ' +
                   ' | '.join(f'{tot[k] - tot["a"]:+.3f}' for k in keys[1:])
                   + ' |')
    out.append('')
    return out


KEEP: str | None = None     # --keep DIR: the callgrind outputs kept there


def callgrind_run(root: str, kw: dict, client, n: int,
                  tag: str, tool_args=()) -> cgout.Profile:
    """nginx (master_process off: the one process is the worker) under
    callgrind (with tool_args, more of callgrind's options), answering n
    requests of client; its profile (every cost line, checked against
    callgrind's own totals)."""
    work_out = Path(tempfile.mkdtemp(prefix='cg-', dir=root))
    cg, vlog = work_out / 'callgrind.out', work_out / 'valgrind.log'
    srv = Nginx(root, 1, master=False,
                wrapper=['valgrind', '--tool=callgrind',
                         f'--callgrind-out-file={cg}', f'--log-file={vlog}',
                         *tool_args],
                **kw)
    try:
        srv.start(timeout=60)
        client(srv.port, n)
        srv.check_shim()
    finally:
        srv.stop(timeout=60)
    if 'Collected' not in vlog.read_text(errors='replace'):
        raise RuntimeError('callgrind wrote no totals:\n'
                           + vlog.read_text(errors='replace')[-2000:])
    if KEEP:
        shutil.copyfile(cg, Path(KEEP) / f'callgrind.{tag}.{n}')
    prof = cgout.read(cg)
    shutil.rmtree(work_out, ignore_errors=True)
    return prof


def instructions_per_request(root: str, kw: dict, client, n1: int, n2: int,
                             tag: str, tool_args=()) -> dict:
    """Exclusive Ir per request by (object, function): the difference of
    an n2- and an n1-request run, so that start-up cancels (tool_args: as
    callgrind_run's)."""
    p1 = callgrind_run(root, kw, client, n1, tag, tool_args)
    p2 = callgrind_run(root, kw, client, n2, tag, tool_args)
    fns = cgout.difference(p1, p2, n2 - n1)
    # Each file's lines sum to its totals: exactly (cgout checks). Its
    # summary: is callgrind's running count, which differs from totals: by
    # 100 to 2,000 Ir of the process's end, not the same in every run:
    # logged for comparison only.
    log(f'    {tag}: {sum(fns.values()):,.1f} Ir per request by the cost '
        f'lines, {(p2.summary - p1.summary) / (n2 - n1):,.1f} by summary:')
    return fns


SHIM_OBJ = 'librlshim.so'


def function_table(ins: dict, keys: list[str], top: int) -> list[str]:
    """The shim's functions (clones counted as their function), and libc's
    where a shim's run spends more in it than nginx alone (the shim's calls
    land there; the rest is nginx's own), by exclusive Ir per request."""
    m = {k: cgout.merge_clones(ins[k]) for k in keys}
    shims = [k for k in keys if k != 'a']
    rows = []
    for f in set().union(*(m[k] for k in keys)):
        v = {k: m[k].get(f, 0) for k in keys}
        if f[0] == SHIM_OBJ or (f[0] == 'libc.so.6' and any(
                v[k] - v['a'] >= 2 for k in shims)):
            if max(abs(v[k]) for k in shims) >= 1:
                rows.append((f, v))
    if 'B' in shims:
        rows.sort(key=lambda r: -max(r[1]['b'], r[1]['B']))
    else:
        rows.sort(key=lambda r: -r[1]['b'])
    cols = [k for k in keys if k != 'a'] + ['a']
    extra = ' B - b |' if 'B' in shims else ''
    out = ['| function (object) | ' + ' | '.join(f'({k})' for k in cols) +
           ' |' + extra, '|---|' + '---:|' * (len(cols) + bool(extra))]
    for (o, fn), v in rows[:top]:
        d = f' {v["B"] - v["b"]:+,.0f} |' if extra else ''
        out.append(f'| `{fn}` ({o}) | ' + ' | '.join(f'{v[k]:,.0f}'
                                                    for k in cols) + ' |' + d)
    t = {k: sum(v for (o, _), v in m[k].items() if o == SHIM_OBJ)
         for k in keys}
    d = f' {t["B"] - t["b"]:+,.0f} |' if extra else ''
    out.append(f'| all of {SHIM_OBJ} | ' + ' | '.join(f'{t[k]:,.0f}'
                                                      for k in cols) + ' |' +
               d)
    out.append('')
    return out


def head_instructions(root: str, h: str, variants, n1: int, n2: int,
                      top: int, functions, who: str):
    """One head's instruction count under each variant: its tables (by
    object, then the `functions` table of the shim's top functions), the
    totals and the shim's share, per variant key."""
    keys = [k for k, _, _ in variants]
    ins = {}
    for key, name, kw in variants:
        ins[key] = instructions_per_request(root, kw, client_for(h),
                                            n1, n2, f'{h}-{key}')
        log(f'  instructions {h} ({key}): '
            f'{sum(ins[key].values()):,.0f} per request')
    objs = {k: cgout.by_object(ins[k]) for k in keys}
    tot = {k: sum(objs[k].values()) for k in keys}
    names = sorted({o for k in keys for o, v in objs[k].items()
                    if abs(v) >= 0.5},
                   key=lambda o: -max(objs[k].get(o, 0) for k in keys))
    out = head_table(h, 'object', names, objs, tot, keys, ',.0f',
                     lambda k: f' ({pct(tot[k], tot["a"])})')
    out += ['', f'Top {top} functions of the shim (and libc where a '
            f"{who}'s run spends more there), exclusive Ir per request:",
            '']
    out += functions(ins, keys, top)
    return out, (tot, {k: objs[k].get(SHIM_OBJ, 0) for k in keys})


def bench_instructions(root: str, heads: list[str], n1: int, n2: int,
                       shim_b: Path | None = None, top: int = 15) -> list[str]:
    variants = shim_variants(shim_b)
    keys = [k for k, _, _ in variants]
    out, totals = [], {}
    for h in heads:
        lines, totals[h] = head_instructions(root, h, variants, n1, n2, top,
                                             function_table, 'shim')
        out += lines
    out += ['All heads, user-space instructions per request (goal: <= +3%):',
            '', '| head | bytes | (a) nginx alone | ' +
            ' | '.join(f'({k}) {n} | {k}/a | of which {SHIM_OBJ}'
                       for k, n, _ in variants[1:]) + ' | goal |',
            '|---|---:|---:|' + '---:|---:|---:|' * (len(keys) - 1) + '---|']
    for h, (tot, shim) in totals.items():
        cells = ' | '.join(f'{tot[k]:,.0f} | {tot[k] / tot["a"]:.3f} | '
                           f'{shim[k]:,.0f}' for k in keys[1:])
        met = ', '.join(f'{k} ' + ('met' if tot[k] <= 1.03 * tot['a'] else
                                   '**not met**') for k in keys[1:])
        out.append(f'| {h} | {head_len(h):,} | {tot["a"]:,.0f} | {cells} | '
                   f'{met} |')
    out.append('')
    return out


def rule_keys(root: str, rule: str, secret: Path, head) -> bool:
    """Whether the shim keys head's requests by rule: under the same rule
    at 1/m the second request is refused (a request without the rule's
    key is never counted, and passes)."""
    srv = Nginx(root, 1, shim_rule=rule_section(rule, secret).replace(
        '100000000/s', '1/m'))
    got = []
    try:
        srv.start()
        for _ in range(2):
            with socket.create_connection(('127.0.0.1', srv.port),
                                          timeout=10) as c:
                c.sendall(head(srv.port))
                got.append(c.makefile('rb').readline())
        srv.check_shim()
    finally:
        srv.stop()
    if not got[0].startswith(b'HTTP/1.1 200'):
        raise RuntimeError(f'rule {rule}: first request got {got[0]!r}')
    return got[1].startswith(b'HTTP/1.1 429')


def rules_function_table(ins: dict, keys: list[str], top: int) -> list[str]:
    """The shim's functions (and libc's where a rule's run spends more
    than nginx alone), a column per rule, by exclusive Ir per request."""
    m = {k: cgout.merge_clones(ins[k]) for k in keys}
    rules = keys[1:]
    rows = []
    for f in set().union(*(m[k] for k in keys)):
        v = {k: m[k].get(f, 0) for k in keys}
        if (f[0] == SHIM_OBJ or (f[0] == 'libc.so.6' and any(
                v[k] - v['a'] >= 2 for k in rules))) and \
                max(abs(v[k]) for k in rules) >= 1:
            rows.append((f, v))
    rows.sort(key=lambda r: (-max(r[1][k] for k in rules), r[0]))
    out = ['| function (object) | ' + ' | '.join(f'({k})' for k in keys) +
           ' |', '|---|' + '---:|' * len(keys)]
    for (o, fn), v in rows[:top]:
        out.append(f'| `{fn}` ({o}) | ' +
                   ' | '.join(f'{v[k]:,.0f}' for k in keys) + ' |')
    t = {k: sum(v for (o, _), v in m[k].items() if o == SHIM_OBJ)
         for k in keys}
    out.append(f'| all of {SHIM_OBJ} | ' +
               ' | '.join(f'{t[k]:,.0f}' for k in keys) + ' |')
    out.append('')
    return out


def bench_rules_instructions(root: str, heads: list[str], rules: list[str],
                             n1: int, n2: int, top: int = 15) -> list[str]:
    """--rules: (a) nginx alone and nginx under the shim once per rule,
    every head; each rule beside ip's, and each head beside small's."""
    secret = Path(root) / 'jwt.key'
    if not secret.exists():
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f:
            f.write(JWT_SECRET)
    variants = [('a', 'nginx alone', {})] + [
        (r, RULES[r][0], {'shim_rule': rule_section(r, secret)})
        for r in rules]
    keys = [k for k, _, _ in variants]
    out, totals, keyed = [], {}, {}
    for h in heads:
        fn = HEADS[h][1]
        if fn is None:
            raise RuntimeError('--rules: head ab-real (ab\'s own) not '
                               'supported')
        keyed[h] = {r: rule_keys(root, r, secret, fn) for r in rules}
        log(f'  {h}: keyed by ' + ', '.join(f'{r} {"yes" if v else "no"}'
                                            for r, v in keyed[h].items()))
        lines, totals[h] = head_instructions(root, h, variants, n1, n2, top,
                                             rules_function_table, 'rule')
        out += lines
    out += ['Each rule beside `key = ip`, user-space instructions per '
            'request (the same run; "keyed": the rule counts this head\'s '
            'requests, checked at 1/m):', '',
            '| head | bytes | rule | keyed | Ir per request | of which '
            f'{SHIM_OBJ} | / nginx alone | / ip | - ip |',
            '|---|---:|---|---|---:|---:|---:|---:|---:|']
    for h, (tot, shim) in totals.items():
        out.append(f'| {h} | {head_len(h):,} | (a) nginx alone | - | '
                   f'{tot["a"]:,.0f} | - | 1.000 | - | - |')
        for r in rules:
            out.append(f'| {h} | {head_len(h):,} | {RULES[r][0]} | '
                       f'{"yes" if keyed[h][r] else "no"} | {tot[r]:,.0f} | '
                       f'{shim[r]:,.0f} | {tot[r] / tot["a"]:.3f} | '
                       f'{tot[r] / tot["ip"]:.3f} | '
                       f'{tot[r] - tot["ip"]:+,.0f} |')
    out.append('')
    if 'small' in totals and len(totals) > 1:
        t0, s0 = totals['small']
        out += ['The cost of the head alone (each head beside small, the '
                'same rule; not the key\'s):', '',
                '| head | bytes | nginx alone - small\'s | ip rule - '
                f'small\'s | of which {SHIM_OBJ} |',
                '|---|---:|---:|---:|---:|']
        for h, (tot, shim) in totals.items():
            if h != 'small':
                out.append(f'| {h} | {head_len(h):,} | '
                           f'{tot["a"] - t0["a"]:+,.0f} | '
                           f'{tot["ip"] - t0["ip"]:+,.0f} | '
                           f'{shim["ip"] - s0["ip"]:+,.0f} |')
        out.append('')
    return out


# -- 3. high-rate accuracy ------------------------------------------------

RATE = 5000


def bench_accuracy(root: str, duration: int, lua: Path,
                   wrk_args: list[str]) -> list[str]:
    variants = [
        ('librlshim.so, `rate = 5000/s`, `burst = 1`',
         {'shim_rule': f'[limit:strict]\nmatch = *\nrate = {RATE}/s\n'
                       'burst = 1\nkey = ip\n'}),
        ('nginx `limit_req`, `rate=5000r/s`, no burst',
         {'limit': (f'{RATE}r/s', 'limit_req zone=z;')}),
        # Diagnostics: the same with a little slack. With burst 1 (nginx:
        # burst 0) an idle gap between one admission's due time and the
        # next request that arrives is lost for good; a few requests of
        # bucket let the limiter catch up.
        ('librlshim.so, `rate = 5000/s`, `burst = 5`',
         {'shim_rule': f'[limit:slack]\nmatch = *\nrate = {RATE}/s\n'
                       'burst = 5\nkey = ip\n'}),
        ('nginx `limit_req`, `rate=5000r/s`, `burst=5 nodelay`',
         {'limit': (f'{RATE}r/s', 'limit_req zone=z burst=5 nodelay;')}),
    ]
    out = ['| limiter | offered req/s | admitted (non-429) | 429 | other '
           'statuses | admitted/s | admitted/s / 5000 | other CPU load |',
           '|---|---:|---:|---:|---:|---:|---:|---:|']
    for name, kw in variants:
        srv = Nginx(root, 1, **kw)
        try:
            srv.start()
            srv.check_shim()
            r = wrk([*wrk_args, f'-d{duration}s'], lua,
                    f'http://127.0.0.1:{srv.port}/index.html', srv)
        finally:
            srv.stop()
        secs = r['duration_us'] / 1e6
        admitted = r['ok'] + r['other']
        aps = admitted / secs
        log(f'  accuracy {name}: {aps:,.0f} admitted/s of '
            f'{r["requests"] / secs:,.0f} offered, other CPU '
            f'{r["other_pct"]:.0f}%')
        out.append(f'| {name} | {fmt_int(r["requests"] / secs)} | '
                   f'{admitted:,} | {r["limited"]:,} | {r["other"]} | '
                   f'{fmt_int(aps)} | **{aps / RATE:.3f}** | '
                   f'{r["other_pct"]:.0f}% |')
    out.append('')
    return out


# -- main -------------------------------------------------------------------

def cleanup_segments() -> None:
    for name in _made_segments:
        try:
            os.unlink(f'/dev/shm/{name}')
        except FileNotFoundError:
            pass
    # Leftovers of earlier runs that were killed: their pid is gone.
    for path in glob.glob('/dev/shm/rlshim-bench-*'):
        m = re.match(r'rlshim-bench-(\d+)-', os.path.basename(path))
        if m and not os.path.exists(f'/proc/{m.group(1)}'):
            try:
                os.unlink(path)
            except OSError:
                pass


def shim_identity(path: Path) -> str:
    """Which shim: its path, hash and build time, and the commit of the
    source tree it was built in (TREE/build/librlshim.so)."""
    import hashlib
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    built = datetime.datetime.fromtimestamp(
        path.stat().st_mtime, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')
    rev = 'unknown (not in a checkout\'s build/)'
    tree = path.parent.parent
    if path.parent.name == 'build' and (tree / '.git').exists():
        try:
            rev = subprocess.run(['git', '-C', str(tree), 'describe',
                                  '--always', '--dirty'], capture_output=True,
                                 text=True, timeout=10).stdout.strip() or rev
        except OSError:
            pass
    return (f'`{path}` sha256 {digest}..., built {built} UTC, '
            f'source tree {rev}')


def tool_version(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError:
        return 'missing'
    return (p.stdout + p.stderr).strip().splitlines()[0] if \
        (p.stdout + p.stderr).strip() else '?'


def main() -> int:
    global SHIM, KEEP
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--duration', type=int, default=10,
                    help='seconds per wrk run (default 10)')
    ap.add_argument('--reps', type=int, default=3,
                    help='interleaved repetitions per variant (default 3)')
    ap.add_argument('--workers', default='1,2',
                    help='nginx worker_processes values for (1), default 1,2')
    ap.add_argument('--only',
                    default='throughput,syscalls,instructions,accuracy',
                    help='sections to run (comma separated)')
    ap.add_argument('--shim', default=str(SHIM),
                    help='the shim to preload (default build/librlshim.so)')
    ap.add_argument('--shim-b', default=None,
                    help='a second build of the shim, run as (B) beside (b) '
                    'in every section but accuracy')
    ap.add_argument('--heads', default=','.join(DEFAULT_HEADS),
                    help='request heads for the system calls and '
                    f'instructions (of {",".join(HEADS)}; default '
                    f'{",".join(DEFAULT_HEADS)}; ab-real needs ab)')
    ap.add_argument('--requests', default='2000,4000',
                    help='N1,N2: the two request counts whose difference is '
                    'counted (default 2000,4000)')
    ap.add_argument('--top', type=int, default=15,
                    help='functions listed per head (default 15)')
    ap.add_argument('--rules', default=None,
                    help='instructions only: instead of the shim (b) and '
                    '(B), one shim run per rule of ' + ','.join(RULES) +
                    ' (ip is always run: the others are read beside it), '
                    'e.g. --heads small,user --rules ip,cookie,jwt')
    ap.add_argument('--keep', default=None,
                    help='a directory to keep the callgrind outputs in '
                    '(callgrind.HEAD-VARIANT.N)')
    args = ap.parse_args()
    only = set(args.only.split(','))
    SHIM = Path(args.shim).resolve()
    n1, n2 = (int(x) for x in args.requests.split(','))
    heads = args.heads.split(',')
    rules = None
    if args.rules is not None:
        try:
            rules = parse_rules(args.rules)
        except ValueError as e:
            print(f'bench_http: --rules: {e}', file=sys.stderr)
            return 1
        if args.shim_b:
            print('bench_http: --rules and --shim-b: one or the other',
                  file=sys.stderr)
            return 1
    for h in heads:
        if h not in HEADS:
            print(f'bench_http: no head {h!r} (of {", ".join(HEADS)})',
                  file=sys.stderr)
            return 1
    if 'ab-real' in heads and not shutil.which('ab'):
        log('bench_http: ab missing (apache2-utils): head ab-real skipped')
        heads.remove('ab-real')
    if args.keep:
        KEEP = args.keep
        os.makedirs(KEEP, exist_ok=True)

    for tool in ('nginx', 'wrk', 'strace'):
        if not shutil.which(tool, path=os.environ.get('PATH', '') +
                            ':/usr/sbin:/sbin'):
            print(f'bench_http: {tool} not found', file=sys.stderr)
            return 1
    for path in (SHIM, args.shim_b):
        if path and not Path(path).exists():
            print(f'bench_http: {path} missing: run make', file=sys.stderr)
            return 1

    root = tempfile.mkdtemp(prefix='rlshim-bench-http-')
    # Every run of this invocation preloads the same bytes, even if the
    # build is redone meanwhile; shim B under the same file name, so that
    # callgrind names its object and functions as the shim's.
    shim_id = shim_identity(SHIM)
    snap = Path(root) / 'librlshim.so'
    shutil.copyfile(SHIM, snap)
    SHIM = snap
    shim_b = None
    if args.shim_b:
        shim_b_id = shim_identity(Path(args.shim_b).resolve())
        (Path(root) / 'b').mkdir()
        shim_b = Path(root) / 'b' / 'librlshim.so'
        shutil.copyfile(args.shim_b, shim_b)
    lat_lua = Path(root) / 'latency.lua'
    lat_lua.write_text(LUA_LATENCY)
    st_lua = Path(root) / 'status.lua'
    st_lua.write_text(LUA_STATUS)
    acc_wrk = ['-t1', '-c16']
    p = print
    try:
        # The section heading is run.sh's (or the reader's) to give.
        now = datetime.datetime.now(datetime.timezone.utc)
        p(f'Command: `python3 tools/bench/bench_http.py'
          f'{" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""}`. '
          f'Run of {now:%Y-%m-%d %H:%M} UTC, '
          f'{os.cpu_count()} vCPUs, Linux {platform.release()}, '
          f'{tool_version(["nginx", "-v"])}, '
          f'{tool_version(["wrk", "--version"]).split(" [")[0]}. '
          'Client and server share the machine; nothing is pinned.')
        p()
        p(f'Shim (b): {shim_id}.' +
          (f' Shim B (B): {shim_b_id}.' if shim_b else ''))
        p()
        p('nginx: `daemon off; master_process on; access_log off; '
          'keepalive_requests 1000000;` epoll, one `listen 127.0.0.1:PORT '
          f'reuseport`, a {len(INDEX_HTML)}-byte static `index.html`. '
          'Shim config: `[global] ports = PORT, shm = '
          'rlshim-bench-<pid>-<n>` (fresh per nginx start) plus the rule '
          '`[limit:all] match = * rate = 100000000/s key = ip` (burst = '
          'count: never limits).')
        p()
        if 'throughput' in only:
            p('### Throughput')
            p()
            p(f'Command, per run: `wrk -t1 -c{32} -d{args.duration}s '
              '-s latency.lua http://127.0.0.1:PORT/index.html` '
              '(latency.lua prints `latency:percentile(50)` and `(99)` in '
              '`done()`), against')
            p()
            p('- (a) nginx alone;')
            p('- (b) nginx under `LD_PRELOAD=librlshim.so`, the rule above;')
            if shim_b:
                p('- (B) the same under shim B;')
            p('- (c) nginx alone with `limit_req_zone $binary_remote_addr '
              'zone=z:10m rate=100000000r/s; limit_req zone=z burst=1000000 '
              'nodelay;` (never limits).')
            p()
            p('"Other CPU load" is the CPU time that processes other than '
              'this run\'s wrk and nginx used during the run, in % of all '
              'CPUs (/proc/stat user+system minus our processes\' '
              'utime+stime, tick-based, approximate): the noise from the '
              'rest of the shared machine. The hypervisor\'s steal time is '
              'not visible in this VM.')
            p()
            order = 'a,b,B,c' if shim_b else 'a,b,c'
            p(f'{args.reps} runs of each, interleaved {order},{order},...; a '
              'fresh nginx per run; medians.')
            p()
            for w in (int(x) for x in args.workers.split(',')):
                log(f'throughput, worker_processes {w}')
                for line in bench_throughput(root, w, args.duration,
                                             args.reps, lat_lua, shim_b):
                    p(line)
                sys.stdout.flush()
        if only & {'syscalls', 'instructions'}:
            p('Request heads (the system calls and instructions sections): ' +
              '; '.join(f'**{h}**, {HEADS[h][0]}, {head_len(h):,} bytes'
                        for h in heads) +
              '. Every head but ab-real is sent by a Python client: N '
              'sequential requests on one keep-alive connection, each answer '
              'read whole before the next request. ab\'s head asks for `/` '
              '(nginx\'s index module serves index.html), the others for '
              '`/index.html`.')
            p()
        if 'syscalls' in only:
            log('syscalls per request')
            p('### System calls per request (exact counts)')
            p()
            p('Command: `strace -f -c -o FILE -p <worker pid>` attached to '
              'the one worker (`worker_processes 1`) while the client sends '
              f'N requests, for N = {n1} and N = {n2} on the same warmed-up '
              f'worker; the table is (calls at {n2} - calls at {n1}) / '
              f'{n2 - n1}, so start-up and the connection\'s own accept/close '
              'cancel out.')
            p()
            for line in bench_syscalls(root, heads, n1, n2, shim_b):
                p(line)
            sys.stdout.flush()
        if 'instructions' in only and not shutil.which('valgrind'):
            p('### User-space instructions per request: skipped, needs '
              'valgrind')
            p()
        elif 'instructions' in only:
            log('instructions per request (callgrind)')
            p('### User-space instructions per request (callgrind, exact)')
            p()
            p('Command: `valgrind --tool=callgrind nginx ...` with '
              '`master_process off` (the one process serves), the same '
              f'client and rule, N = {n1} and N = {n2} in two fresh '
              f'processes; (Ir at {n2} - Ir at {n1}) / {n2 - n1}. Every cost '
              'line of the callgrind output is charged to the object and '
              'function it ran in (tools/bench/cgout.py; code inlined from '
              'another file included, which callgrind_annotate lists '
              'without its object), and each run\'s sum is checked to equal '
              'callgrind\'s own total. Exclusive costs; the shim is linked '
              'with LTO, so a function holds what was inlined into it, and '
              'clones such as `.isra.0` count as their function. The '
              'kernel\'s side is the system call table.')
            p()
            if rules:
                p('Rules (`--rules`), each alone in the shim\'s '
                  'configuration as `[limit:all] match = * rate = '
                  '100000000/s` and ' + '; '.join(
                      f'**{r}**: {RULES[r][0]}' for r in rules) +
                  '. The secret is a 64-byte key file made in the run\'s '
                  'temp directory (mode 0600); the user head\'s token is '
                  'signed with it (claims sub, org, name, iat, exp a day '
                  'later).')
                p()
                lines = bench_rules_instructions(root, heads, rules, n1, n2,
                                                 args.top)
            else:
                lines = bench_instructions(root, heads, n1, n2, shim_b,
                                           args.top)
            for line in lines:
                p(line)
            sys.stdout.flush()
        if 'accuracy' in only:
            log('accuracy at 5000/s')
            p('### Accuracy at a high rate')
            p()
            p(f'Command: `wrk {" ".join(acc_wrk)} -d{args.duration}s '
              '-s status.lua http://127.0.0.1:PORT/index.html` (status.lua '
              'counts statuses in `response()` and sums the threads in '
              '`done()`), one client key (127.0.0.1), `worker_processes 1`, '
              'nginx with `limit_req_status 429`. Admitted = responses that '
              'are not 429. The shim\'s 429 closes the connection, so wrk '
              'reconnects after each denial; nginx\'s keeps it open.')
            p()
            for line in bench_accuracy(root, args.duration, st_lua, acc_wrk):
                p(line)
            sys.stdout.flush()
    finally:
        cleanup_segments()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
