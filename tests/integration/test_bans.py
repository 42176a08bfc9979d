#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_bans.py - bans as a client sees them, through the shim in front of
legacy_server: maxretry banning and bantime_increment's escalation, a ban
ending a keep-alive connection at its next request, dry-run refusing no
banned client, a trusted proxy's client banned request by request,
rlshimctl ban/unban/bans on a live segment.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, connect, exchange, parse_responses,  # noqa: E402
                     recv_all, refused, request, run, wait_for)
import test_features as F  # noqa: E402

CTL = os.path.join(REPO, 'build', 'rlshimctl')


def ctl(s, *args):
    out = subprocess.run([CTL, '-c', s.config, *args], capture_output=True,
                         text=True, timeout=10)
    return out


def ban_row(s, addr):
    """The `rlshimctl bans` row of `addr`, as a dict, or None."""
    out = ctl(s, 'bans').stdout.splitlines()
    for line in out[1:]:
        f = line.split()
        if f and f[0] == addr:
            return {'reason': f[1], 'rule': f[2], 'offence': f[3],
                    'refused': int(f[4]), 'expires': ' '.join(f[5:])}
    return None


def bans_json_says(s, addr, row):
    """`bans --json` parses and says what the plain row says."""
    out = ctl(s, 'bans', '--json')
    assert out.returncode == 0, out.stderr
    bans = json.loads(out.stdout)
    b = [b for b in bans if b['address'] == addr]
    assert len(b) == 1, bans
    b = b[0]
    assert b['prefix'] == int(addr.split('/')[1]), b
    assert b['reason'] == row['reason'], (b, row)
    assert (b['rule'] or '-') == row['rule'], (b, row)
    assert (str(b['offences']) if b['offences'] else '-') == row['offence']
    assert b['refused'] == row['refused'], (b, row)
    left = b['expires_in_ms'] / 1000
    assert abs(left - seconds_any(row['expires'])) <= 61, (b, row)
    assert abs(b['expires_ms'] / 1000 - time.time() - left) < 5, b


def seconds_any(text):
    """'59m59s', '1h', '3s' in seconds."""
    return sum(int(n) * {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600,
                         'd': 86400}[u]
               for n, u in re.findall(r'(\d+)(ms|s|m|h|d)', text))


def status_of(s, path):
    r = s.get(path)
    return r.status if r else None


def hammer_until_refused(s, path, limit=50):
    """GET `path` on new connections until one is refused at accept;
    the statuses seen before."""
    seen = []
    for _ in range(limit):
        st = status_of(s, path)
        if st is None:
            return seen
        seen.append(st)
    raise AssertionError(f'never banned after {limit} requests: {seen}')


def seconds(text):
    """'3s' / '59s' / '9m59s' / '2h05m' from rlshimctl's EXPIRES IN (as top
    gives a wait), in seconds."""
    assert re.fullmatch(r'\d+s|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh', text), text
    return seconds_any(text)


def shut_out(s):
    """True if the client is refused at accept; probes a path no rule
    limits, so that probing counts towards nothing."""
    return exchange(s.port, request('GET', '/other')) == b''


def escalation():
    """maxretry = 5 within findtime = 10s bans for bantime = 2s; released,
    the same client hammering again is banned for 4 s (bantime_increment)."""
    s = F.Legacy('[limit:login]\nmatch = * /books\nrate = 1/m\n'
                 'maxretry = 5\nfindtime = 10s\nbantime = 2s\n'
                 'bantime_increment = on\nbantime_max = 1h\n')
    try:
        # One allowed, five 429s (the fifth bans), then refused at accept.
        assert hammer_until_refused(s, '/books') == [200] + [429] * 5
        banned_at = time.monotonic()
        row = ban_row(s, '127.0.0.1/32')
        assert row and row['reason'] == 'maxretry' and row['rule'] == 'login' \
            and row['offence'] == '1', row
        assert 0 < seconds(row['expires']) <= 2, row
        # Any request is refused: a ban is the address's.
        assert shut_out(s)
        # ::1 is another client.
        assert s.get('/books', family=socket.AF_INET6).status == 200
        # Released after the 2 s, not before 1.5 s.
        time.sleep(1.5)
        assert shut_out(s), 'released before its bantime'
        assert wait_for(lambda: not shut_out(s), 3.0), 'never released'
        released_at = time.monotonic()
        assert released_at - banned_at < 4.0
        # The bucket is still empty (1/m): five more denials, banned again.
        seen = hammer_until_refused(s, '/books')
        assert seen == [429] * 5, seen
        rebanned_at = time.monotonic()
        row = ban_row(s, '127.0.0.1/32')
        assert row and row['offence'] == '2', row
        assert 2 < seconds(row['expires']) <= 4, row
        # Twice as long: still refused after 3 s, released by 6.
        time.sleep(max(0.0, 3.0 - (time.monotonic() - rebanned_at)))
        assert shut_out(s), 'the second ban was not longer'
        assert wait_for(lambda: not shut_out(s), 3.0), 'never released'
        # The application saw one /books from 127.0.0.1, and the probes.
        books = [e for e in s.log() if e['target'] == '/books']
        assert len(books) == 2 and books[1]['client'] == '::1', books
    finally:
        s.stop()


def served_then_banned(s):
    """A keep-alive connection served once, then its client banned for an
    hour by rlshimctl: the connection, still open."""
    c = connect(s.port)
    c.sendall(request('GET', '/books', close=False))
    first = b''
    while b'\r\n\r\n' not in first or not parse_responses(first, ['GET']):
        b = c.recv(65536)
        assert b, 'closed before the first answer'
        first += b
    assert parse_responses(first, ['GET'])[0].status == 200
    out = ctl(s, 'ban', '127.0.0.1', '--for', '1h')
    assert out.returncode == 0, out.stderr
    return c


def keepalive_banned():
    """A ban ends a keep-alive connection at its next request: a 429
    saying how long the ban lasts, then EOF; nothing reaches the app.
    `rlshimctl unban` lets the client back."""
    s = F.Legacy('[limit:all]\nmatch = *\nrate = 100/s\n')
    try:
        c = served_then_banned(s)
        c.sendall(request('GET', '/books?second', close=False))
        rest = recv_all(c)
        c.close()
        rs = parse_responses(rest, ['GET'])
        assert len(rs) == 1 and rs[0].status == 429, rest
        assert 3590 <= int(rs[0].headers['retry-after']) <= 3600, rs[0].headers
        assert not any(e['target'] == '/books?second' for e in s.log())
        # New connections: refused at accept; the ban counts them.
        assert refused(s.port) and refused(s.port)
        row = ban_row(s, '127.0.0.1/32')
        assert row and row['reason'] == 'manual' and row['refused'] == 3, row
        bans_json_says(s, '127.0.0.1/32', row)
        assert ctl(s, 'unban', '127.0.0.1').returncode == 0
        assert s.get().status == 200
        assert ctl(s, 'bans').stdout.strip() == 'no bans'
        out = ctl(s, 'bans', '--json')
        assert out.returncode == 0 and json.loads(out.stdout) == [], out
        assert ctl(s, 'unban', '127.0.0.1').returncode == 1
    finally:
        s.stop()


def dry_run_banned():
    """In mode = dry-run a ban refuses nothing: a banned client is served on
    its open keep-alive connection and on new ones, each refusal counted
    on the ban and logged as `dry-run: would refuse`."""
    s = F.Legacy('mode = dry-run\n[limit:all]\nmatch = *\nrate = 100/s\n')
    try:
        c = served_then_banned(s)
        c.sendall(request('GET', '/books?second'))
        rs = parse_responses(recv_all(c), ['GET'])
        c.close()
        assert len(rs) == 1 and rs[0].status == 200, rs
        assert s.get('/books?third').status == 200
        targets = [e['target'] for e in s.log()]
        assert '/books?second' in targets and '/books?third' in targets, targets
        row = ban_row(s, '127.0.0.1/32')
        assert row and row['refused'] == 2, row
        err = s.server.stderr_text()
        assert re.search(r'msg="dry-run: would refuse" client=127\.0\.0\.1 '
                         r'reason=ban for=', err), err
    finally:
        s.stop()


def proxied_client_banned():
    """Behind a trusted proxy, the proxy's client is banned request by
    request; the proxy and its other clients are served."""
    s = F.Legacy('trusted_proxies = 127.0.0.1\n'
                 '[limit:all]\nmatch = *\nrate = 100/s\n')
    try:
        assert s.get().status == 200  # the segment exists from the 1st accept
        assert ctl(s, 'ban', '198.51.100.0/24').returncode == 0
        r = s.get(headers={'X-Forwarded-For': '198.51.100.9'})
        assert r.status == 429 and int(r.headers['retry-after']) > 3500, r
        r = s.get(headers={'X-Forwarded-For': '203.0.113.9'})
        assert r.status == 200, r
        assert s.get().status == 200
        assert len(s.log()) == 3
    finally:
        s.stop()


def ctl_errors():
    """rlshimctl ban refuses what is not an address and says why."""
    s = F.Legacy('[limit:all]\nmatch = *\nrate = 100/s\n')
    try:
        assert s.get().status == 200
        for bad in (['ban', 'example.com'], ['ban', '10.0.0.0/33'],
                    ['ban', '10.0.0.1', '--for', 'soon']):
            out = ctl(s, *bad)
            assert out.returncode in (1, 2) and out.stderr.strip(), (bad, out)
        assert ctl(s, 'ban', '2001:db8::/64', '--for', '10m').returncode == 0
        row = ban_row(s, '2001:db8::/64')
        assert row and row['reason'] == 'manual' and row['rule'] == '-' and \
            540 < seconds(row['expires']) <= 600, row
    finally:
        s.stop()


TESTS = [escalation, keepalive_banned, dry_run_banned, proxied_client_banned,
         ctl_errors]


def main():
    try:
        return run('bans', [(f'bans: {t.__name__}', t) for t in TESTS])
    finally:
        shutil.rmtree(F.TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
