# SPDX-License-Identifier: MIT
"""test_agentexit.py - an agent the shim started does not outlive its
servers: once no server process has held its segment for the delay (5
minutes; RLSHIM_TEST_IDLE_MS shortens it here), it stops as on SIGTERM and
says why; a server that starts later starts a new one. One an operator runs
(--foreground, as systemd does) stays.

Real servers under the shim with [redis] (a closed port: the agent starts
and logs all the same); the XDP case attaches to a veth pair of its own
(needs root); the workers' case needs nginx.

    python3 tests/integration/test_agentexit.py [NAME...]
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SHIM, exchange, parse_responses, request,  # noqa: E402
                     require_root, run, wait_for)
import netns  # noqa: E402
import servers  # noqa: E402

AGENT = os.path.join(os.path.dirname(SHIM), 'rlshimd')  # the shim's own
LEGACY = str(servers.LEGACY_SERVER)
TMP = tempfile.mkdtemp(prefix='rlshim-agentexit-')
N = [0]
IDLE_MS = 2000
STOPPED = r'msg="agent stopped" reason="no server has used the segment for 2s"'


def env_for(config, shim=True):
    e = {k: v for k, v in os.environ.items() if not k.startswith('RLSHIM_')}
    e.update(RLSHIM_CONFIG=config, RLSHIM_TEST_IDLE_MS=str(IDLE_MS))
    if shim:
        e['LD_PRELOAD'] = SHIM
    else:
        e.pop('LD_PRELOAD', None)
    return e


class Setup:
    """A configuration with [redis] on a closed port (and `extra`), its
    segment, and the servers started on it."""

    def __init__(self, extra=''):
        N[0] += 1
        self.shm = f'rlshim-ae-{os.getpid()}-{N[0]}'
        self.port, dead = servers.free_port(), servers.free_port()
        self.config = os.path.join(TMP, f'{self.shm}.conf')
        self.text = (f'[global]\nports = {self.port}\nshm = {self.shm}\n\n'
                     f'[redis]\nurl = redis://127.0.0.1:{dead}/0\n\n{extra}'
                     '[limit:api]\nrate = 100/s\n')
        with open(self.config, 'w') as f:
            f.write(self.text)
        self.servers = []

    def server(self):
        """legacy_server under the shim; one request starts the agent."""
        n = len(self.servers)
        log = os.path.join(TMP, f'{self.shm}-{n}.err')
        with open(log, 'w') as out:
            p = subprocess.Popen([LEGACY, '-p', str(self.port)], stdout=out,
                                 stderr=subprocess.STDOUT,
                                 env=env_for(self.config))
        p.log = log
        self.servers.append(p)
        assert wait_for(lambda: 'listening' in read(log), 10), read(log)
        rs = parse_responses(exchange(self.port, request('GET', '/books')),
                             first_only=True)
        assert rs and rs[0].status == 200, rs
        return p

    def agent_pids(self):
        out = subprocess.run(['pgrep', '-f', f'rlshimd .*-c {self.config}( |$)'],
                             capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def agent(self):
        """The one agent's pid, waited for."""
        assert wait_for(lambda: len(self.agent_pids()) == 1, 5), \
            self.agent_pids()
        return self.agent_pids()[0]

    def log(self):
        return read(servers.agent_log(self.shm))

    def stop(self):
        for p in self.servers:
            if p.poll() is None:
                servers.end_process(p)
        for pid in self.agent_pids():
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not self.agent_pids(), 5)
        servers.unlink_segment(self.shm)
        remove(servers.agent_log(self.shm))


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ''


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def cmdline(pid):
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
        return f.read().split(b'\0')


def children(pid):
    out = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ''


# ---- tests -------------------------------------------------------------------

def exits_after_its_server():
    """The shim starts the agent with --idle-exit. While the server lives
    the agent stays (well past the delay); once the server is killed it
    stops within the delay (and the second its sweep takes), its last line
    saying why; a server started later starts a new agent."""
    s = Setup()
    try:
        s.server()
        pid = s.agent()
        assert b'--idle-exit' in cmdline(pid), cmdline(pid)
        time.sleep(3 * IDLE_MS / 1000)
        assert s.agent_pids() == [pid], (s.agent_pids(), s.log())
        s.servers[0].kill()  # SIGKILL: no goodbye from the shim
        s.servers[0].wait()
        t0 = time.monotonic()
        assert wait_for(lambda: not s.agent_pids(), IDLE_MS / 1000 + 3), s.log()
        took = time.monotonic() - t0
        assert IDLE_MS / 1000 - 0.5 <= took, took
        assert re.search(STOPPED, last_line(s.log())), s.log()
        s.server()
        new = s.agent()
        assert new != pid
        assert wait_for(lambda: s.log().count('msg="agent started"') == 2, 5), \
            s.log()
    finally:
        s.stop()


def stays_while_a_worker_lives():
    """The hold is shared by forked workers: with nginx's master killed,
    its workers (still serving) keep the agent; once they are gone too,
    the agent stops."""
    if not servers.available('nginx'):
        raise AssertionError('nginx is not installed (CI has it)')
    s = Setup()
    d = os.path.join(TMP, f'nginx-{N[0]}')
    os.makedirs(d)
    os.environ['RLSHIM_TEST_IDLE_MS'] = str(IDLE_MS)  # nginx's environment
    n = None
    workers = []
    try:
        # Workers keep only the variables nginx is told to keep.
        n = servers.Server('nginx', d, SHIM, s.config, s.port,
                           nginx_main='env RLSHIM_TEST_IDLE_MS;')
        n.start()
        rs = parse_responses(exchange(s.port, request('GET', '/books')),
                             first_only=True)
        assert rs and rs[0].status == 200, rs
        pid = s.agent()
        assert wait_for(lambda: len(children(n.proc.pid)) == 2, 5)
        workers = children(n.proc.pid)
        n.proc.kill()  # the master only
        n.proc.wait()
        time.sleep(3 * IDLE_MS / 1000)
        assert s.agent_pids() == [pid], (s.agent_pids(), s.log())
        rs = parse_responses(exchange(s.port, request('GET', '/books')),
                             first_only=True)
        assert rs and rs[0].status == 200, rs  # a worker still answers
        for w in workers:
            os.kill(w, signal.SIGKILL)
        assert wait_for(lambda: not s.agent_pids(), IDLE_MS / 1000 + 3), s.log()
        assert re.search(STOPPED, last_line(s.log())), s.log()
    finally:
        del os.environ['RLSHIM_TEST_IDLE_MS']
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if n:
            n.stop()
        s.stop()


def keeps_it_across_a_reload():
    """A changed configuration restarts the agent in place: it keeps
    --idle-exit, and still stops once its server is gone."""
    s = Setup()
    try:
        s.server()
        pid = s.agent()
        with open(s.config, 'w') as f:
            f.write(s.text + '\n[limit:more]\nrate = 50/s\n')
        assert wait_for(lambda: 'restarting on the changed configuration'
                        in s.log(), 5), s.log()
        assert wait_for(lambda: b'--foreground' in cmdline(pid), 5)
        assert b'--idle-exit' in cmdline(pid), cmdline(pid)
        s.servers[0].kill()
        s.servers[0].wait()
        assert wait_for(lambda: not s.agent_pids(), IDLE_MS / 1000 + 3), s.log()
        assert re.search(STOPPED, last_line(s.log())), s.log()
    finally:
        s.stop()


def foreground_agent_stays():
    """An agent the operator runs (--foreground, as systemd does) never
    stops for want of servers; SIGTERM stops it, and its line says so."""
    s = Setup()
    p = None
    try:
        p = subprocess.Popen([AGENT, '-c', s.config, '--foreground'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env_for(s.config, shim=False))
        time.sleep(3 * IDLE_MS / 1000)
        assert p.poll() is None, p.stderr.read()
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=10)[1]
        assert p.returncode == 0, err
        assert 'msg="agent stopped" reason=SIGTERM' in last_line(err), err
    finally:
        if p and p.poll() is None:
            p.kill()
        s.stop()


def xdp_detached_on_exit():
    """With [xdp] attached, the stop for want of servers is a clean stop:
    the program is detached and its pins removed, as on SIGTERM."""
    require_root('attaching XDP to a veth pair')
    # A pair of its own, named by this process, without addresses: nothing
    # another test could be using.
    host, peer = f'rlae{os.getpid()}h', f'rlae{os.getpid()}p'
    netns.sh('ip', 'link', 'del', host, check=False)
    netns.sh('ip', 'link', 'add', host, 'type', 'veth', 'peer', 'name', peer)
    netns.sh('ip', 'link', 'set', host, 'up')
    s = Setup(f'[xdp]\ninterfaces = {host}\nmode = generic\n\n')
    try:
        s.server()
        s.agent()
        assert wait_for(lambda: 'xdp attached' in s.log(), 5), s.log()
        pins = f'/sys/fs/bpf/rlshim/{s.shm}'
        assert os.path.isdir(pins)
        assert 'prog/xdp' in netns.sh('ip', '-d', 'link', 'show', host).stdout
        s.servers[0].kill()
        s.servers[0].wait()
        assert wait_for(lambda: not s.agent_pids(), IDLE_MS / 1000 + 3), s.log()
        assert re.search(STOPPED, last_line(s.log())), s.log()
        assert 'prog/xdp' not in netns.sh('ip', '-d', 'link', 'show',
                                          host).stdout
        assert not os.path.exists(pins), os.listdir(pins)
    finally:
        s.stop()
        netns.sh('ip', 'link', 'del', host, check=False)


TESTS = [exits_after_its_server, stays_while_a_worker_lives,
         keeps_it_across_a_reload, foreground_agent_stays,
         xdp_detached_on_exit]


def main():
    names = sys.argv[1:]
    try:
        return run('agentexit', [(f'agentexit: {t.__name__}', t) for t in TESTS
                                 if not names or t.__name__ in names])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
