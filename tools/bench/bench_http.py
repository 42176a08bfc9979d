#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/bench_http.py - the shim in front of nginx, each figure next to
its baseline from the same run. Python 3 stdlib only; needs nginx, wrk and
strace on PATH and a built build/librlshim.so (`make`).

    python3 tools/bench/bench_http.py [--duration 10] [--reps 3]
        [--workers 1,2] [--only throughput,syscalls,instructions,accuracy]
        [--shim build/librlshim.so]

Prints markdown to stdout (progress goes to stderr):

1. throughput: wrk -t1 -c32 against nginx serving a small static file with
   keep-alive, as (a) nginx alone, (b) nginx under LD_PRELOAD=librlshim.so
   with a rule that never limits, (c) nginx alone with its own limit_req at
   an equally non-limiting rate. Variants interleaved a,b,c,a,b,c,...;
   medians of req/s and of wrk's p50/p99 latency.
2. syscalls: strace -f -c attached to the one nginx worker while a python
   client sends N sequential keep-alive GETs on one connection, for N=2000
   and N=4000; (count(4000) - count(2000)) / 2000 = system calls per request,
   with and without the shim, per syscall name. Exact, unlike times.
   instructions (when valgrind is installed): the same client against nginx
   under callgrind; user-space instructions per request by object (nginx,
   libc, librlshim.so), the same difference of two runs.
3. accuracy: one client key at 5000/s, burst 1, under the shim, and nginx's
   limit_req at 5000r/s (no burst), each driven over its limit by wrk;
   admitted (non-429) per second / 5000. Then both again with a bucket of
   5 requests, which shows what burst 1 loses to gaps in the arrivals.

Besides each wrk run it reports the CPU used by everything else on the
machine meanwhile, so that a disturbed run can be told from a slow variant.

Every nginx runs from its own temp directory with its own port; every shim
run gets a fresh segment /dev/shm/rlshim-bench-<pid>-<n>, removed after.
"""

import argparse
import datetime
import glob
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

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / 'build' / 'librlshim.so'
SHM_PREFIX = f'rlshim-bench-{os.getpid()}'
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
        listen 127.0.0.1:{port} reuseport;
        root {work}/docroot;
{limit_req}
    }}
}}
'''

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
    """

    def __init__(self, root: str, workers: int, shim_rule: str | None = None,
                 limit: tuple[str, str] | None = None, master: bool = True,
                 wrapper: list[str] | None = None, shim_global: str = '',
                 shim: Path | None = None, http: str = ''):
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
            limit_zone=zone, limit_req=req))
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
                     lua: Path) -> list[str]:
    variants = [('a', 'nginx alone', {}),
                ('b', 'nginx + librlshim.so (never limits)',
                 {'shim_rule': NEVER_LIMITS}),
                ('c', 'nginx + its own limit_req (never limits)',
                 {'limit': NGINX_NEVER})]
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
    a, b, c = med['a']['rps'], med['b']['rps'], med['c']['rps']

    def paired(x: str, y: str) -> str:
        return ', '.join(f'{rx["rps"] / ry["rps"]:.2f}'
                         for rx, ry in zip(runs[x], runs[y]))

    def goal(v: float, g: float) -> str:
        return f'>= {g}: ' + ('met' if v >= g else '**not met**')

    out += ['', '| ratio | of the medians | per round (a,b,c run back to '
            'back) | goal |', '|---|---:|---|---|',
            f'| b/a (shim / nginx alone) | {b / a:.3f} | {paired("b", "a")} '
            f'| {goal(b / a, 0.95)} |',
            f'| b/c (shim / nginx limit_req) | {b / c:.3f} | '
            f'{paired("b", "c")} | {goal(b / c, 1.0)} |',
            f'| c/a (nginx limit_req / nginx alone) | {c / a:.3f} | '
            f'{paired("c", "a")} | (context) |',
            '']
    # The same medians over the quiet runs only, when each variant has one.
    quiet = {k: [r for r in v if r['other_pct'] < QUIET_PCT]
             for k, v in runs.items()}
    if all(quiet.values()):
        q = {k: statistics.median(r['rps'] for r in v)
             for k, v in quiet.items()}
        n = ', '.join(f'{k} {len(v)}' for k, v in quiet.items())
        out += [f'Quiet runs only (other CPU load < {QUIET_PCT}%; {n} runs): '
                f'median req/s a {fmt_int(q["a"])}, b {fmt_int(q["b"])}, '
                f'c {fmt_int(q["c"])}; b/a {q["b"] / q["a"]:.3f}, '
                f'b/c {q["b"] / q["c"]:.3f}.', '']
    else:
        out += [f'Quiet runs only (other CPU load < {QUIET_PCT}%): not every '
                'variant had one.', '']
    return out


# -- 2. system calls per request ------------------------------------------

# RL_BENCH_COOKIE=N adds a Cookie of N bytes: a browser's head (1,500 makes
# it straddle nginx's first 1 KiB read).
_COOKIE = int(os.environ.get('RL_BENCH_COOKIE') or 0)
REQUEST = (b'GET /index.html HTTP/1.1\r\nHost: bench\r\n' +
           (b'Cookie: s=' + b'c' * (_COOKIE - 2) + b'\r\n' if _COOKIE > 2 else b'') +
           b'\r\n')


def keepalive_client(port: int, n: int) -> None:
    """n sequential GETs on one keep-alive connection, each answered 200."""
    with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = s.makefile('rb')
        for i in range(n):
            s.sendall(REQUEST)
            line = f.readline()
            if not line.startswith(b'HTTP/1.1 200'):
                raise RuntimeError(f'request {i}: {line!r}')
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
                 n: int) -> dict[str, int]:
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
        keepalive_client(port, n)
        time.sleep(0.2)   # let the worker finish the connection's close
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return parse_strace_c(out)


def bench_syscalls(root: str, n1: int, n2: int) -> list[str]:
    per = {}
    for tag, kw in (('nginx alone', {}),
                    ('nginx + librlshim.so', {'shim_rule': NEVER_LIMITS})):
        srv = Nginx(root, 1, **kw)
        try:
            srv.start()
            keepalive_client(srv.port, 100)     # warm up, shim activated
            srv.check_shim()
            (wpid,) = srv.worker_pids()
            c1 = strace_count(wpid, srv.work, tag[:5], srv.port, n1)
            c2 = strace_count(wpid, srv.work, tag[:5], srv.port, n2)
        finally:
            srv.stop()
        names = set(c1) | set(c2)
        per[tag] = {s: (c2.get(s, 0) - c1.get(s, 0)) / (n2 - n1)
                    for s in names}
        log(f'  syscalls {tag}: {sum(per[tag].values()):.3f} per request')
    a, b = per['nginx alone'], per['nginx + librlshim.so']
    names = sorted(set(a) | set(b), key=lambda s: (-max(a.get(s, 0),
                                                        b.get(s, 0)), s))
    names = [s for s in names if a.get(s, 0) or b.get(s, 0)]
    ta, tb = sum(a.values()), sum(b.values())
    out = ['| syscall | nginx alone | nginx + shim | difference |',
           '|---|---:|---:|---:|']
    for s in names:
        x, y = a.get(s, 0), b.get(s, 0)
        out.append(f'| {s} | {x:.3f} | {y:.3f} | {y - x:+.3f} |')
    out.append(f'| **total** | **{ta:.3f}** | **{tb:.3f}** | '
               f'**{tb - ta:+.3f}** |')
    out.append('')
    return out


def callgrind_by_object(path: Path) -> dict[str, int]:
    """Instructions (Ir) per object file, from callgrind_annotate's
    exclusive per-function lines."""
    out = subprocess.run(['callgrind_annotate', '--auto=no',
                          '--threshold=100', str(path)],
                         capture_output=True, text=True, check=True).stdout
    objs: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+\S.*\[(.*)\]\s*$', line)
        if m:
            name = os.path.basename(m.group(2))
            objs[name] = objs.get(name, 0) + int(m.group(1).replace(',', ''))
    return objs


def callgrind_run(root: str, shim: bool, n: int) -> dict[str, int]:
    """nginx (master_process off: the one process is the worker) under
    callgrind, answering n keep-alive GETs; Ir per object for the run."""
    work_out = Path(tempfile.mkdtemp(prefix='cg-', dir=root))
    cg, vlog = work_out / 'callgrind.out', work_out / 'valgrind.log'
    srv = Nginx(root, 1, shim_rule=NEVER_LIMITS if shim else None,
                master=False,
                wrapper=['valgrind', '--tool=callgrind',
                         f'--callgrind-out-file={cg}', f'--log-file={vlog}'])
    try:
        srv.start(timeout=60)
        keepalive_client(srv.port, n)
        srv.check_shim()
    finally:
        srv.stop(timeout=60)
    if 'Collected' not in vlog.read_text(errors='replace'):
        raise RuntimeError('callgrind wrote no totals:\n'
                           + vlog.read_text(errors='replace')[-2000:])
    return callgrind_by_object(cg)


def bench_instructions(root: str, n1: int, n2: int) -> list[str]:
    per = {}
    for tag, shim in (('a', False), ('b', True)):
        c1 = callgrind_run(root, shim, n1)
        c2 = callgrind_run(root, shim, n2)
        per[tag] = {o: (c2.get(o, 0) - c1.get(o, 0)) / (n2 - n1)
                    for o in set(c1) | set(c2)}
        log(f'  instructions per request ({tag}): '
            f'{sum(per[tag].values()):,.0f}')
    a, b = per['a'], per['b']
    objs = sorted((o for o in set(a) | set(b)
                   if abs(a.get(o, 0)) >= 0.5 or abs(b.get(o, 0)) >= 0.5),
                  key=lambda o: -max(a.get(o, 0), b.get(o, 0)))
    out = ['| object | nginx alone | nginx + shim | difference |',
           '|---|---:|---:|---:|']
    for o in objs:
        x, y = a.get(o, 0), b.get(o, 0)
        out.append(f'| {o} | {x:,.0f} | {y:,.0f} | {y - x:+,.0f} |')
    ta, tb = sum(a.values()), sum(b.values())
    out.append(f'| **total** | **{ta:,.0f}** | **{tb:,.0f}** | '
               f'**{tb - ta:+,.0f} ({100 * (tb - ta) / ta:+.1f}%)** |')
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
    """Which shim: its path, hash and build time, and the source tree."""
    import hashlib
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    built = datetime.datetime.fromtimestamp(
        path.stat().st_mtime, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')
    rev = 'unknown (not this checkout\'s build/)'
    if path.parent == REPO / 'build':
        try:
            rev = subprocess.run(['git', '-C', str(REPO), 'describe',
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
    global SHIM
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
    args = ap.parse_args()
    only = set(args.only.split(','))
    SHIM = Path(args.shim).resolve()

    for tool in ('nginx', 'wrk', 'strace'):
        if not shutil.which(tool, path=os.environ.get('PATH', '') +
                            ':/usr/sbin:/sbin'):
            print(f'bench_http: {tool} not found', file=sys.stderr)
            return 1
    if not SHIM.exists():
        print(f'bench_http: {SHIM} missing: run make', file=sys.stderr)
        return 1

    root = tempfile.mkdtemp(prefix='rlshim-bench-http-')
    # Every run of this invocation preloads the same bytes, even if the
    # build is redone meanwhile.
    shim_id = shim_identity(SHIM)
    snap = Path(root) / 'librlshim.so'
    shutil.copyfile(SHIM, snap)
    SHIM = snap
    lat_lua = Path(root) / 'latency.lua'
    lat_lua.write_text(LUA_LATENCY)
    st_lua = Path(root) / 'status.lua'
    st_lua.write_text(LUA_STATUS)
    acc_wrk = ['-t1', '-c16']
    p = print
    try:
        # The section heading is run.sh's (or the reader's) to give.
        p(f'Command: `python3 tools/bench/bench_http.py'
          f'{" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""}`. '
          f'Run of {datetime.date.today().isoformat()}, '
          f'{os.cpu_count()} vCPUs, Linux {platform.release()}, '
          f'{tool_version(["nginx", "-v"])}, '
          f'{tool_version(["wrk", "--version"]).split(" [")[0]}. '
          'Client and server share the machine; nothing is pinned.')
        p()
        p(f'Shim: {shim_id}.')
        p()
        p('nginx: `daemon off; master_process on; access_log off; '
          'keepalive_requests 1000000;` epoll, one `listen 127.0.0.1:PORT '
          f'reuseport`, a {len(INDEX_HTML)}-byte static `index.html`. '
          'Shim config: `[global] ports = PORT, shm = '
          'rlshim-bench-<pid>-<n>` (fresh per nginx start) plus the rule '
          'shown.')
        p()
        p('"Other CPU load" is the CPU time that processes other than this '
          'run\'s wrk and nginx used during the run, in % of all CPUs '
          '(/proc/stat user+system minus our processes\' utime+stime, '
          'tick-based, approximate): the noise from the rest of the shared '
          'machine. The hypervisor\'s steal time is not visible in this VM.')
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
            p('- (b) nginx under `LD_PRELOAD=build/librlshim.so`, rule '
              '`[limit:all] match = * rate = 100000000/s key = ip` (burst = '
              'count: never limits);')
            p('- (c) nginx alone with `limit_req_zone $binary_remote_addr '
              'zone=z:10m rate=100000000r/s; limit_req zone=z burst=1000000 '
              'nodelay;` (never limits).')
            p()
            p(f'{args.reps} runs of each, interleaved a,b,c,a,b,c,...; a '
              'fresh nginx per run; medians.')
            p()
            for w in (int(x) for x in args.workers.split(',')):
                log(f'throughput, worker_processes {w}')
                for line in bench_throughput(root, w, args.duration,
                                             args.reps, lat_lua):
                    p(line)
                sys.stdout.flush()
        if 'syscalls' in only:
            n1, n2 = 2000, 4000
            log('syscalls per request')
            p('### System calls per request (exact counts)')
            p()
            p('Command: `strace -f -c -o FILE -p <worker pid>` attached to '
              'the one worker (`worker_processes 1`) while a Python client '
              f'sends N sequential `GET /index.html` on one keep-alive '
              f'connection (each response read before the next request), for '
              f'N = {n1} and N = {n2} on the same warmed-up worker; the table '
              f'is (calls at {n2} - calls at {n1}) / {n2 - n1}, so start-up '
              'and the connection\'s own accept/close cancel out.')
            p()
            for line in bench_syscalls(root, n1, n2):
                p(line)
            sys.stdout.flush()
        if 'instructions' in only and not (shutil.which('valgrind') and
                                           shutil.which('callgrind_annotate')):
            p('### User-space instructions per request: skipped, needs '
              'valgrind')
            p()
        elif 'instructions' in only:
            n1, n2 = 2000, 4000
            log('instructions per request (callgrind)')
            p('### User-space instructions per request (callgrind, exact)')
            p()
            p('Command: `valgrind --tool=callgrind nginx ...` with '
              '`master_process off` (the one process serves), the same '
              f'Python client and rule, N = {n1} and N = {n2} in two fresh '
              f'processes; (Ir at {n2} - Ir at {n1}) / {n2 - n1}, by the '
              'object the instructions ran in (`callgrind_annotate`, '
              'exclusive). The kernel\'s side is the system call table '
              'above.')
            p()
            for line in bench_instructions(root, n1, n2):
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
