# SPDX-License-Identifier: MIT
"""test_agentlog.py - the log of the agent the shim starts is never written
through a path another user can plant (DESIGN, "rlshimctl": syslog, or a file
opened without following links in a directory only its user can write).

Each test plants what a local attacker would (a symbolic link at the old
/tmp name and at the new file's name, a directory of another user's or one
anybody can write where /tmp is used), starts a server under the shim with
[redis] (a closed port: the agent starts, says the store is unreachable, and
so logs), and asserts that the planted target is unchanged and that the
server's log says where the agent's log went instead. Planting as another
user and running the server as `nobody` needs root.

The unreachable_* tests read what that log says of the store: its name as
configured (never the password) and the real reason, against a closed port
and a real redis-server (wrong password, none, stopped).

    python3 tests/integration/test_agentlog.py [NAME...]
"""
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, SHIM, exchange, parse_responses, request,  # noqa: E402
                     require_root, run, wait_for)
import servers  # noqa: E402

AGENT = os.path.join(os.path.dirname(SHIM), 'rlshimd')  # the shim's own
CTL = os.path.join(REPO, 'build', 'rlshimctl')
LEGACY = os.path.join(REPO, 'build', 'legacy_server')
TMP = tempfile.mkdtemp(prefix='rlshim-agentlog-')
os.chmod(TMP, 0o755)  # a server run as nobody reads its file here
N = [0]
VICTIM = 'a file of root\'s\n'


def nobody():
    return pwd.getpwnam('nobody')


class Shimmed:
    """legacy_server under the shim, [redis] on a closed port, as `user`
    (None: this one) with `env` changes; its stderr (the shim's log) in a
    file."""

    def __init__(self, user=None, env=None, devlog=None, url=None):
        N[0] += 1
        self.shm = f'rlshim-al-{os.getpid()}-{N[0]}'
        self.port, self.dead = servers.free_port(), servers.free_port()
        url = url or f'redis://127.0.0.1:{self.dead}/0'
        self.config = os.path.join(TMP, f'{self.shm}.conf')
        with open(self.config, 'w') as f:
            f.write(f'[global]\nports = {self.port}\nshm = {self.shm}\n\n'
                    f'[redis]\nurl = {url}\ntimeout = 100ms\n\n'
                    '[limit:api]\nrate = 100/s\n')
        os.chmod(self.config, 0o644)
        e = {k: v for k, v in os.environ.items()
             if not k.startswith('RLSHIM_') and k != 'XDG_RUNTIME_DIR'}
        e.update(env or {})
        e.update(RLSHIM_CONFIG=self.config, LD_PRELOAD=SHIM)
        self.env = e
        self.log = os.path.join(TMP, f'{self.shm}.err')
        kw = {}
        if user:
            kw = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                      cwd='/')
        argv = [LEGACY, '-p', str(self.port)]
        if devlog and devlog != '/dev/log':
            # A syslog daemon has /dev/log: ours is mounted over it, in a
            # mount namespace of the server's (and its agent's) own.
            argv = ['unshare', '-m', 'sh', '-c',
                    f'mount --bind {devlog} /dev/log && exec "$@"', 'sh'] + argv
        with open(self.log, 'w') as out:
            self.proc = subprocess.Popen(argv,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         env=e, **kw)
        assert wait_for(lambda: 'listening' in self.text(), 10), self.text()

    def text(self):
        with open(self.log) as f:
            return f.read()

    def start_agent(self):
        """One request starts the agent; the shim's line about it."""
        rs = parse_responses(exchange(self.port, request('GET', '/books')),
                             first_only=True)
        assert rs and rs[0].status == 200, rs
        assert wait_for(lambda: 'started rlshimd' in self.text(), 5), self.text()
        assert wait_for(lambda: self.agent_pids(), 5), self.text()
        return re.search(r'msg="started rlshimd".*', self.text()).group(0)

    def agent_pids(self):
        out = subprocess.run(['pgrep', '-f', f'rlshimd -c {self.config}'],
                             capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def agent_text(self):
        """The agent's log file ('' before it has one)."""
        try:
            with open(servers.agent_log(self.shm)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def unreachable(self):
        """The agent's first `store unreachable` line, waited for."""
        pat = r'msg="store unreachable".*'
        assert wait_for(lambda: re.search(pat, self.agent_text()), 5), \
            (self.text(), self.agent_text())
        return re.search(pat, self.agent_text()).group(0)

    def stop(self):
        servers.end_process(self.proc)
        for pid in self.agent_pids():
            os.kill(pid, 15)
        wait_for(lambda: not self.agent_pids(), 5)
        servers.unlink_segment(self.shm)
        remove(servers.agent_log(self.shm))


def victim():
    path = os.path.join(TMP, f'victim-{N[0]}')
    with open(path, 'w') as f:
        f.write(VICTIM)
    os.chmod(path, 0o600)
    return path


def unchanged(path):
    with open(path) as f:
        return f.read() == VICTIM


def remove(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


# ---- tests -------------------------------------------------------------------

def root_logs_in_run():
    """A root server's agent logs to /run/rlshim/rlshimd-<shm>.log (the
    directory mode 0700, the file 0600, both root's), not to the old
    /tmp/rlshimd-<shm>.log, where a planted link stays untouched."""
    require_root('planting a link for a root server')
    s = None
    old = None
    try:
        s = Shimmed()
        old = f'/tmp/rlshimd-{s.shm}.log'
        v = victim()
        remove(old)
        os.symlink(v, old)
        line = s.start_agent()
        time.sleep(0.5)  # the agent's first rounds, logged
        assert unchanged(v), open(v).read()
        log = f'/run/rlshim/rlshimd-{s.shm}.log'
        assert f'log={log}' in line, line
        assert servers.agent_log(s.shm) == log
        assert wait_for(lambda: os.path.exists(log) and
                        'store unreachable' in open(log).read(), 5), s.text()
        st, dst = os.lstat(log), os.lstat('/run/rlshim')
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0, oct(st.st_mode)
        assert dst.st_mode & 0o777 == 0o700 and dst.st_uid == 0, oct(dst.st_mode)
        assert unchanged(v)
        # Every line of the agent's file starts with ts= (RFC 3339 UTC, ms).
        lines = open(log).read().splitlines()
        assert lines and all(re.match(
            r'ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z rlshimd level=', ln)
            for ln in lines), lines
    finally:
        if s:
            s.stop()
            remove(servers.agent_log(s.shm))
        if old:
            remove(old)


def link_at_the_file_name():
    """A link planted at /run/rlshim/rlshimd-<shm>.log is never followed:
    the shim says so once and the agent logs to syslog (a socket bound at
    /dev/log here gets its lines); the link's target is unchanged after the
    agent started and logged."""
    require_root('planting a link in /run/rlshim, binding /dev/log')
    s = None
    link = None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = '/dev/log'
    if os.path.exists(path):
        path = os.path.join(TMP, 'devlog')
    sock.bind(path)
    sock.settimeout(5)
    try:
        s = Shimmed(devlog=path)
        os.makedirs('/run/rlshim', mode=0o700, exist_ok=True)
        v = victim()
        link = f'/run/rlshim/rlshimd-{s.shm}.log'
        os.symlink(v, link)
        line = s.start_agent()
        assert 'log=syslog' in line, line
        t = s.text()
        assert t.count("no private place for the agent's log") == 1, t
        assert f'file="{link}" err="a symbolic link"' in t, t
        got = b''
        deadline = time.monotonic() + 5
        while b'msg="agent started"' not in got and time.monotonic() < deadline:
            try:
                got += sock.recv(4096) + b'\n'
            except TimeoutError:
                break
        assert re.search(rb'rlshimd\[\d+\]: level=info msg="agent started".*'
                         + s.shm.encode(), got), got
        assert unchanged(v) and os.path.islink(link)
    finally:
        if s:
            s.stop()
        if link:
            remove(link)
        sock.close()
        os.unlink(path)


def agent_refuses_a_link():
    """rlshimd --log through a link (planted after any check by its
    starter), or in a directory others can write (/tmp), writes nothing
    there: it says so on the stderr it was started with and logs to syslog."""
    require_root('planting a link in /run/rlshim')
    s = None
    paths = []
    try:
        s = Shimmed()
        os.makedirs('/run/rlshim', mode=0o700, exist_ok=True)
        v = victim()
        link = f'/run/rlshim/planted-{s.shm}.log'
        os.symlink(v, link)
        in_tmp = f'/tmp/rlshimd-planted-{s.shm}.log'
        paths = [link, in_tmp]
        for path, why in ((link, 'a symbolic link'),
                          (in_tmp, 'writable by its group or others')):
            r = subprocess.run([AGENT, '-c', s.config, '--log', path],
                               capture_output=True, text=True, timeout=10,
                               env={k: v for k, v in s.env.items()
                                    if k != 'LD_PRELOAD'})
            assert r.returncode == 0, r
            assert 'msg="log file refused, logging to syslog" ' \
                   f'file="{path}" err="{why}"' in r.stderr, r.stderr
            assert wait_for(lambda: s.agent_pids(), 5)
            time.sleep(0.3)
            for pid in s.agent_pids():
                os.kill(pid, 15)
            assert wait_for(lambda: not s.agent_pids(), 5)
        assert unchanged(v) and os.path.islink(link)
        assert not os.path.exists(in_tmp)
    finally:
        if s:
            s.stop()
        for p in paths:
            remove(p)


def planted_tmp_directory():
    """A server user without /run or $XDG_RUNTIME_DIR gets
    /tmp/rlshim-<uid>/: one planted there first (root's, mode 0777, or a
    link to a directory of its own) is refused, nothing is written in it
    and the agent logs to syslog, saying so; unplanted, the shim makes it
    mode 0700 and the agent logs there."""
    require_root('running the server as nobody')
    u = nobody()
    d = f'/tmp/rlshim-{u.pw_uid}'
    own = os.path.join(TMP, 'nobody-dir')
    remove(d)
    try:
        os.mkdir(own, 0o700)
        os.chown(own, u.pw_uid, u.pw_gid)
        plants = [
            ('owned by another user', lambda: os.mkdir(d, 0o777)),
            ('writable by its group or others',
             lambda: (os.mkdir(d), os.chmod(d, 0o777),
                      os.chown(d, u.pw_uid, u.pw_gid))),
            ('a symbolic link', lambda: os.symlink(own, d)),
        ]
        for why, plant in plants:
            plant()
            s = Shimmed(user=u)
            try:
                line = s.start_agent()
                assert 'log=syslog' in line, (why, line)
                t = s.text()
                assert f'file="{d}/rlshimd-{s.shm}.log" err="{why}"' in t, t
                time.sleep(0.3)
                assert s.agent_pids(), t
                assert os.listdir(os.path.realpath(d)) == [], why
            finally:
                s.stop()
                remove(d)
        assert os.listdir(own) == []
        s = Shimmed(user=u)
        try:
            line = s.start_agent()
            log = f'{d}/rlshimd-{s.shm}.log'
            assert f'log={log}' in line, line
            assert servers.agent_log(s.shm, uid=u.pw_uid, env=s.env) == log
            assert wait_for(lambda: os.path.exists(log) and
                            'store unreachable' in open(log).read(), 5)
            st, dst = os.lstat(log), os.lstat(d)
            assert dst.st_uid == u.pw_uid and dst.st_mode & 0o777 == 0o700
            assert st.st_uid == u.pw_uid and st.st_mode & 0o777 == 0o600
        finally:
            s.stop()
    finally:
        remove(d)


def planted_segment():
    """/dev/shm is anybody's to write: a segment another user made first
    under the name a root server's file gives (nobody's, a real one) is
    never taken by that server, which would otherwise apply the rules and
    bans its owner writes there. The root server refuses its connections
    (on_error = refuse) and says why; root's rlshimctl still reads it."""
    require_root('running a server as nobody')
    s = Shimmed(user=nobody())
    try:
        s.start_agent()
        servers.end_process(s.proc)
        for pid in s.agent_pids():
            os.kill(pid, 15)
        assert wait_for(lambda: not s.agent_pids(), 5)
        seg = f'/dev/shm/{s.shm}'
        assert os.stat(seg).st_uid == nobody().pw_uid
        log = os.path.join(TMP, f'{s.shm}.root.err')
        with open(log, 'w') as out:
            p = subprocess.Popen([LEGACY, '-p', str(s.port)], stdout=out,
                                 stderr=subprocess.STDOUT, env=s.env)
        try:
            assert wait_for(lambda: 'listening' in open(log).read(), 10)
            got = exchange(s.port, request('GET', '/books'))
            text = open(log).read()
            assert got == b'', (got, text)
            why = (f'{seg}: owned by uid {nobody().pw_uid}, not by this user '
                   '(uid 0); refusing another user\'s segment')
            assert why in text and 'refusing guarded connections' in text, text
            assert os.stat(seg).st_uid == nobody().pw_uid
        finally:
            servers.end_process(p)
        out = subprocess.run([CTL, '-c', s.config, 'status'],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0 and 'api' in out.stdout, out
    finally:
        s.stop()


# ---- what the log says of the store ---------------------------------------------

class Redis:
    """redis-server on a free loopback port, `args` added."""

    def __init__(self, *args):
        self.port = servers.free_port()
        self.proc = subprocess.Popen(
            ['redis-server', '--port', str(self.port), '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--dir', TMP, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(self.up, 10), 'redis did not start'

    def up(self):
        try:
            with socket.create_connection(('127.0.0.1', self.port), 1) as c:
                c.sendall(b'PING\r\n')
                return c.recv(64) != b''
        except OSError:
            return False

    def stop(self):
        self.proc.send_signal(18)  # SIGCONT, if it was stopped
        servers.end_process(self.proc)


def unreachable_names_port_and_reason():
    """An agent pointed at a closed port says which store (scheme, host,
    port, db) and why: `Connection refused`."""
    s = Shimmed()
    try:
        s.start_agent()
        line = s.unreachable()
        assert f'store=redis://127.0.0.1:{s.dead}/0 err="Connection refused"' \
            in line, line
    finally:
        s.stop()


def unreachable_wrong_password():
    """A wrong password: the line gives Redis's own answer to AUTH, and
    the password (nor the right one) appears nowhere in the log; the store
    is named with its user and db but without the password."""
    r = Redis('--requirepass', 'right-pw-6f1c')
    s = None
    try:
        s = Shimmed(url=f'redis://alice:wrong-pw-93ab@127.0.0.1:{r.port}/3')
        s.start_agent()
        line = s.unreachable()
        assert f'store=redis://alice@127.0.0.1:{r.port}/3 ' \
               'err="AUTH: WRONGPASS invalid username-password pair' in line, line
        for t in (s.agent_text(), s.text()):
            assert 'wrong-pw-93ab' not in t and 'right-pw-6f1c' not in t, t
    finally:
        if s:
            s.stop()
        r.stop()


def password_only_url():
    """redis://PASSWORD@host: the userinfo is the password (no user): the
    agent sends it, logs Redis's answer without it, and rlshimctl status
    (text and --json) shows *** in its place."""
    r = Redis('--requirepass', 'right-pw-6f1c')
    s = None
    try:
        s = Shimmed(url=f'redis://wrong-pw-93ab@127.0.0.1:{r.port}/0')
        s.start_agent()
        line = s.unreachable()
        assert f'store=redis://127.0.0.1:{r.port}/0 ' \
               'err="AUTH: WRONGPASS invalid username-password pair' in line, line
        for args in (['status'], ['status', '--json']):
            out = subprocess.run([CTL, '-c', s.config, *args],
                                 capture_output=True, text=True, timeout=10)
            assert f'redis://***@127.0.0.1:{r.port}/0' in out.stdout, out
            assert 'wrong-pw-93ab' not in out.stdout + out.stderr, out
        assert 'wrong-pw-93ab' not in s.agent_text() + s.text()
    finally:
        if s:
            s.stop()
        r.stop()


def password_with_at():
    """A password holding an '@' (the last '@' before the path ends it, as
    the agent reads it): the agent authenticates with all of it, and no
    part of it reaches status (text or --json) or the log; rlshimctl used
    to mask only up to the first '@' and print the rest."""
    r = Redis('--requirepass', 'pw@tail-6f1c')
    s = None
    try:
        s = Shimmed(url=f'redis://default:pw@tail-6f1c@127.0.0.1:{r.port}/0')
        s.start_agent()
        deadline = time.time() + 10
        while 'msg="store connected"' not in s.agent_text():
            assert time.time() < deadline, s.agent_text()
            time.sleep(0.1)
        for args in (['status'], ['status', '--json']):
            out = subprocess.run([CTL, '-c', s.config, *args],
                                 capture_output=True, text=True, timeout=10)
            assert f'redis://default:***@127.0.0.1:{r.port}/0' in out.stdout, out
            assert 'tail-6f1c' not in out.stdout + out.stderr, out
        assert 'tail-6f1c' not in s.agent_text() + s.text()
    finally:
        if s:
            s.stop()
        r.stop()


def unreachable_no_password():
    """No password where Redis wants one: Redis's NOAUTH, from the first
    command that needs it (SELECT)."""
    r = Redis('--requirepass', 'right-pw-6f1c')
    s = None
    try:
        s = Shimmed(url=f'redis://127.0.0.1:{r.port}/1')
        s.start_agent()
        line = s.unreachable()
        assert f'store=redis://127.0.0.1:{r.port}/1 ' \
               'err="SELECT: NOAUTH Authentication required."' in line, line
    finally:
        if s:
            s.stop()
        r.stop()


def unreachable_timed_out():
    """A store that stops answering once connected (SIGSTOP): `timed out`
    (the reason was read from the freed connection, and came out as
    err="?"), then `store reachable again` once it answers."""
    r = Redis('--requirepass', 'right-pw-6f1c')
    s = None
    try:
        s = Shimmed(url=f'redis://:right-pw-6f1c@127.0.0.1:{r.port}/0')
        s.start_agent()
        assert wait_for(lambda: 'store connected' in s.agent_text(), 5), \
            s.agent_text()
        assert f'store=redis://127.0.0.1:{r.port}/0' in s.agent_text()
        r.proc.send_signal(19)  # SIGSTOP
        line = s.unreachable()
        assert f'store=redis://127.0.0.1:{r.port}/0 err="timed out"' in line, line
        r.proc.send_signal(18)
        assert wait_for(lambda: 'store reachable again' in s.agent_text(), 5), \
            s.agent_text()
        assert 'right-pw-6f1c' not in s.agent_text()
    finally:
        if s:
            s.stop()
        r.stop()


TESTS = [root_logs_in_run, link_at_the_file_name, agent_refuses_a_link,
         planted_tmp_directory, planted_segment, unreachable_names_port_and_reason,
         unreachable_wrong_password, password_only_url, password_with_at, unreachable_no_password,
         unreachable_timed_out]


def main():
    names = sys.argv[1:]
    try:
        return run('agentlog', [(f'agentlog: {t.__name__}', t) for t in TESTS
                                if not names or t.__name__ in names])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
