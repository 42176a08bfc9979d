#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_bench_http.py - bench_http.py's --rules and its user head, without
nginx: the rule list (ip first, unknown or repeated names refused), the
rules' sections, and the token (HS256 over the key file's bytes, sub and a
future exp, ~200 bytes).

    python3 tools/bench/test_bench_http.py
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as B  # noqa: E402


def check(cond, what):
    if not cond:
        print(f'FAIL: {what}')
        sys.exit(1)


def refused(text):
    try:
        B.parse_rules(text)
    except ValueError:
        return True
    return False


def unb64(s: bytes) -> bytes:
    return base64.urlsafe_b64decode(s + b'=' * (-len(s) % 4))


def test_rules():
    check(B.parse_rules('cookie,jwt') == ['ip', 'cookie', 'jwt'],
          'ip is added first')
    check(B.parse_rules('jwt,ip') == ['ip', 'jwt'], 'ip moved first')
    check(B.parse_rules('ip') == ['ip'], 'ip alone')
    check(refused('ip,cookies'), 'an unknown rule refused')
    check(refused('jwt,jwt'), 'a repeated rule refused')
    sec = B.rule_section('jwt', Path('/tmp/x/jwt.key'))
    check('key = jwt:sub\njwt_secret = /tmp/x/jwt.key\n' in sec and
          'rate = 100000000/s' in sec, 'jwt rule: the secret, never limits')
    check('jwt_secret' not in B.rule_section('jwt-unverified', None),
          'jwt-unverified: no secret')
    check('key = cookie:session_id\n' in B.rule_section('cookie', None),
          'cookie rule')


def test_user_head():
    head = B.head_user(8080)
    check(head.startswith(B.head_small(8080)[:-2]) and
          head.endswith(b'\r\n\r\n'), 'the small head and more fields')
    fields = dict(line.split(b': ', 1) for line in head.split(b'\r\n')[1:]
                  if b': ' in line)
    sid = fields[b'Cookie'].split(b'=', 1)[1]
    check(len(sid) == 32 and all(c in b'0123456789abcdef' for c in sid),
          'session_id is 32 hex')
    tok = fields[b'Authorization'].split(b' ', 1)[1]
    check(180 <= len(tok) <= 240, f'token ~200 bytes ({len(tok)})')
    h, p, s = tok.split(b'.')
    check(json.loads(unb64(h)) == {'alg': 'HS256', 'typ': 'JWT'}, 'header')
    want = hmac.new(B.JWT_SECRET, h + b'.' + p, hashlib.sha256).digest()
    check(unb64(s) == want, 'signed with the key file\'s bytes')
    claims = json.loads(unb64(p))
    check(claims['sub'] == 'user-4711' and
          claims['exp'] > time.time() + 3600 >= claims['iat'] + 3600,
          'sub, iat, exp in the future')
    check(len(B.JWT_SECRET) >= 32, 'a key of 32 bytes or more (RFC 7518)')


def main():
    test_rules()
    test_user_head()
    print('ok')


if __name__ == '__main__':
    main()
