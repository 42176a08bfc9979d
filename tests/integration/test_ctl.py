#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_ctl.py - rlshimctl status, top and metrics against what a client of
legacy_server under the shim saw: the allowed and denied counts per rule
equal the 200s and 429s the client got, top shows the client's address with
nothing remaining, the metrics parse under a strict reading of the text
exposition format 0.0.4; ban/unban through rlshimctl as the client sees it;
usage errors, --help, a missing segment; a configuration edited on disk and
not yet applied; the agent, Redis up and down (and the refusals an outage
causes), the verbs status RULE, bans --rule, who, reset --all, unban --all,
and XDP (as root, in network
namespaces: see test_xdp.py) as status and metrics show them.
"""
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, refused, require_root, run, wait_for  # noqa: E402
import test_features as F  # noqa: E402
import test_redis as R  # noqa: E402
import test_xdp as X  # noqa: E402

CTL = os.path.join(REPO, 'build', 'rlshimctl')

TWO_RULES = ('[limit:api]\nmatch = *\nrate = 10/m\nkey = ip\n'
             '[limit:sms]\nmatch = POST /sms\nrate = 3/m\nburst = 3\nkey = ip\n'
             'maxretry = 10\nfindtime = 1m\nbantime = 15m\n')


def ctl(config, *args, env=None):
    return subprocess.run([CTL, '-c', config, *args], capture_output=True,
                          text=True, timeout=20, env=env)


def ok(config, *args):
    out = ctl(config, *args)
    assert out.returncode == 0, (args, out.returncode, out.stderr)
    assert out.stderr == '', (args, out.stderr)
    return out.stdout


def status(s):
    return json.loads(ok(s.config, 'status', '--json'))


def rules_of(st):
    return {r['name']: r for r in st['rules']}


def drive(s):
    """5 POST /sms then 9 GET /books, one connection each: sms (3/m) admits
    3, api (10/m) what is left of its 10. Returns the statuses per path."""
    seen = {'post': [], 'get': []}
    for _ in range(5):
        seen['post'].append(s.get('/sms', 'POST').status)
    for _ in range(9):
        seen['get'].append(s.get('/books').status)
    return seen


def count(codes, code):
    return sum(1 for c in codes if c == code)


# ---- a strict reading of the text exposition format 0.0.4 ---------------------------

METRIC = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*'
VALUE = r'"((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(rf'^({METRIC})(?:\{{(.*)\}})? (\S+)(?: (-?[0-9]+))?$')
PAIR = re.compile(rf'({LABEL})={VALUE}(,|$)')
TYPES = ('counter', 'gauge', 'histogram', 'summary', 'untyped')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: {'n': '\n'}.get(m.group(1), m.group(1)), v)


def parse_labels(text, line):
    labels = {}
    pos = 0
    while pos < len(text):
        m = PAIR.match(text, pos)
        assert m, f'bad labels at {pos}: {line!r}'
        name = m.group(1)
        assert not name.startswith('__'), f'reserved label name: {line!r}'
        assert name not in labels, f'label twice: {line!r}'
        labels[name] = unescape(m.group(2))
        pos = m.end()
        if m.group(3) == '' and pos < len(text):
            raise AssertionError(f'labels go on after the end: {line!r}')
    return labels


def check_exposition(text):
    """Every line a HELP, a TYPE or a sample; each family one HELP and one
    TYPE, both before its samples, its samples together; counters end in
    _total; no series twice; values floats. Returns {(name, labels): value}
    with labels a sorted tuple of pairs."""
    assert text.endswith('\n'), 'the last line has no newline'
    helped, typed, done = set(), {}, set()
    current = None
    series = {}
    samples_of = {}
    hist = {}
    for line in text[:-1].split('\n'):
        assert line, 'empty line'
        if line.startswith('#'):
            m = re.fullmatch(rf'# (HELP|TYPE) ({METRIC}) (.*)', line)
            if not m:
                assert not re.match(r'#\s*(HELP|TYPE)\b', line), f'malformed: {line!r}'
                continue  # a plain comment
            kind, name, rest = m.groups()
            assert name not in done, f'{name} comes back after other families'
            if current and current != name:
                done.add(current)
            current = name
            if kind == 'HELP':
                assert name not in helped, f'two HELP for {name}'
                assert name not in samples_of, f'HELP after samples of {name}'
                assert re.fullmatch(r'(?:[^\\]|\\[\\n])*', rest), f'HELP escapes: {line!r}'
                helped.add(name)
            else:
                assert name not in typed, f'two TYPE for {name}'
                assert name not in samples_of, f'TYPE after samples of {name}'
                assert rest in TYPES, f'unknown type: {line!r}'
                typed[name] = rest
            continue
        m = SAMPLE.match(line)
        assert m, f'not a sample: {line!r}'
        name, labels, value, _ts = m.groups()
        family = name
        if typed.get(current) == 'histogram' and name in (
                current + '_bucket', current + '_sum', current + '_count'):
            family = current
        assert family == current, f'{name} outside its family ({current})'
        assert family in helped and family in typed, f'{name}: no HELP or TYPE before'
        v = float(value)  # ValueError: not a float
        assert not math.isnan(v), line
        if typed[family] == 'counter':
            assert name.endswith('_total'), f'counter {name} without _total'
            assert v >= 0, line
        lab = parse_labels(labels or '', line)
        if typed[family] == 'histogram':
            # buckets cumulative, ending in +Inf, which equals _count
            rest = tuple(sorted((k, x) for k, x in lab.items() if k != 'le'))
            if name.endswith('_bucket'):
                assert 'le' in lab, f'bucket without le: {line!r}'
                prev = hist.get((family, rest))
                if prev is not None:
                    assert prev[0] != '+Inf', f'bucket after +Inf: {line!r}'
                    assert float(lab['le']) > float(prev[0]), f'le not rising: {line!r}'
                    assert v >= prev[1], f'bucket not cumulative: {line!r}'
                hist[(family, rest)] = (lab['le'], v)
            elif name.endswith('_count'):
                last = hist.get((family, rest))
                assert last and last[0] == '+Inf' and last[1] == v, \
                    f'_count is not the +Inf bucket: {line!r}'
        key = (name, tuple(sorted(lab.items())))
        assert key not in series, f'series twice: {line!r}'
        series[key] = v
        samples_of[family] = samples_of.get(family, 0) + 1
    for name in helped | set(typed):
        assert name in helped and name in typed, f'{name}: HELP and TYPE not both'
        assert samples_of.get(name), f'family {name} without samples'
    return series


def prometheus_parse(text):
    """Debian's python3-prometheus-client (tools/deps.sh) parses it too; it
    is installed for the system's python3, which may not be this one."""
    code = ('import sys\n'
            'from prometheus_client.parser import text_string_to_metric_families as f\n'
            'for fam in f(sys.stdin.read()):\n'
            '    for s in fam.samples:\n'
            '        print(fam.type, s.name, repr(sorted(s.labels.items())), s.value)\n')
    for py in (sys.executable, '/usr/bin/python3'):
        out = subprocess.run([py, '-c', code], input=text, capture_output=True,
                             text=True, timeout=20)
        if out.returncode == 0:
            return out.stdout.splitlines()
        if 'ModuleNotFoundError' not in out.stderr:
            raise AssertionError(f'prometheus_client refused it: {out.stderr}')
    if os.environ.get('CI'):
        raise AssertionError('python3-prometheus-client is missing (tools/deps.sh)')
    print('[  NOTE    ] prometheus_client not installed: strict checker only')
    return None


# ---- the tests -------------------------------------------------------------------------

def status_counts():
    """status --json says per rule exactly what the client saw, the human
    status has a line per rule, and the fresh configuration is in force."""
    s = F.Legacy(TWO_RULES)
    try:
        seen = drive(s)
        assert seen['post'] == [200] * 3 + [429] * 2, seen
        assert count(seen['get'], 429) > 0, seen
        st = status(s)
        r = rules_of(st)
        ok200 = count(seen['post'], 200) + count(seen['get'], 200)
        # A request sms denies gives back what api took: api does not count
        # it allowed (nor denied).
        assert r['api']['allowed'] == ok200, (r['api'], seen)
        assert r['api']['denied'] == count(seen['get'], 429), (r['api'], seen)
        assert r['sms']['allowed'] == count(seen['post'], 200), r['sms']
        assert r['sms']['denied'] == count(seen['post'], 429), r['sms']
        assert r['sms']['rate'] == '3/m' and r['sms']['burst'] == 3 and \
            r['sms']['match'] == 'POST /sms' and r['sms']['key'] == 'ip' and \
            r['sms']['algorithm'] == 'token-bucket' and \
            r['sms']['maxretry'] == 10 and r['sms']['bantime_ms'] == 900000, r
        assert not r['api']['retired'] and 'maxretry' not in r['api'], r
        assert st['config']['path'] == s.config, st['config']
        assert st['config']['state'] == 'in_force' and st['config']['in_force'], \
            st['config']
        assert st['mode'] == 'enforce' and st['shm'] == s.shm, st
        assert st['table']['keys'] >= 2 and st['table']['capacity'] >= 65536, st
        assert st['store']['state'] == 'local' and not st['agent']['alive'], st
        assert not st['xdp']['configured'], st

        text = ok(s.config, 'status')
        a = r['api']
        assert re.search(rf'^\s+api\s+\*\s+10/m\s+10\s+ip\s+token-bucket\s+-\s+'
                         rf'{a["allowed"]}\s+{a["denied"]}\s+0$', text, re.M), text
        assert re.search(r'^\s+sms\s+POST /sms\s+3/m\s+3\s+ip\s+token-bucket\s+'
                         r'10 in 1m for 15m\s+3\s+2\s+0$', text, re.M), text
        assert re.search(rf'^config:\s+{re.escape(s.config)}$', text, re.M), text
        assert re.search(r'^\s+in force since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d .*, '
                         r'0 reloads$', text, re.M), text
        assert re.search(rf'^segment:\s+/dev/shm/{re.escape(s.shm)}, ', text, re.M), text
        assert re.search(r'^redis:\s+local only$', text, re.M), text
    finally:
        s.stop()


def top_rows(config, *args):
    lines = ok(config, 'top', *args).splitlines()
    assert re.split(r'\s{2,}', lines[0].strip()) == \
        ['RULE', 'KEY', 'REMAINING', 'LIMIT', 'RETRY', 'RESET'], lines
    return [re.split(r'\s{2,}', line.strip()) for line in lines[1:]]


def top_keys():
    """top lists the limited client first, by its address, with nothing
    remaining and a wait; an IPv6 client shows as its /64."""
    s = F.Legacy(TWO_RULES)
    try:
        drive(s)
        assert s.get('/books', family=socket.AF_INET6).status == 200
        rows = top_rows(s.config)
        assert rows[0][2] == '0', rows  # over the limit comes first
        sms = [r for r in rows if r[0] == 'sms']
        assert sms and sms[0][1] == '127.0.0.1' and sms[0][2] == '0' and \
            sms[0][3] == '3' and sms[0][4] != '-', rows
        api = [r for r in rows if r[0] == 'api']
        assert {r[1] for r in api} == {'127.0.0.1', '::/64'}, rows
        v6 = [r for r in api if r[1] == '::/64'][0]
        assert v6[2] == '9' and v6[3] == '10' and v6[4] == '-', rows
        # The least urgent is last; -n keeps the most urgent (RETRY and
        # RESET count down meanwhile).
        assert rows[-1] == v6, rows
        assert [r[:4] for r in top_rows(s.config, '-n', '1')] == \
            [r[:4] for r in rows[:1]]
        assert [r[:4] for r in top_rows(s.config, '-n2')] == \
            [r[:4] for r in rows[:2]]
        # --json: the same keys in the same order, with the same numbers.
        keys = json.loads(ok(s.config, 'top', '--json'))
        assert [[k['rule'], k['key'], str(k['remaining']), str(k['limit'])]
                for k in keys] == [r[:4] for r in rows], (keys, rows)
        j6 = [k for k in keys if k['key'] == '::/64'][0]
        assert j6['retry_after_ms'] == 0 and j6['reset_after_ms'] > 0, j6
        jsms = [k for k in keys if k['rule'] == 'sms'][0]
        assert 0 < jsms['retry_after_ms'] <= 60000, jsms
        assert jsms['retry_is_bound'] is False, jsms
        assert len(json.loads(ok(s.config, 'top', '--json', '-n', '1'))) == 1
    finally:
        s.stop()


def live_header(frames, names=('sms', 'api')):
    """Each text frame of top -d: a line with the time, the table's fill
    and the store's state; a row per rule with its requests/s and
    denied/s since the last frame ('-' at the first) and a sparkline of
    its last minute; then the keys as top prints them."""
    for n, f in enumerate(frames):
        lines = f.splitlines()
        assert re.match(r'rlshimctl top \d\d:\d\d:\d\d, every 0\.2s: table '
                        r'\d+ of \d+ keys \(\d+\.\d%\), store local only$',
                        lines[0]), lines
        assert re.split(r'\s{2,}', lines[1].strip()) == \
            ['RULE', 'REQ/S', 'DENIED/S', 'LAST MINUTE'], lines
        rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:4]}
        assert set(rows) == set(names), lines
        assert lines[4].split() == ['RULE', 'KEY', 'REMAINING', 'LIMIT',
                                    'RETRY', 'RESET'], lines
        for rule, cells in rows.items():
            if n == 0:
                assert cells[:2] == ['-', '-'], lines
            else:
                assert float(cells[0]) >= float(cells[1]) >= 0, lines
    return frames


def top_live_rates():
    """top -d 0.2 while a client sends to sms (2 a frame, its limit of 3
    spent, so denied) and nothing to api: sms's requests/s and denied/s
    are above 0 in the frames after the first and its sparkline has bars;
    idle's (another path) are 0.0 and its line has no bars."""
    s = F.Legacy('[limit:sms]\nmatch = POST /sms\nrate = 3/m\n'
                 '[limit:idle]\nmatch = GET /idle\nrate = 10/m\n')
    try:
        assert s.get('/sms', 'POST').status != 429  # the segment made
        p = subprocess.Popen([CTL, '-c', s.config, 'top', '-d', '0.2'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            s.get('/sms', 'POST')
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=5)
        assert p.returncode == 0 and err == '', (p.returncode, err)
        frames = live_header(out.split('\n\n'), ('sms', 'idle'))
        assert len(frames) >= 3, out
        bars = set('\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588')
        for f in frames[2:-1]:
            lines = f.splitlines()
            sms = [ln for ln in lines[2:4] if ln.startswith('sms')][0]
            idle = [ln for ln in lines[2:4] if ln.startswith('idle')][0]
            req, den = (float(x) for x in sms.split()[1:3])
            assert req > 0 and den > 0, f
            assert set(sms.split()[3]) <= bars and sms.split()[3], f
            assert idle.split()[1:3] == ['0.0', '0.0'], f
            assert not set(idle) & bars, f
    finally:
        s.stop()


def top_live():
    """top -d 0.2, run for about a second, prints a frame per refresh (at
    least 2) and exits 0 at SIGINT; with --json one array per line."""
    s = F.Legacy(TWO_RULES)
    try:
        drive(s)
        for extra in ([], ['--json']):
            p = subprocess.Popen([CTL, '-c', s.config, 'top', '-d', '0.2',
                                  *extra], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=5)
            assert p.returncode == 0 and err == '', (p.returncode, err)
            if extra:
                frames = [json.loads(line) for line in out.splitlines()]
                assert all(f and f[0]['rule'] == 'sms' for f in frames), out
            else:
                frames = out.split('\n\n')
                assert all(f.startswith('rlshimctl top ') for f in frames), out
                live_header(frames)
            assert 2 <= len(frames) <= 8, (len(frames), out)
        for bad in ('0', '-1', 'x', '1s'):
            lines = one_line_error(ctl(s.config, 'top', '-d', bad), 2)
            assert '-d' in lines[0], lines
    finally:
        s.stop()


KEY_RULES = ('headers_on = all\n'
             '[limit:api]\nmatch = GET /books\nrate = 5/m\nkey = ip\n'
             '[limit:hdr]\nmatch = GET /status/200\nrate = 4/m\nkey = header:X-Api-Key\n'
             '[limit:glob]\nmatch = GET /\nrate = 2/m\nkey = global\n')


def show(config, rule, key):
    """show's line as a dict, and --json's object, which must agree."""
    line = ok(config, 'show', rule, key)
    assert line.endswith('\n') and line.count('\n') == 1, line
    fields = dict(f.split('=', 1) for f in line.split())
    j = json.loads(ok(config, 'show', rule, key, '--json'))
    assert j['rule'] == fields['rule'] == rule, (j, fields)
    assert j['key'] == fields['key'], (j, fields)
    assert str(j['remaining']) == fields['remaining'], (j, fields)
    assert str(j['limit']) == fields['limit'], (j, fields)
    assert j['seen'] == (fields['state'] == 'live'), (j, fields)
    assert j['view'] == fields['view'] == 'host', (j, fields)
    return fields, j


def show_key():
    """show RULE KEY: after N requests remaining = limit - N, as the
    answers' RateLimit-Remaining said, in its line and in --json; a key
    never seen has the full bucket (state=new, "seen": false); an address
    is taken at the rule's prefix; an unknown rule, a KEY that is not an
    address for an ip rule, anything but - for a global rule: exit 1 with
    one line; a missing KEY: usage."""
    s = F.Legacy(KEY_RULES)
    try:
        rs = [s.get('/books') for _ in range(3)]
        assert [r.status for r in rs] == [200] * 3, rs
        said = rs[-1].headers['ratelimit-remaining']
        fields, j = show(s.config, 'api', '127.0.0.1')
        assert fields['remaining'] == said == '2' and fields['limit'] == '5', fields
        assert fields['state'] == 'live' and fields['retry_after'] == '0', fields
        assert j['retry_after_ms'] == 0 and 0 < j['reset_after_ms'] <= 36000, j
        assert show(s.config, 'api', '127.0.0.1/32')[0]['remaining'] == '2'
        # Never seen: a full bucket, nothing to wait for.
        fields, j = show(s.config, 'api', '192.0.2.7')
        assert fields['state'] == 'new' and fields['remaining'] == '5', fields
        assert fields['key'] == '192.0.2.7', fields
        assert j['seen'] is False and j['retry_after_ms'] == 0 and \
            j['reset_after_ms'] == 0, j
        # IPv6 at its /64, whatever address of it is given.
        assert s.get('/books', family=socket.AF_INET6).status == 200
        fields, _ = show(s.config, 'api', '::abcd')
        assert fields['key'] == '::/64' and fields['remaining'] == '4', fields
        # A header's value; a global rule's -.
        r = s.get('/status/200', headers={'X-Api-Key': 'k-1'})
        assert r.status == 200, r
        fields, _ = show(s.config, 'hdr', 'k-1')
        assert fields['remaining'] == r.headers['ratelimit-remaining'] == '3', fields
        assert show(s.config, 'hdr', 'k-2')[0]['state'] == 'new'
        assert [s.get('/').status for _ in range(3)] == [200, 200, 429]
        fields, j = show(s.config, 'glob', '-')
        assert fields['remaining'] == '0' and fields['retry_after'] != '0', fields
        assert 0 < j['retry_after_ms'] <= 30000, j
        for args, word in ((['nosuch', '127.0.0.1'], 'nosuch'),
                           (['api', 'not-an-ip'], 'not an address'),
                           (['api', '127.0.0.1/x'], 'not an address'),
                           (['glob', 'x'], 'global')):
            for extra in ([], ['--json']):
                lines = one_line_error(ctl(s.config, 'show', *args, *extra), 1)
                assert len(lines) == 1 and word in lines[0], (args, lines)
        lines = one_line_error(ctl(s.config, 'show', 'api'), 2)
        assert lines[1].startswith('usage: rlshimctl [-c FILE] show RULE KEY'), lines
    finally:
        s.stop()


def reset_key():
    """reset RULE KEY: a client refused (429) is served again (200) at
    once, with the full bucket, and says so (this host only without
    [redis]); other keys keep their state; a key with no state is fine
    (exit 0, nothing to do); an unknown rule or a bad KEY exit 1."""
    s = F.Legacy(KEY_RULES)
    try:
        assert [s.get('/books').status for _ in range(6)] == [200] * 5 + [429]
        assert s.get('/books', family=socket.AF_INET6).status == 200
        out = ok(s.config, 'reset', 'api', '127.0.0.1')
        assert out.startswith('rule=api key=127.0.0.1 reset') and \
            'this host' in out, out
        r = s.get('/books')
        assert r.status == 200 and r.headers['ratelimit-remaining'] == '4', r
        assert show(s.config, 'api', '::1')[0]['remaining'] == '4'
        assert [s.get('/').status for _ in range(3)] == [200, 200, 429]
        ok(s.config, 'reset', 'glob', '-')
        assert s.get('/').status == 200
        out = ok(s.config, 'reset', 'api', '192.0.2.9')
        assert 'nothing to reset' in out, out
        for args, word in ((['nosuch', '127.0.0.1'], 'nosuch'),
                           (['api', 'x'], 'not an address')):
            lines = one_line_error(ctl(s.config, 'reset', *args), 1)
            assert len(lines) == 1 and word in lines[0], (args, lines)
        lines = one_line_error(ctl(s.config, 'reset', 'api'), 2)
        assert lines[1].startswith('usage: rlshimctl [-c FILE] reset RULE [KEY] [--all]'), lines
    finally:
        s.stop()


def metrics():
    """The exposition is well-formed and its request counts are the
    client's."""
    s = F.Legacy(TWO_RULES)
    try:
        seen = drive(s)
        text = ok(s.config, 'metrics')
        series = check_exposition(text)

        def val(name, **labels):
            return series[(name, tuple(sorted(labels.items())))]
        ok200 = count(seen['post'], 200) + count(seen['get'], 200)
        assert val('rlshim_requests_total', rule='api', decision='allowed') == ok200
        assert val('rlshim_requests_total', rule='api', decision='denied') == \
            count(seen['get'], 429)
        assert val('rlshim_requests_total', rule='sms', decision='allowed') == 3
        assert val('rlshim_requests_total', rule='sms', decision='denied') == 2
        assert val('rlshim_bans_issued_total', rule='sms') == 0
        assert val('rlshim_bans_active') == 0
        assert val('rlshim_table_capacity') >= 65536
        assert val('rlshim_table_keys') >= 1
        assert val('rlshim_config_in_force') == 1
        assert val('rlshim_config_reloads_total') == 0
        names = {k[0] for k in series}
        # No agent, no [redis], no [xdp]: those families are left out.
        for absent in ('rlshim_agent_up', 'rlshim_store_up',
                       'rlshim_sync_lag_seconds', 'rlshim_xdp_attached',
                       'rlshim_xdp_packets_total', 'rlshim_xdp_drops_total'):
            assert absent not in names and absent not in text, absent
        # The application's answers, per rule that counted them: every
        # 200 the client saw came from it (the 429s are the shim's).
        assert val('rlshim_responses_total', rule='api', **{'class': '2xx'}) == ok200
        assert val('rlshim_responses_total', rule='sms', **{'class': '2xx'}) == 3
        for c in ('1xx', '3xx', '4xx', '5xx'):
            assert val('rlshim_responses_total', rule='sms', **{'class': c}) == 0
        assert val('rlshim_response_seconds_count', rule='api') == ok200
        assert val('rlshim_response_seconds_count', rule='sms') == 3
        assert val('rlshim_response_seconds_bucket', rule='sms', le='+Inf') == 3
        assert 0 < val('rlshim_response_seconds_sum', rule='sms') < 60
        # Labels are per rule, decision, status class and bucket, never
        # per key.
        assert not any(dict(k[1]).keys() - {'rule', 'decision', 'class', 'le'}
                       for k in series)
        parsed = prometheus_parse(text)
        if parsed is not None:
            assert any(line.startswith('counter rlshim_requests_total ') and
                       "('decision', 'denied'), ('rule', 'sms')" in line and
                       line.endswith(' 2.0') for line in parsed), parsed
            assert len(parsed) == len(series), (parsed, series)
    finally:
        s.stop()


def checker_is_strict():
    """The checker itself refuses what the format does not allow."""
    good = '# HELP a_total x\n# TYPE a_total counter\na_total{r="q\\"\\\\\\n"} 1\n'
    assert check_exposition(good) == {('a_total', (('r', 'q"\\\n'),)): 1.0}
    bad = [
        'a_total 1\n',                                               # no HELP/TYPE
        '# HELP a x\n# TYPE a counter\na 1\n',                       # no _total
        '# HELP a x\n# TYPE a gauge\na 1\na 2\n',                    # twice
        '# HELP a x\n# TYPE a gauge\na{r="x"y"} 1\n',                # bad escape
        '# HELP a x\n# TYPE a gauge\na one\n',                       # not a float
        '# HELP a x\n# TYPE a gauge\n',                              # no samples
        '# HELP a x\n# TYPE a gauge\na 1',                           # no newline
        '# HELP a x\n# TYPE a gauge\n# HELP a y\na 1\n',             # two HELP
        '# HELP 1a x\n# TYPE 1a gauge\n1a 1\n',                      # bad name
        '# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n',
    ]
    for text in bad:
        try:
            check_exposition(text)
        except (AssertionError, ValueError):
            continue
        raise AssertionError(f'accepted: {text!r}')


def ban_round_trip():
    """ban through rlshimctl: the client's connections are refused at
    accept, bans and status show it; unban: the next request is served."""
    s = F.Legacy('[limit:all]\nmatch = *\nrate = 100/s\n')
    try:
        assert s.get().status == 200
        out = ok(s.config, 'ban', '127.0.0.1', '--for', '10m')
        assert out == 'banned 127.0.0.1/32 for 10m\n', out
        assert refused(s.port)
        assert refused(s.port)
        rows = ok(s.config, 'bans').splitlines()
        assert rows[0].split()[0] == 'ADDRESS' and len(rows) == 2, rows
        f = rows[1].split()
        assert f[0] == '127.0.0.1/32' and f[1] == 'manual' and f[4] == '2', rows
        st = status(s)
        assert st['bans'] == {'active': 1, 'refusals': 2, 'issued': 0}, st['bans']
        assert re.search(r'^bans:\s+1 active, 2 refused', ok(s.config, 'status'),
                         re.M)
        series = check_exposition(ok(s.config, 'metrics'))
        assert series[('rlshim_bans_active', ())] == 1
        assert series[('rlshim_ban_refusals_total', ())] == 2
        assert ok(s.config, 'unban', '127.0.0.1') == 'unbanned 127.0.0.1/32\n'
        assert s.get().status == 200
        assert status(s)['bans']['active'] == 0
        assert ok(s.config, 'bans') == 'no bans\n'
    finally:
        s.stop()


def options_anywhere():
    """A command's options may come before, between or after its
    arguments, as one word or two; "--" ends them; an unknown option, an
    option without its value and an argument too many are usage errors
    that change nothing."""
    s = F.Legacy('[limit:all]\nmatch = *\nrate = 10/m\n')
    try:
        assert s.get().status == 200
        for args in (['--for', '10m', '127.0.0.1'], ['127.0.0.1', '--for', '10m'],
                     ['--for=10m', '127.0.0.1'], ['--', '127.0.0.1']):
            out = ok(s.config, 'ban', *args)
            want = '1h' if args[0] == '--' else '10m'
            assert out == f'banned 127.0.0.1/32 for {want}\n', (args, out)
            assert refused(s.port), args
            assert ok(s.config, 'unban', '127.0.0.1') == 'unbanned 127.0.0.1/32\n'
        for args, why in ((['ban', '127.0.0.1', '--bogus'], "unknown option '--bogus'"),
                          (['ban', '--bogus', '127.0.0.1'], "unknown option '--bogus'"),
                          (['ban', '127.0.0.1', '-x'], "unknown option '-x'"),
                          (['ban', '127.0.0.1', '--for'], '--for wants a value'),
                          (['ban', '127.0.0.1', '127.0.0.2'], "unexpected argument '127.0.0.2'"),
                          (['ban', '127.0.0.1', '--', '--for', '1m'], "unexpected argument '--for'"),
                          (['status', '--json=yes'], '--json takes no value'),
                          (['top', '--', '-n', '1'], "unexpected argument '-n'"),
                          (['unban', '--for', '1m', '127.0.0.1'], "unknown option '--for'")):
            lines = one_line_error(ctl(s.config, *args), 2)
            assert len(lines) == 2 and why in lines[0], (args, lines)
            assert lines[1].startswith(f'usage: rlshimctl [-c FILE] {args[0]}'), (args, lines)
        assert ok(s.config, 'bans') == 'no bans\n'
        assert s.get().status == 200
        # Wherever they stand, the same answer.
        assert json.loads(ok(s.config, 'status', '--json'))['bans']['active'] == 0
        assert [r[:4] for r in top_rows(s.config, '-n', '1')] == \
            [r[:4] for r in top_rows(s.config, '-n1')]
        out = ctl(s.config, 'ban', '127.0.0.1', '--help')
        assert out.returncode == 0 and out.stdout.startswith(
            'usage: rlshimctl [-c FILE] ban ADDR[/LEN] [--for DUR] [--force]\n'), out
        assert ok(s.config, 'bans') == 'no bans\n'
    finally:
        s.stop()


def ban_guards():
    """A ban wider than a /8 (IPv4) or /32 (IPv6), or one that shares an
    address with the allow list, is refused in one line that says what it
    would cover, and nothing is banned; a /8 and a /32 are taken; --force
    bans each as given (the servers still serve an allow address)."""
    s = F.Legacy('allow = 127.0.0.1 2001:db8:5::/48\n'
                 '[limit:all]\nmatch = *\nrate = 100/s\n')
    force = ' (--force overrides)'
    try:
        assert s.get().status == 200
        for target, why in (
                ('0.0.0.0/0', '0.0.0.0/0: it covers every IPv4 address, more than a /8'),
                ('::/0', '::/0: it covers every IPv6 address, more than a /32'),
                ('2.0.0.0/7', '2.0.0.0/7: it covers 2^25 addresses, more than a /8'),
                ('2001:db8::/31', '2001:db8::/31: it covers 2^97 addresses, '
                 'more than a /32'),
                ('127.0.0.0/8', '127.0.0.0/8: it covers 127.0.0.1 of the allow list'),
                ('127.0.0.1', '127.0.0.1/32: it covers 127.0.0.1 of the allow list'),
                ('2001:db8:5:1::/64', '2001:db8:5:1::/64: it covers 2001:db8:5::/48 '
                 'of the allow list'),
                ('2001:db8::/32', '2001:db8::/32: it covers 2001:db8:5::/48 '
                 'of the allow list')):
            out = ctl(s.config, 'ban', target, '--for', '10m')
            lines = one_line_error(out, 1)
            assert lines == [f'rlshimctl: refusing to ban {why}{force}'], (target, lines)
            assert out.stdout == '', (target, out.stdout)
            assert ok(s.config, 'bans') == 'no bans\n', target
        for target in ('10.0.0.0/8', '2001:db9::/32'):
            assert ok(s.config, 'ban', target) == f'banned {target} for 1h\n'
            assert ok(s.config, 'unban', target) == f'unbanned {target}\n'
        assert s.get().status == 200
        for target, text in (('0.0.0.0/0', '0.0.0.0/0'), ('::/0', '::/0'),
                             ('127.0.0.1', '127.0.0.1/32')):
            assert ok(s.config, 'ban', '--force', target, '--for', '10m') == \
                f'banned {text} for 10m\n', target
        rows = [r.split() for r in ok(s.config, 'bans').splitlines()[1:]]
        assert sorted(r[0] for r in rows) == ['0.0.0.0/0', '127.0.0.1/32', '::/0'], rows
        assert all(r[1] == 'manual' for r in rows), rows
        assert status(s)['bans']['active'] == 3
        assert s.get().status == 200  # allow: never refused by the servers
    finally:
        s.stop()


def versions():
    """rlshimctl --version and rlshimd --version: one line, the Makefile's
    release, exit 0, with no configuration or segment anywhere."""
    with open(os.path.join(REPO, 'Makefile')) as f:
        version = re.search(r'^RLSHIM_VERSION := (\S+)$', f.read(), re.M).group(1)
    env = dict(os.environ, RLSHIM_CONFIG=os.path.join(F.TMP, 'none.conf'))
    for prog, path in (('rlshimctl', CTL),
                       ('rlshimd', os.path.join(REPO, 'build', 'rlshimd'))):
        out = subprocess.run([path, '--version'], capture_output=True, text=True,
                             timeout=10, env=env)
        assert (out.returncode, out.stdout, out.stderr) == \
            (0, f'{prog} {version}\n', ''), (prog, out)


COMMANDS = {'status': '[RULE] [--json]', 'top': '-n N] [-d SECS] [--json',
            'show': 'RULE KEY [--json]', 'reset': 'RULE [KEY] [--all]', 'metrics': '',
            'check': 'FILE', 'ban': 'ADDR[/LEN] [--for DUR] [--force]',
            'unban': '[ADDR[/LEN]] [--all]', 'bans': '[--json] [--rule RULE]',
            'who': 'ADDR [--json]', 'xdp': 'stats'}


def one_line_error(out, code):
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert lines and lines[0].startswith('rlshimctl: '), out.stderr
    return lines


def usage():
    """Usage errors exit 2 with a usage line, failures 1 with one line,
    --help 0 and names the arguments; a segment that does not exist yet is
    a failure, said in one line."""
    d = os.path.join(F.TMP, 'usage')
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, 'rlshim.conf')
    shm = f'rlshim-ctl-none-{os.getpid()}'
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = {shm}\n[limit:a]\nmatch = *\nrate = 1/s\n')
    for args in (['frobnicate'], ['status', '--bogus'], ['top', '-n', 'x'],
                 ['top', '-n', '0'], ['top', 'extra'], ['metrics', 'extra'],
                 ['--bogus', 'status'], [], ['ban'], ['xdp'], ['unban'],
                 ['unban', '192.0.2.1', '--all'], ['reset', 'a'],
                 ['reset', 'a', 'k', '--all'], ['who'], ['who', '1.2.3.4', 'x'],
                 ['status', 'a', 'b']):
        lines = one_line_error(ctl(conf, *args), 2)
        assert len(lines) == 2 and lines[1].startswith('usage: rlshimctl '), \
            (args, lines)
    for cmd, args in COMMANDS.items():
        for flag in ('--help', '-h'):
            out = ctl(conf, cmd, flag)
            assert out.returncode == 0 and out.stderr == '', (cmd, out)
            assert out.stdout.startswith(f'usage: rlshimctl [-c FILE] {cmd}'), out.stdout
            assert args in out.stdout.splitlines()[0], (cmd, out.stdout)
    top = ctl(conf, '--help')
    assert top.returncode == 0 and all(c in top.stdout for c in COMMANDS), top
    helptext = ctl(conf, 'metrics', '--help').stdout
    assert 'textfile_collector' in helptext and 'mv ' in helptext, helptext
    for cmd in (['status'], ['status', '--json'], ['top'], ['metrics'],
                ['bans'], ['ban', '192.0.2.1'], ['unban', '192.0.2.1'],
                ['status', 'a'], ['who', '192.0.2.1'], ['unban', '--all'],
                ['reset', 'a', '--all'], ['bans', '--rule', 'a']):
        lines = one_line_error(ctl(conf, *cmd), 1)
        assert len(lines) == 1 and shm in lines[0], (cmd, lines)
        assert not os.path.exists(f'/dev/shm/{shm}'), 'rlshimctl created it'
    lines = one_line_error(ctl(os.path.join(d, 'missing.conf'), 'status'), 1)
    assert len(lines) == 1 and 'missing.conf' in lines[0], lines


def config_changed():
    """Fresh: in force. Edited on disk and no request since: "changed on
    disk, not yet applied"; a broken edit still shows the segment, and the
    message the servers will refuse it with."""
    s = F.Legacy(TWO_RULES)
    try:
        assert s.get().status == 200
        assert status(s)['config']['state'] == 'in_force'
        with open(s.config, 'a') as f:
            f.write('; an edit\n')
        later = time.time_ns() + 2 * 10**9  # a different stamp, whatever
        os.utime(s.config, ns=(later, later))  # the filesystem's mtime grain
        st = status(s)
        assert st['config']['state'] == 'changed' and not st['config']['in_force'] \
            and st['config']['error'] is None, st['config']
        text = ok(s.config, 'status')
        assert re.search(r'^\s+changed on disk, not yet applied', text, re.M), text
        assert check_exposition(ok(s.config, 'metrics'))[
            ('rlshim_config_in_force', ())] == 0
        with open(s.config, 'a') as f:
            f.write('[limit:bad]\nrate = lots\n')
        st = status(s)
        assert st['config']['state'] == 'changed', st['config']
        assert st['config']['error'].startswith(f'{s.config}:'), st['config']
        # What the servers apply: the text in force, with its counts.
        assert st['mode'] == 'enforce' and st['config']['kept'], st
        assert rules_of(st)['api']['allowed'] == 1, st['rules']
        assert f'{s.config} refused (line ' in ok(s.config, 'status')
        check_exposition(ok(s.config, 'metrics'))
    finally:
        s.stop()


def config_kept():
    """The file broken, emptied, deleted: the servers keep the text in force
    (the segment keeps it), and status, top, metrics and bans show that:
    exit 0, the rules and mode in force, and the file's refusal in one
    line (file:line: reason in --json)."""
    s = F.Legacy('mode = dry-run\n' + TWO_RULES)
    try:
        assert s.get().status == 200
        since = status(s)['config']['since_ms']
        edits = [('broken', '[limit:bad]\nrate = lots\n', 'a',
                  r'line \d+: bad rate \'lots\'', r':\d+: bad rate \'lots\''),
                 ('emptied', '', 'w', r'no \[limit:\*\] rule', r': no \[limit'),
                 ('deleted', None, None, 'No such file or directory',
                  ': No such file or directory')]
        for what, text, how, why, json_why in edits:
            if text is None:
                os.unlink(s.config)
            else:
                with open(s.config, how) as f:
                    f.write(text)
                later = time.time_ns() + 2 * 10**9  # a stamp of its own
                os.utime(s.config, ns=(later, later))
            time.sleep(1.1)  # a server looks at the file once a second
            assert s.get().status == 200, what  # and refuses it
            out = ok(s.config, 'status')
            line = re.search(r'^config:\s+(.*)$', out, re.M).group(1)
            assert re.fullmatch(rf'{re.escape(s.config)} refused \({why}.*\), '
                                r'applying the text loaded at \d{4}-.*', line), \
                (what, line)
            assert re.search(r'^mode:\s+dry-run$', out, re.M), (what, out)
            assert re.search(r'^\s+api\s+\*\s+10/m\s+10\s+ip\s', out, re.M), \
                (what, out)
            assert re.search(r'^\s+sms\s+POST /sms\s+3/m\s+3\s+ip\s+token-bucket'
                             r'\s+10 in 1m for 15m\s', out, re.M), (what, out)
            st = status(s)
            assert re.fullmatch(re.escape(s.config) + json_why + '.*',
                                st['config_refused']), (what, st)
            assert st['config']['kept'] and not st['config']['in_force'] and \
                st['config']['since_ms'] == since, (what, st['config'])
            assert st['mode'] == 'dry-run' and st['shm'] == s.shm, (what, st)
            r = rules_of(st)
            assert r['api']['match'] == '*' and r['sms']['match'] == 'POST /sms' \
                and not r['api']['retired'] and r['api']['allowed'] >= 2, (what, r)
            assert top_rows(s.config)[0][:2] == ['api', '127.0.0.1'], what
            series = check_exposition(ok(s.config, 'metrics'))
            assert series[('rlshim_requests_total',
                           (('decision', 'allowed'), ('rule', 'api')))] >= 2, what
            assert series[('rlshim_config_in_force', ())] == 0, what
            assert ok(s.config, 'bans').strip() == 'no bans', what
    finally:
        s.stop()
    # A file with no rule that a server took at start, as it is: that file
    # is what is in force, not a refused one.
    s = F.Legacy('mode = dry-run\n')
    try:
        assert s.get().status == 200
        st = status(s)
        assert st['config']['state'] == 'in_force' and not st['config']['kept'] \
            and st['config_refused'] is None and st['rules'] == [], st
    finally:
        s.stop()


def shared_segment():
    """Two servers with different files on one segment: a name's counts are
    one series whatever rate each gives it, and a rule the file lacks is
    shown as not in it."""
    shm = f'rlshim-ctl-shared-{os.getpid()}'
    a = F.Legacy('[limit:api]\nmatch = *\nrate = 10/m\n', shm=shm)
    b = None
    try:
        b = F.Legacy('[limit:api]\nmatch = *\nrate = 20/m\n'
                     '[limit:old]\nmatch = GET /books\nrate = 1/m\n', shm=shm)
        codes_a = [a.get().status for _ in range(3)]
        codes_b = [b.get('/books').status for _ in range(2)]
        assert codes_a == [200] * 3 and codes_b == [200, 429], (codes_a, codes_b)
        r = rules_of(status(a))
        assert r['api']['allowed'] == 4 and not r['api']['retired'], r
        assert r['api']['rate'] == '10/m', r['api']  # the file's
        assert r['old']['retired'] and r['old']['allowed'] == 1 and \
            r['old']['denied'] == 1 and r['old']['match'] is None, r
        # b started last: its file is the one the segment records in
        # force, so a's view says its rules are the file's, not the
        # servers', and names what the file lacks accordingly.
        text = ok(a.config, 'status')
        assert re.search(r'^\s+old\s+\(not in file\)\s+1/m\s', text, re.M), text
        assert 'which is not what the servers apply' in text, text
        series = check_exposition(ok(a.config, 'metrics'))
        assert series[('rlshim_requests_total',
                       (('decision', 'allowed'), ('rule', 'api')))] == 4
        assert series[('rlshim_requests_total',
                       (('decision', 'denied'), ('rule', 'old')))] == 1
    finally:
        if b:
            b.stop(unlink=False)
        a.stop()


def agent_and_redis():
    """With [redis]: the agent the shim started is alive and syncing, Redis
    is up; Redis killed: status and metrics say the store is down."""
    redis = R.Redis()
    h = R.Host(f'redis://127.0.0.1:{redis.port}/0',
               '[limit:api]\nmatch = *\nrate = 100/s\n', 'ctl')
    try:
        R.started([h])
        st = json.loads(ok(h.config, 'status', '--json'))
        assert st['agent']['alive'] and st['agent']['expected'], st['agent']
        assert [st['agent']['pid']] == h.agent_pids(), (st['agent'], h.agent_pids())
        assert st['agent']['sync_interval_ms'] == 50 and \
            st['agent']['last_sync_age_ms'] < 1000 and st['agent']['syncs'] > 0, st
        assert st['store'] == {'state': 'up', 'down_for_ms': None,
                               'url': f'redis://127.0.0.1:{redis.port}/0'}, st
        text = ok(h.config, 'status')
        assert re.search(rf'^redis:\s+up, redis://127.0.0.1:{redis.port}/0$', text,
                         re.M), text
        assert re.search(r'^sync:\s+last sync \d+ms ago, \d+ rounds every 50ms, '
                         r'1 host alive$', text, re.M), text
        series = check_exposition(ok(h.config, 'metrics'))
        assert series[('rlshim_agent_up', ())] == 1
        assert series[('rlshim_store_up', ())] == 1
        assert 0 <= series[('rlshim_sync_lag_seconds', ())] < 1
        # reset RULE --all, here and in Redis
        assert h.get('/books').status == 200
        out = ok(h.config, 'reset', 'api', '--all')
        assert re.fullmatch(r'rule=api reset 1 key here: a full bucket again and in '
                            r"Redis; every host's agent follows within 100ms \(two "
                            r'sync rounds\)\n', out), out
        assert redis.cli('ZCARD', 'rlshim:resets') == '1', redis.cli('ZRANGE', 'rlshim:resets', 0, -1)
        redis.kill()
        assert wait_for(lambda: json.loads(ok(h.config, 'status', '--json'))
                        ['store']['state'] == 'down', 5), ok(h.config, 'status')
        assert re.search(r'^redis:\s+down for [0-9.]+(ms|s), ', ok(h.config, 'status'),
                         re.M)
        series = check_exposition(ok(h.config, 'metrics'))
        assert series[('rlshim_store_up', ())] == 0
        assert series[('rlshim_agent_up', ())] == 1
        out = ctl(h.config, 'reset', 'api', '--all')
        assert out.returncode == 1 and out.stderr == (
            f'rlshimctl: reset on this host only: Redis at redis://127.0.0.1:'
            f'{redis.port}/0 is unreachable, the other hosts keep the keys\' state\n'), out
    finally:
        h.stop()
        redis.stop()


def store_down_counted():
    """on_store_down = closed with Redis stopped: the 429s move the rule's
    denied count and its store-down count (status's STORE-DOWN column, its
    JSON and rlshim_store_down_denials_total), an open rule keeps deciding
    on its share, "N hosts alive" is marked stale, and the agent's "store
    unreachable" line names which rules refuse and which run on a local
    share."""
    redis = R.Redis()
    h = R.Host(f'redis://127.0.0.1:{redis.port}/0',
               '[limit:pay]\nmatch = * /books\nrate = 100/s\non_store_down = closed\n'
               '[limit:site]\nmatch = *\nrate = 100/s\n', 'ctl-down')
    try:
        R.started([h])
        assert h.get('/books').status == 200
        st = json.loads(ok(h.config, 'status', '--json'))
        r = rules_of(st)
        assert r['pay']['store_down'] == 0 and r['pay']['denied'] == 0, r
        assert st['agent']['hosts_alive_stale'] is False, st['agent']
        text = ok(h.config, 'status')
        assert re.search(r'^\s+NAME\s.*\sDENIED\s+STORE-DOWN\s+BANS$', text, re.M), text
        assert 'stale' not in text, text
        redis.stop()
        assert wait_for(lambda: json.loads(ok(h.config, 'status', '--json'))
                        ['store']['state'] == 'down', 5), ok(h.config, 'status')
        codes = [h.get('/books').status for _ in range(5)]
        assert codes == [429] * 5, codes
        assert h.get('/').status != 429  # open: on this host's share
        st = json.loads(ok(h.config, 'status', '--json'))
        r = rules_of(st)
        assert r['pay']['denied'] == 5 and r['pay']['store_down'] == 5, r
        assert r['site']['denied'] == 0 and r['site']['store_down'] == 0, r
        assert st['agent']['hosts_alive_stale'] is True, st['agent']
        text = ok(h.config, 'status')
        row = re.search(r'^\s+pay\s.*\s(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$', text, re.M)
        assert row and row.groups()[1:] == ('5', '5', '0'), text
        assert re.search(r'^sync:.*1 host alive \(stale: as of the last round '
                         r'before the store became unreachable\)$', text, re.M), text
        series = check_exposition(ok(h.config, 'metrics'))
        assert series[('rlshim_requests_total',
                       (('decision', 'denied'), ('rule', 'pay')))] == 5
        assert series[('rlshim_store_down_denials_total', (('rule', 'pay'),))] == 5
        assert series[('rlshim_store_down_denials_total', (('rule', 'site'),))] == 0
        assert wait_for(lambda: 'msg="store unreachable"' in h.agent_log(), 5)
        line = [ln for ln in h.agent_log().splitlines()
                if 'msg="store unreachable"' in ln]
        assert line and line[0].endswith(' refusing="pay" local_share="site"'), line
        # the server's own log says it too, once for the host, at a
        # request (or accept) in the second after the agent saw it
        said = lambda: [ln for ln in h.server.stderr_text().splitlines()
                        if 'msg="store unreachable (rlshimd says' in ln]
        assert wait_for(lambda: h.get('/') and said(), 5), h.server.stderr_text()
        assert len(said()) == 1 and said()[0].endswith(
            ' refusing="pay" local_share="site"'), said()
        redis.start()
        back = lambda: [ln for ln in h.server.stderr_text().splitlines()
                        if 'msg="store reachable again (rlshimd says' in ln]
        assert wait_for(lambda: h.get('/books').status == 200 and back(), 10), \
            h.server.stderr_text()
        time.sleep(1.5)  # a tick or more of every process: said once
        assert len(back()) == 1 and len(said()) == 1, h.server.stderr_text()
        # status: where the agent logs
        st = json.loads(ok(h.config, 'status', '--json'))
        assert st['agent']['log'] and st['agent']['log'].endswith('.log') and \
            os.path.exists(st['agent']['log']), st['agent']
        assert 'msg="store unreachable"' in open(st['agent']['log']).read()
        assert f', logs to {st["agent"]["log"]}' in ok(h.config, 'status')
    finally:
        h.stop()
        redis.stop()


def verbs():
    """The verbs fail2ban and HAProxy users type: status RULE (the jail
    view: counts, keys at their limit, bans from it), bans --rule RULE,
    who ADDR (allow list, bans, every rule's state), reset of a banned
    client says it is still banned, reset RULE --all, unban --all; --for
    takes bare seconds and a bad duration lists the accepted forms; bans
    prints expiries as top does, its columns sized to their content."""
    s = F.Legacy('[limit:login]\nmatch = GET /books\nrate = 2/m\nmaxretry = 3\n'
                 'findtime = 1m\nbantime = 10m\n'
                 '[limit:site]\nmatch = *\nrate = 100/m\n'
                 '[limit:api]\nmatch = GET /sms\nrate = 5/m\nkey = header:X-Key\n')
    try:
        got = [(lambda r: r.status if r else None)(s.get('/books')) for _ in range(6)]
        assert got == [200, 200, 429, 429, 429, None], got
        text = ok(s.config, 'status', 'login')
        for want in (r'^rule:\s+login$', r'^match:\s+GET /books$',
                     r'^limit:\s+2/m, burst 2, key ip, token-bucket$',
                     r'^ban:\s+3 refusals within 1m: banned for 10m$',
                     r'^requests:\s+2 allowed, 3 denied$',
                     r'^keys:\s+1 with a state, 1 at their limit now$',
                     r'^  127\.0\.0\.1\s+0\s+2\s+\d+(\.\d)?s\s+\d+(\.\d)?s$',
                     r'^bans:\s+1 issued by its maxretry on this host; active:$',
                     r'^  127\.0\.0\.1/32\s+maxretry\s+login\s+1\s+\d+\s+(10m00s|9m5\ds)$'):
            assert re.search(want, text, re.M), (want, text)
        st = json.loads(ok(s.config, 'status', 'login', '--json'))
        assert (st['rule'], st['allowed'], st['denied'], st['store_down'],
                st['bans_issued'], st['keys']) == ('login', 2, 3, 0, 1, 1), st
        assert [k['key'] for k in st['limited']] == ['127.0.0.1'], st
        assert st['limited'][0]['remaining'] == 0 and st['limited'][0]['retry_after_ms'] > 0
        assert [b['address'] for b in st['bans']] == ['127.0.0.1/32'], st
        site = json.loads(ok(s.config, 'status', 'site', '--json'))
        assert site['limited'] == [] and site['bans'] == [] and site['denied'] == 0, site
        out = ctl(s.config, 'status', 'nope')
        assert out.returncode == 1 and "no rule 'nope'" in out.stderr, out

        assert ok(s.config, 'bans', '--rule', 'site') == 'no bans from rule site\n'
        assert ok(s.config, 'bans', '--rule', 'login').splitlines()[1].startswith(
            '127.0.0.1/32  maxretry  login ')
        assert json.loads(ok(s.config, 'bans', '--rule', 'site', '--json')) == []

        text = ok(s.config, 'who', '127.0.0.1')
        for want in (r'^address: 127\.0\.0\.1$', r'^allow:\s+no$',
                     r'^banned:\s+yes, refused at accept for (10m00s|9m5\ds) more$',
                     r'^  127\.0\.0\.1/32\s+maxretry\s+login\s',
                     r'^  RULE\s+KEY\s+STATE\s+REMAINING\s+LIMIT\s+RETRY\s+RESET$',
                     r'^  login\s+127\.0\.0\.1\s+live\s+0\s+2\s',
                     r'^  site\s+127\.0\.0\.1\s+live\s+\d+\s+100\s',
                     r'^  api: key header:X-Key, not by address$'):
            assert re.search(want, text, re.M), (want, text)
        who = json.loads(ok(s.config, 'who', '127.0.0.1', '--json'))
        assert who['banned'] and who['allowed_by'] is None and \
            who['banned_for_ms'] > 590000, who
        r = {x['rule']: x for x in who['rules']}
        assert r['login']['remaining'] == 0 and r['login']['seen'], r
        assert r['api']['not_shown'] == 'not by address', r
        other = json.loads(ok(s.config, 'who', '192.0.2.9', '--json'))
        assert not other['banned'] and other['bans'] == [] and \
            not {x['rule']: x for x in other['rules']}['login']['seen'], other
        out = ctl(s.config, 'who', 'nonsense')
        assert out.returncode == 1 and "not an address: 'nonsense'" in out.stderr, out

        out = ok(s.config, 'reset', 'login', '127.0.0.1')
        assert out.splitlines()[1].startswith(
            '127.0.0.1 is still banned (') and \
            out.splitlines()[1].endswith('left): a reset lifts no ban; rlshimctl '
                                         'unban 127.0.0.1 does'), out
        assert ok(s.config, 'reset', 'site', '--all') == \
            'rule=site reset 1 key here: a full bucket again (no [redis]: this host only)\n'
        assert json.loads(ok(s.config, 'status', 'site', '--json'))['keys'] == 0

        assert ok(s.config, 'ban', '10.1.2.3', '--for', '90') == 'banned 10.1.2.3/32 for 90s\n'
        out = ctl(s.config, 'ban', '10.1.2.4', '--for', '9x')
        assert out.returncode == 1 and out.stderr == (
            "rlshimctl: ban: bad duration '9x' for --for (accepted: seconds, 90; "
            "or a number and a unit, 500ms, 30s, 10m, 1h, 1d)\n"), out
        rows = ok(s.config, 'bans').splitlines()
        head = rows[0]
        width = max(len(r.split()[0]) for r in rows[1:])
        assert head.startswith('ADDRESS' + ' ' * (width - len('ADDRESS') + 2) + 'REASON'), rows
        exp = {r.split()[0]: r.split()[-1] for r in rows[1:]}
        assert re.fullmatch(r'1m(29|30)s', exp['10.1.2.3/32']), exp
        assert re.fullmatch(r'(10m00s|9m5\ds)', exp['127.0.0.1/32']), exp

        assert ok(s.config, 'unban', '--all') == 'unbanned 2 bans\n'
        assert ok(s.config, 'bans') == 'no bans\n'
        assert s.get('/other') is not None  # lifted: served again
    finally:
        s.stop()


def check_is_reload():
    """check refuses exactly what a reload refuses: an emptied file is
    refused by the reload of a running server and by check, with the same
    reason; plans without [redis] is an error at file:line for check and for
    a server at start; allow with host bits set is a warning naming
    file:line, and the file still passes (exit 0)."""
    s = F.Legacy('[limit:books]\nmatch = GET /books\nrate = 2/m\n')
    try:
        assert F.codes(s, 3) == [200, 200, 429]
        with open(s.config, 'w') as f:
            f.write(f'[global]\nports = {s.port}\nshm = {s.shm}\n')
        time.sleep(1.1)  # the reload's poll (test_reload.RELOAD_S)
        F.codes(s, 1)
        wait_for(lambda: 'no [limit:*] rule' in s.server.stderr_text())
        err = s.server.stderr_text()
        reason = f'{s.config}: no [limit:*] rule (to lift every limit on ' \
            'purpose, set mode = dry-run)'
        assert reason in err, err
        out = subprocess.run([CTL, 'check', s.config], capture_output=True,
                             text=True, timeout=20)
        assert out.returncode == 1, out
        assert out.stderr == reason + '\n' and out.stdout == '', out
    finally:
        s.stop()

    plans = ('[limit:api]\nmatch = *\nrate = 3/m\nkey = header:X-Key\n'
             'plans = free:1/m paid:9/m\n')
    s = F.Legacy(plans)  # [global] is lines 1-3: plans is line 8
    try:
        out = subprocess.run([CTL, 'check', s.config], capture_output=True,
                             text=True, timeout=20)
        msg = f'{s.config}:8: plans needs [redis]'
        assert out.returncode == 1 and out.stderr.startswith(msg), out
        assert refused(s.port)
        assert msg in s.server.stderr_text(), s.server.stderr_text()
    finally:
        s.stop()

    path = os.path.join(F.TMP, 'allow-bits.conf')
    with open(path, 'w') as f:
        f.write('[global]\nallow = ::1 10.0.0.1/8\n  192.168.0.0/16\n'
                '[limit:a]\nrate = 3/m\n')
    out = subprocess.run([CTL, 'check', path], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0, out
    assert out.stdout == f'{path}: ok, 1 rule, segment rlshim\n', out
    assert out.stderr == f"{path}:2: warning: allow '10.0.0.1/8' has bits " \
        'set past its prefix: it means 10.0.0.0/8\n', out

    # A server started on such a file says so in its log (as nginx does at
    # start), once for the host, and a reload that brings one says it too.
    s = F.Legacy('!raw\n[global]\nports = {port}\nshm = rlshim-ctl-warn-%d\n'
                 'allow = 10.0.0.1/8\n[limit:a]\nrate = 3/m\n' % os.getpid())
    try:
        assert F.codes(s, 1) == [200]
        warn = f"msg=\"{s.config}:4: warning: allow '10.0.0.1/8' has bits set " \
            'past its prefix: it means 10.0.0.0/8"'
        assert wait_for(lambda: warn in s.server.stderr_text())
        line = [ln for ln in s.server.stderr_text().splitlines() if warn in ln]
        assert len(line) == 1 and 'level=warn' in line[0], line
        with open(s.config) as f:
            text = f.read()
        with open(s.config, 'w') as f:
            f.write(text.replace('[limit:a]', 'trusted_proxies = 192.168.1.1/16\n'
                                 '[limit:a]'))
        time.sleep(1.1)  # the reload's poll (test_reload.RELOAD_S)
        F.codes(s, 1)
        assert wait_for(lambda: f'{s.config}:5: warning: trusted_proxies '
                        in s.server.stderr_text()), s.server.stderr_text()
    finally:
        s.stop()
        F.servers.unlink_segment('rlshim-ctl-warn-%d' % os.getpid())


def xdp_status():
    """With [xdp]: status names the interfaces and the mode, says attached,
    and the packet and drop totals; metrics has them as counters."""
    require_root('XDP in a network namespace')
    X.nets_up()
    s = X.server()
    hosts = [h for _, h, _, _ in X.NETS]
    try:
        assert X.client(0, s.port) == '200'
        assert wait_for(lambda: all(X.xdp_on(h) == 'rl_xdp' for h in hosts), 5)
        assert wait_for(lambda: json.loads(ok(s.config, 'status', '--json'))
                        ['xdp']['attached'], 5)
        bad = X.NETS[0][3]
        ok(s.config, 'ban', bad)
        assert wait_for(lambda: f'{bad}/32' in X.xdp_stats(s)[1], 3)
        assert X.client(0, s.port) == 'timeout'
        st = json.loads(ok(s.config, 'status', '--json'))
        x = st['xdp']
        assert x['configured'] and x['interfaces'] == hosts and \
            x['mode'] == 'generic' and x['attached'], x
        assert x['packets'] > 0 and x['dropped'] >= 1, x
        assert st['store']['state'] == 'local' and st['agent']['alive'], st
        text = ok(s.config, 'status')
        assert re.search(rf'^xdp:\s+{" ".join(hosts)} \(generic\), attached, '
                         r'\d+ packets, [1-9]\d* dropped$', text, re.M), text
        series = check_exposition(ok(s.config, 'metrics'))
        assert series[('rlshim_xdp_drops_total', ())] >= x['dropped']
        assert series[('rlshim_xdp_packets_total', ())] >= x['packets']
        assert series[('rlshim_agent_up', ())] == 1
        assert series[('rlshim_xdp_attached', ())] == 1
        assert not any(k[0] in ('rlshim_store_up', 'rlshim_sync_lag_seconds')
                       for k in series)
    finally:
        s.stop()
        X.stop_agent(s)
        X.nets_down()


TESTS = [store_down_counted, verbs, status_counts, top_keys, top_live, top_live_rates, show_key, reset_key, metrics, checker_is_strict, ban_round_trip,
         ban_guards, versions, options_anywhere, usage, config_changed, config_kept, check_is_reload,
         shared_segment, agent_and_redis, xdp_status]


def main():
    try:
        want = sys.argv[1:]
        return run('ctl', [(f'ctl: {t.__name__}', t) for t in TESTS
                           if not want or t.__name__ in want])
    finally:
        X.nets_down()
        for d in (F.TMP, R.TMP):
            shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
