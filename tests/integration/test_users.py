#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_users.py - limits per logged-in user (issue 17), as a user runs
them: examples/logged-in-users.conf (its rates made small, its port and
segment changed, a jwt.key made beside it) under the shim in front of a
real nginx and a real python http.server.

  - two users behind one address, by their session cookie: each gets the
    session rule's budget, then 429, while a third still gets 200;
  - by the `sub` of an HS256 token: two users of one tenant each get the
    user rule's budget, and the tenant's rule holds the three of them;
    a refreshed token (another exp, another iat) is the same user;
  - minted tokens (unsigned, another secret's, expired) with fresh `sub`s
    are no user: rlshimctl show says the user rule never saw them, and the
    address rule beside it is what stops them;
  - rlshimctl top shows a session's value as sha256:..., and as it is with
    --show-secrets; show and reset take that name.
"""
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, SHIM, parse_responses, recv_all, request, run  # noqa: E402
import servers  # noqa: E402
import test_redis as tr  # noqa: E402

EXAMPLE = os.path.join(REPO, 'examples', 'logged-in-users.conf')
CTL = os.path.join(REPO, 'build', 'rlshimctl')
SECRET = b'issuer-key-8f2d'
SESSION, USER, TENANT, IP = 3, 2, 5, 20   # the rates made small, per minute


def config(port, shm):
    with open(EXAMPLE) as f:
        text = f.read()
    for old, new in (('ports = 8080\n', f'ports = {port}\n'),
                     ('shm = rlshim-users\n', f'shm = {shm}\n'),
                     ('rate = 60/m\n', f'rate = {SESSION}/m\n'),
                     ('rate = 600/m\n', f'rate = {USER}/m\n'),
                     ('rate = 6000/m\n', f'rate = {TENANT}/m\n'),
                     ('rate = 1200/m\n', f'rate = {IP}/m\n')):
        assert old in text, old
        text = text.replace(old, new)
    return text


class Env:
    def __init__(self, kind):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f'rlshim-it-users-{kind}-')
        self.shm = f'rlshim-it-users-{kind}-{os.getpid()}'
        self.port = servers.free_port()
        self.config = os.path.join(self.dir, 'rlshim.conf')
        with open(self.config, 'w') as f:
            f.write(config(self.port, self.shm))
        key = os.path.join(self.dir, 'jwt.key')
        with open(key, 'wb') as f:
            f.write(SECRET + b'\n')
        os.chmod(key, 0o600)
        wd = os.path.join(self.dir, kind)
        os.makedirs(wd)
        self.server = servers.Server(kind, wd, SHIM, self.config, self.port)
        try:
            self.server.start()
        except BaseException:
            self.close()
            raise

    def close(self):
        self.server.stop()
        servers.unlink_segment(self.shm)
        shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, path, headers=None, source='127.0.0.1'):
        """One GET on its own connection: the status."""
        s = socket.create_connection(('127.0.0.1', self.port), timeout=10,
                                     source_address=(source, 0))
        try:
            s.sendall(request('GET', path, headers))
            rs = parse_responses(recv_all(s), ['GET'], first_only=True)
        finally:
            s.close()
        assert rs, 'no response'
        return rs[0].status

    def ctl(self, *args):
        p = subprocess.run([CTL, '-c', self.config, *args], capture_output=True,
                           text=True, timeout=10)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p.stdout


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode()


def token(claims, secret=SECRET, alg='HS256'):
    """A compact JWS of `claims`, signed with `secret` (None: unsigned)."""
    head = b64(json.dumps({'alg': alg, 'typ': 'JWT'}).encode())
    body = b64(json.dumps(claims).encode())
    sig = '' if secret is None else b64(hmac.new(secret, f'{head}.{body}'.encode(),
                                                 hashlib.sha256).digest())
    return f'{head}.{body}.{sig}'


def bearer(claims, **kw):
    return {'Authorization': 'Bearer ' + token(claims, **kw)}


OK = (200, 404)   # the application answered (nginx has no /api/)


def two_sessions_one_address(env):
    """Two sessions from 127.0.0.2: each its own budget, then 429 alone."""
    src = '127.0.0.2'
    for sid in ('s-alice-7f3a', 's-bob-91c2'):
        cookie = {'Cookie': f'theme=dark; session_id={sid}; lang=en'}
        got = [env.get('/books', cookie, src) for _ in range(SESSION)]
        assert all(s in OK for s in got), (sid, got)
    for sid in ('s-alice-7f3a', 's-bob-91c2'):
        assert env.get('/books', {'Cookie': f'session_id={sid}'}, src) == 429, sid
    assert env.get('/books', {'Cookie': 'session_id=s-carol-0d11'}, src) in OK
    # a second session_id pair does not choose the key: the first decides
    assert env.get('/books', {'Cookie': 'session_id=s-bob-91c2; '
                              'session_id=s-fresh-1'}, src) == 429


def users_and_tenant_by_token(env):
    """HS256 tokens of one tenant from 127.0.0.3: alice and bob USER each
    (a refreshed token is the same user), then the tenant's TENANT holds."""
    src, now = '127.0.0.3', int(time.time())
    for user in ('alice', 'bob'):
        for k in range(USER):
            h = bearer({'sub': user, 'org': 42, 'iat': now + k, 'exp': now + 600 + k})
            assert env.get('/api/books', h, src) in OK, (user, k)
        assert env.get('/api/books', bearer({'sub': user, 'org': 42}), src) == 429
    # carol, a third user of tenant 42: the tenant's 5th, then its limit
    assert env.get('/api/books', bearer({'sub': 'carol', 'org': 42}), src) in OK
    assert env.get('/api/books', bearer({'sub': 'dave', 'org': 42}), src) == 429
    assert 'remaining=0' in env.ctl('show', 'api-tenant', '42')
    assert 'remaining=0' in env.ctl('show', 'api-user', 'alice')


def minted_tokens_are_no_user(env):
    """Tokens anyone can make, each with a fresh sub, from 127.0.0.4: no
    user rule counts them (show: state=new); the address rule stops them
    after its IP."""
    src, now = '127.0.0.4', int(time.time())
    minted = [bearer({'sub': f'mallory-{i}', 'org': 7}, secret=None, alg='none')
              for i in range(3)]
    minted += [bearer({'sub': f'mallory-{i}', 'org': 7}, secret=b'guess')
               for i in range(3, 6)]
    minted += [bearer({'sub': f'mallory-{i}', 'org': 7, 'exp': now - 120})
               for i in range(6, 9)]
    got = [env.get('/api/books', minted[i % len(minted)], src) for i in range(IP + 3)]
    assert all(s in OK for s in got[:IP]) and got[IP:] == [429] * 3, got
    for i in (0, 4, 7):
        out = env.ctl('show', 'api-user', f'mallory-{i}')
        assert 'state=new' in out, out
    assert 'state=new' in env.ctl('show', 'api-tenant', '7')


def top_hides_sessions(env):
    """top names a session by its digest, --show-secrets by its value; show
    and reset take the digest's name too."""
    env.get('/books', {'Cookie': 'session_id=s-erin-55aa'}, '127.0.0.5')
    digest = hashlib.sha256(b's-erin-55aa').hexdigest()[:12]
    keys = {(k['rule'], k['key']) for k in
            json.loads(env.ctl('top', '-n', '100', '--json'))}
    assert ('session', f'sha256:{digest}') in keys, keys
    assert not any('s-erin' in k for _, k in keys), keys
    keys = {(k['rule'], k['key']) for k in
            json.loads(env.ctl('top', '-n', '100', '--json', '--show-secrets'))}
    assert ('session', 's-erin-55aa') in keys, keys
    # show and reset take the name top gave
    out = env.ctl('show', 'session', f'sha256:{digest}')
    assert f'key=sha256:{digest} state=live' in out and f'remaining={SESSION - 1}' in out, out
    env.ctl('reset', 'session', f'sha256:{digest}')
    assert f'remaining={SESSION}' in env.ctl('show', 'session', 's-erin-55aa')
    p = subprocess.run([CTL, '-c', env.config, 'show', 'session', 'sha256:000000000000'],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and 'no key of rule \'session\' is named' in p.stderr, p


TESTS = (two_sessions_one_address, users_and_tenant_by_token,
         minted_tokens_are_no_user, top_hides_sessions)


def plans_and_reset_with_redis():
    """With [redis]: a tenant's plan read from rlshim:plans:tenant by its
    claim (HSET 42 paid), and a session reset by rlshimctl reset, the agent
    naming it by its digest in the log, never by its value."""
    r = tr.Redis()
    d = tempfile.mkdtemp(prefix='rlshim-it-users-redis-')
    key = os.path.join(d, 'jwt.key')
    with open(key, 'wb') as f:
        f.write(SECRET)
    os.chmod(key, 0o600)
    h = tr.Host(f'redis://127.0.0.1:{r.port}/0',
                '[limit:tenant]\nmatch = * /api/*\nkey = jwt:org\n'
                f'jwt_secret = {key}\nrate = 2/m\nplans = free:2/m paid:100/m\n'
                '[limit:session]\nmatch = * /web/*\nkey = cookie:sid\nrate = 2/m\n',
                'users')
    try:
        tr.started([h])
        t42 = bearer({'sub': 'alice', 'org': 42})
        got = [h.get('/api/x', t42).status for _ in range(3)]
        assert got == [404, 404, 429], got
        r.cli('HSET', 'rlshim:plans:tenant', '42', 'paid')
        assert tr.wait_for(lambda: h.get('/api/x', t42).status == 404, 3)
        assert [h.get('/api/x', t42).status for _ in range(5)] == [404] * 5
        # another tenant keeps `rate`
        t7 = bearer({'sub': 'bob', 'org': 7})
        assert [h.get('/api/x', t7).status for _ in range(3)] == [404, 404, 429]

        sid = {'Cookie': 'sid=s-frank-7e21'}
        assert [h.get('/web/x', sid).status for _ in range(3)] == [404, 404, 429]
        p = h.ctl('reset', 'session', 's-frank-7e21')
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert h.get('/web/x', sid).status == 404
        name = 'sha256:' + hashlib.sha256(b's-frank-7e21').hexdigest()[:12]
        assert tr.wait_for(lambda: f'key="{name}"' in h.agent_log(), 3), h.agent_log()
        assert 's-frank' not in h.agent_log()
    finally:
        h.stop()
        r.stop()
        shutil.rmtree(d, ignore_errors=True)


def main():
    names = sys.argv[1:]
    rc = 0
    for kind in ('nginx', 'python'):
        if not servers.available(kind):
            if os.environ.get('CI'):
                raise SystemExit(f'{kind} is missing in CI')
            print(f'[  SKIPPED ] test_users {kind}: not installed')
            continue
        chosen = [t for t in TESTS if not names or t.__name__ in names]
        if not chosen:
            continue
        env = Env(kind)
        try:
            rc |= run(f'users {kind}', [(f'{kind}: {t.__name__}', (lambda t=t: t(env)))
                                        for t in chosen])
        finally:
            env.close()
    if not names or 'plans_and_reset_with_redis' in names:
        rc |= run('users redis', [('plans_and_reset_with_redis',
                                   plans_and_reset_with_redis)])
    return rc


if __name__ == '__main__':
    sys.exit(main())
