#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_proxied.py - the README's reverse-proxy example, as a user runs it:
legacy_server under the shim with examples/behind-reverse-proxy.conf (only
its port and segment changed), a real nginx in front of it with the
example's `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`.

Clients connect to nginx from their own loopback addresses (127.0.0.2,
127.0.0.3, ...). Each gets its own budget of 5, the 6th answer is the
shim's 429 passed on by nginx, and a client that writes someone else's
address (or a trusted one) into X-Forwarded-For itself is still keyed by
the address nginx saw. A client that goes round nginx to the application
with a forged X-Forwarded-For is keyed by its own address.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, SHIM, parse_responses, recv_all, request, run  # noqa: E402
import servers  # noqa: E402

EXAMPLE = os.path.join(REPO, 'examples', 'behind-reverse-proxy.conf')
CTL = os.path.join(REPO, 'build', 'rlshimctl')
LIMIT = 5  # the example's rate = 5/m


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='rlshim-it-proxied-')
        self.shm = f'rlshim-it-proxied-{os.getpid()}'
        self.app_port = servers.free_port()
        self.port = servers.free_port()
        with open(EXAMPLE) as f:
            text = f.read()
        assert 'ports = 8080\n' in text and 'shm = rlshim-proxied\n' in text
        text = text.replace('ports = 8080\n', f'ports = {self.app_port}\n')
        text = text.replace('shm = rlshim-proxied\n', f'shm = {self.shm}\n')
        self.config = os.path.join(self.dir, 'rlshim.conf')
        with open(self.config, 'w') as f:
            f.write(text)
        self.app = None
        self.proxy = None
        try:
            wd = os.path.join(self.dir, 'app')
            os.makedirs(wd)
            self.app = servers.Server('legacy', wd, SHIM, self.config,
                                      self.app_port)
            self.app.start()
            wd = os.path.join(self.dir, 'nginx')
            os.makedirs(wd)
            loc = ('        location /api/ {\n'
                   f'            proxy_pass http://127.0.0.1:{self.app_port}/;\n'
                   '            proxy_set_header X-Forwarded-For '
                   '$proxy_add_x_forwarded_for;\n'
                   '        }\n')
            self.proxy = servers.Server('nginx', wd, None, None, self.port,
                                        nginx_extra=loc)
            self.proxy.start()
        except BaseException:
            self.close()
            raise

    def close(self):
        for s in (self.proxy, self.app):
            if s:
                s.stop()
        servers.unlink_segment(self.shm)
        shutil.rmtree(self.dir, ignore_errors=True)


def get(port, source, headers=None):
    """One GET /api/books on its own connection from `source`; the status
    and the RateLimit-Remaining field (None without one)."""
    s = socket.create_connection(('127.0.0.1', port), timeout=10,
                                 source_address=(source, 0))
    try:
        s.sendall(request('GET', '/api/books', headers))
        rs = parse_responses(recv_all(s), ['GET'], first_only=True)
    finally:
        s.close()
    assert rs, 'no response'
    return rs[0].status, rs[0].headers.get('ratelimit-remaining')


def each_client_own_budget(env):
    """Two clients behind the one proxy: 5 each, then 429 for each alone."""
    for src in ('127.0.0.2', '127.0.0.3'):
        got = [get(env.port, src)[0] for _ in range(LIMIT)]
        assert got == [200] * LIMIT, (src, got)
    for src in ('127.0.0.2', '127.0.0.3'):
        status, remaining = get(env.port, src)
        assert status == 429 and remaining == '0', (src, status, remaining)
    assert get(env.port, '127.0.0.4')[0] == 200


def forged_header_keyed_by_real_client(env):
    """A client spent (127.0.0.5) that sends X-Forwarded-For naming a fresh
    address, a trusted proxy, or a list, is still the address nginx saw."""
    src = '127.0.0.5'
    for _ in range(LIMIT):
        assert get(env.port, src)[0] == 200
    for forged in ('198.51.100.77', '127.0.0.1', '::1',
                   '198.51.100.78, 127.0.0.1', 'garbage'):
        status, _ = get(env.port, src, {'X-Forwarded-For': forged})
        assert status == 429, (forged, status)
    # and none of the forged addresses was charged: the table holds the
    # loopback clients only
    p = subprocess.run([CTL, '-c', env.config, 'top', '-n', '100', '--json'],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    keys = {k['key'] for k in json.loads(p.stdout)}
    assert src in keys and not keys - {f'127.0.0.{i}' for i in range(2, 8)}, keys


def round_the_proxy_keyed_by_own_address(env):
    """Straight to the application from an untrusted address: the header is
    not believed, so forging a new address each time does not help."""
    src = '127.0.0.7'
    got = []
    for i in range(LIMIT + 2):
        s = socket.create_connection(('127.0.0.1', env.app_port), timeout=10,
                                     source_address=(src, 0))
        try:
            s.sendall(request('GET', '/books',
                              {'X-Forwarded-For': f'198.51.100.{100 + i}'}))
            rs = parse_responses(recv_all(s), ['GET'], first_only=True)
        finally:
            s.close()
        got.append(rs[0].status if rs else None)
    assert got == [200] * LIMIT + [429, 429], got


def the_readme_shows_it():
    """The README's reverse-proxy section names the example and the nginx line."""
    with open(os.path.join(REPO, 'README.md')) as f:
        text = f.read()
    assert 'examples/behind-reverse-proxy.conf' in text
    assert re.search(r'proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for', text)


def main():
    if not servers.available('nginx'):
        if os.environ.get('CI'):
            raise SystemExit('nginx is missing in CI')
        print('[  SKIPPED ] test_proxied: nginx is not installed')
        return 0
    env = Env()
    try:
        tests = [(f.__name__, (lambda f=f: f(env))) for f in
                 (each_client_own_budget, forged_header_keyed_by_real_client,
                  round_the_proxy_keyed_by_own_address)]
        tests.append(('the_readme_shows_it', the_readme_shows_it))
        return run('proxied', tests)
    finally:
        env.close()


if __name__ == '__main__':
    sys.exit(main())
