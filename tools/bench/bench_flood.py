#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/bench_flood.py - what XDP saves: a banned client floods a
server under the shim, once with the ban enforced at accept only and once
with the XDP dropper attached, same run, same packets.

    python3 tools/bench/bench_flood.py [--packets 200000] [--connections 20000]
                                       [--reps 3]

As root: a network namespace with a veth pair (10.232.1.0/24, created and
deleted here), build/legacy_server under build/librlshim.so on the host
side, the client's address banned with rlshimctl. Two floods from the
namespace:

1. SYN flood: `hping3 -S` sends the same number of SYNs in both variants.
   At accept level, the kernel answers each with a SYN-ACK (and gets a RST
   back from the client's kernel); in XDP they die in the driver path.
2. Connection flood: complete TCP connections as fast as they go (256 in
   flight, nonblocking connect, each closed once it connects or after 50
   ms). At accept level each one is accepted, refused and closed by the
   shim inside the server; in XDP none gets past the SYN.

Measured over each flood, counted exactly: the TCP segments the server's
network namespace received and sent (/proc/net/snmp InSegs, OutSegs: each
SYN handled, each SYN-ACK and RST sent), connections the shim refused at
accept (the ban's counter) and frames the XDP program dropped; and timed
(tick-based, noisy): the server process's CPU time (utime + stime);
the CPU time of the whole machine (/proc/stat, all CPUs, user + system +
irq + softirq) less the flooder's own (its rusage), i.e. what receiving
the flood cost the server side: the kernel's packet path, the server, the
agent (on veth much of the receive path runs in the sender's context and
is charged to the flooder, so this undercounts); softirq alone. Prints
markdown.
"""
import argparse
import datetime
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / 'tests' / 'integration'))
from netns import veth_down, veth_up  # noqa: E402

SHIM = REPO / 'build' / 'librlshim.so'
SERVER = REPO / 'build' / 'legacy_server'
CTL = REPO / 'build' / 'rlshimctl'
TAG = os.getpid() % 10000
NS, HOST, PEER = f'rlbf{TAG}c', f'rlbf{TAG}h', f'rlbf{TAG}p'
NET = '10.232.1'
SERVER_IP, CLIENT_IP = f'{NET}.1', f'{NET}.2'
HZ = os.sysconf('SC_CLK_TCK')

CONNECT_FLOOD = r'''
import errno, select, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
inflight, done, started = {}, 0, 0
ep = select.epoll()
while done < n:
    while started < n and len(inflight) < 256:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((host, port))
        inflight[s.fileno()] = (s, time.monotonic())
        ep.register(s.fileno(), select.EPOLLOUT)
        started += 1
    for fd, _ in ep.poll(0.01):
        s, _ = inflight.pop(fd)
        ep.unregister(fd)
        s.close()
        done += 1
    now = time.monotonic()
    for fd in [fd for fd, (s, t) in inflight.items() if now - t > 0.05]:
        s, _ = inflight.pop(fd)
        ep.unregister(fd)
        s.close()
        done += 1
'''


def sh(*args, check=True, timeout=600):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          check=check, timeout=timeout)


def nets_up():
    veth_up(NS, HOST, PEER, NET)


def nets_down():
    veth_down(NS, HOST)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(('0.0.0.0', 0))
        return s.getsockname()[1]


def proc_cpu_ms(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / HZ


def machine_ms():
    """(busy, softirq) of all CPUs, ms: busy is user + nice + system + irq
    + softirq."""
    with open('/proc/stat') as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6]
    return busy * 1000 / HZ, cpu[6] * 1000 / HZ


def tcp_segs():
    """(InSegs, OutSegs) of the host's TCP (this network namespace)."""
    with open('/proc/net/snmp') as f:
        rows = [ln.split() for ln in f if ln.startswith('Tcp:')]
    d = dict(zip(rows[0][1:], rows[1][1:]))
    return int(d['InSegs']), int(d['OutSegs'])


def children_ms():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


class Server:
    def __init__(self, xdp):
        self.dir = tempfile.mkdtemp(prefix='rlshim-flood-')
        self.port = free_port()
        self.shm = f'rlshim-flood-{TAG}-{"x" if xdp else "a"}'
        self.conf = os.path.join(self.dir, 'rlshim.conf')
        with open(self.conf, 'w') as f:
            f.write(f'[global]\nports = {self.port}\nshm = {self.shm}\n')
            if xdp:
                f.write(f'[xdp]\ninterfaces = {HOST}\nmode = generic\n')
            f.write('[limit:all]\nmatch = *\nrate = 100/s\n')
        env = dict(os.environ, LD_PRELOAD=str(SHIM), RLSHIM_CONFIG=self.conf)
        self.proc = subprocess.Popen([SERVER, '-p', str(self.port)], env=env,
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        # The first accept creates the segment (and starts the agent).
        for _ in range(100):
            if sh('curl', '-s', '-o', '/dev/null', '-m', '1',
                  f'http://127.0.0.1:{self.port}/books', check=False).returncode == 0:
                break
            time.sleep(0.05)
        assert self.ctl('ban', CLIENT_IP, '--for', '1h').returncode == 0
        if xdp:
            for _ in range(100):
                out = self.ctl('xdp', 'stats').stdout
                if f'{CLIENT_IP}/32' in out:
                    break
                time.sleep(0.05)
            else:
                raise SystemExit('the ban never reached XDP: is this root?')

    def ctl(self, *args):
        return sh(CTL, '-c', self.conf, *args, check=False)

    def refused(self):
        for line in self.ctl('bans').stdout.splitlines():
            f = line.split()
            if f and f[0] == f'{CLIENT_IP}/32':
                return int(f[4])
        return 0

    def xdp_dropped(self):
        for line in self.ctl('xdp', 'stats').stdout.splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == 'dropped':
                return int(f[1])
        return 0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        pids = sh('pgrep', '-f', f'rlshimd -c {self.conf}', check=False).stdout.split()
        for p in pids:
            sh('kill', p, check=False)
        for _ in range(50):
            if not sh('pgrep', '-f', f'rlshimd -c {self.conf}', check=False).stdout:
                break
            time.sleep(0.1)
        try:
            os.unlink(f'/dev/shm/{self.shm}')
        except FileNotFoundError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def flood(kind, srv, args):
    if kind == 'syn':
        cmd = ['ip', 'netns', 'exec', NS, 'hping3', '-q', '-S', '-p', str(srv.port),
               '-c', str(args.packets), '-i', 'u1', SERVER_IP]
    else:
        cmd = ['ip', 'netns', 'exec', NS, sys.executable, '-c', CONNECT_FLOOD,
               SERVER_IP, str(srv.port), str(args.connections)]
    r0, x0 = srv.refused(), srv.xdp_dropped()
    c0, (b0, q0), f0 = proc_cpu_ms(srv.proc.pid), machine_ms(), children_ms()
    i0, o0 = tcp_segs()
    t0 = time.monotonic()
    sh(*cmd, check=False)
    f1 = children_ms()
    time.sleep(0.2)  # what the kernel still had queued
    wall = time.monotonic() - t0
    c1, (b1, q1) = proc_cpu_ms(srv.proc.pid), machine_ms()
    i1, o1 = tcp_segs()
    return {'in_segs': i1 - i0, 'out_segs': o1 - o0,'server_ms': c1 - c0, 'rest_ms': (b1 - b0) - (f1 - f0),
            'softirq_ms': q1 - q0, 'flooder_ms': f1 - f0,
            'accepted': srv.refused() - r0, 'dropped': srv.xdp_dropped() - x0,
            'wall': wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--packets', type=int, default=200000)
    ap.add_argument('--connections', type=int, default=20000)
    ap.add_argument('--reps', type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print('## Floods: XDP against accept-level refusal: skipped (needs root)\n')
        return 0
    for tool in ('hping3', 'curl'):
        if not shutil.which(tool) and not os.path.exists(f'/usr/sbin/{tool}'):
            print(f'## Floods: skipped (needs {tool})\n')
            return 0
    os.environ['PATH'] += ':/usr/sbin:/sbin'
    nets_up()
    results = {}
    try:
        for rep in range(args.reps):
            for variant in ('accept', 'xdp'):
                srv = Server(variant == 'xdp')
                try:
                    for kind in ('syn', 'connect'):
                        r = flood(kind, srv, args)
                        results.setdefault((kind, variant), []).append(r)
                        print(f'  rep {rep + 1} {kind} {variant}: {r}', file=sys.stderr)
                finally:
                    srv.stop()
    finally:
        nets_down()

    def med(kind, variant, key):
        return statistics.median(r[key] for r in results[(kind, variant)])

    print('## Floods: XDP against accept-level refusal (tools/bench/bench_flood.py)\n')
    print(f'Command: `python3 tools/bench/bench_flood.py --packets {args.packets} '
          f'--connections {args.connections} --reps {args.reps}`. Run of '
          f'{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} vCPUs, '
          f'Linux {platform.release()}. A banned client in a network namespace '
          f'floods build/legacy_server under the shim over a veth pair; (a) the '
          f'ban enforced by the shim at accept only, (b) the XDP dropper attached '
          f'to the host end in generic mode (veth). Medians of {args.reps} runs, '
          f'variants alternating; CPU times are tick-based (1/{HZ} s).\n')
    print('| flood | variant | segments into the server\'s TCP | segments it sent '
          '| server process CPU | machine CPU less the flooder\'s | of which softirq '
          '| refused at accept | dropped in XDP | wall |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    names = {'syn': f'{args.packets:,} SYNs (hping3 -S)',
             'connect': f'{args.connections:,} connections'}
    for kind in ('syn', 'connect'):
        for variant, label in (('accept', '(a) accept only'), ('xdp', '(b) XDP')):
            print(f'| {names[kind]} | {label} | {med(kind, variant, "in_segs"):,.0f} '
                  f'| {med(kind, variant, "out_segs"):,.0f} '
                  f'| {med(kind, variant, "server_ms"):,.0f} ms '
                  f'| {med(kind, variant, "rest_ms"):,.0f} ms '
                  f'| {med(kind, variant, "softirq_ms"):,.0f} ms '
                  f'| {med(kind, variant, "accepted"):,.0f} '
                  f'| {med(kind, variant, "dropped"):,.0f} '
                  f'| {med(kind, variant, "wall"):.1f} s |')
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
