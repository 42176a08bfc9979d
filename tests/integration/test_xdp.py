#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_xdp.py - the XDP dropper end to end, as root: two client network
namespaces, each behind a veth pair, and legacy_server under the shim on the
host side with `[xdp]` on both host ends (generic mode: veth). A banned
client's TCP handshake gets no answer at all (its SYNs are dropped in XDP,
before the kernel builds a socket) while the other client is served; the
drop counters rise; after `rlshimctl unban` it connects again; in
`mode = dry-run` nothing is dropped. Prefix bans
of several lengths over one client: the longest counts the drops, and
lifting it hands them to the next. The agent detaches on SIGTERM and when
killed, leaving no program behind; it clears a killed older agent's pins
(layout 1), which rlshimctl never reads as its own. Without the privileges
the agent says so once.

Addresses are 10.231.N.0/24 on links this test creates and deletes.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, require_root, run, wait_for  # noqa: E402
from netns import veth_down, veth_up  # noqa: E402
import test_features as F  # noqa: E402
import servers  # noqa: E402

CTL = os.path.join(REPO, 'build', 'rlshimctl')
AGENT = os.path.join(REPO, 'build', 'rlshimd')
TAG = f'{os.getpid() % 10000}'
NETS = []  # (namespace, host interface, host address, client address)

# A client inside a namespace: one GET, prints the status, or why none.
# argv: host, port, timeout, and this folder (for harness's recv_all).
CLIENT = r'''
import socket, sys
host, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from harness import recv_all
s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
s.settimeout(timeout)
try:
    s.connect((host, port))
except socket.timeout:
    print('timeout'); sys.exit(0)
except ConnectionRefusedError:
    print('refused'); sys.exit(0)
data = b''
try:
    s.sendall(b'GET /books HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
    data = recv_all(s)
except (socket.timeout, ConnectionResetError):
    pass
print(data.split(b' ')[1].decode() if data.startswith(b'HTTP/') else 'closed')
'''


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check,
                          timeout=20)


def nets_up():
    for i in (1, 2):
        ns, host, peer = f'rlx{TAG}c{i}', f'rlx{TAG}h{i}', f'rlx{TAG}p{i}'
        NETS.append((ns, host, *veth_up(ns, host, peer, f'10.231.{i}',
                                        f'fd00:231:{i}')))


def nets_down():
    for ns, host, _, _ in NETS:
        veth_down(ns, host)
    NETS.clear()


def client(i, port, timeout=1.0, v6=False):
    ns, _, server, _ = NETS[i]
    if v6:
        server = f'fd00:231:{i + 1}::1'
    out = sh('ip', 'netns', 'exec', ns, sys.executable, '-c', CLIENT, server,
             str(port), str(timeout), os.path.dirname(os.path.abspath(__file__)))
    return out.stdout.strip()


def xdp_on(host):
    """The name of the XDP program attached to `host`, or None."""
    m = re.search(r'prog/xdp id \d+ name (\S+)', sh('ip', '-d', 'link', 'show',
                                                   host).stdout)
    return m.group(1) if m else None


def ctl(s, *args):
    return subprocess.run([CTL, '-c', s.config, *args], capture_output=True,
                          text=True, timeout=10)


def xdp_stats(s):
    """rlshimctl xdp stats: (counters, {address: dropped})."""
    out = ctl(s, 'xdp', 'stats')
    assert out.returncode == 0, out.stderr
    counters, drops = {}, {}
    for line in out.stdout.splitlines()[1:]:
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            counters[f[0]] = int(f[1])
        elif len(f) >= 3 and '/' in f[0]:
            drops[f[0]] = int(f[1])
    return counters, drops


def xdp_json_says(s, counters, drops):
    """`xdp stats --json` parses and says what the plain output says
    (nothing is sent meanwhile, so the counters stand still)."""
    out = ctl(s, 'xdp', 'stats', '--json')
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    plain = ctl(s, 'xdp', 'stats').stdout.splitlines()[0]
    assert plain.startswith('xdp: attached, ') and j['attached'] is True, (plain, j)
    assert f"mode {j['mode']}, maps {j['maps']}" in plain, (plain, j)
    assert {k: j[k] for k in counters} == counters, (j, counters)
    assert {b['address']: b['dropped'] for b in j['bans']} == drops, (j, drops)
    for b in j['bans']:
        assert b['prefix'] == int(b['address'].split('/')[1]), b
        assert 0 < b['expires_in_ms'] <= 600000, b


def xdp_drops(s):
    """The {address: dropped} of xdp stats, or None while the agent has
    not loaded the dropper yet (it does so after it starts)."""
    out = ctl(s, 'xdp', 'stats')
    if out.returncode != 0 and 'not running' in out.stderr:
        return None
    return xdp_stats(s)[1]


def agent_pid(s):
    out = sh('pgrep', '-f', f'rlshimd -c {s.config}', check=False).stdout.split()
    return int(out[0]) if out else None


def stop_agent(s, sig=signal.SIGTERM):
    pid = agent_pid(s)
    if pid:
        os.kill(pid, sig)
        wait_for(lambda: agent_pid(s) is None, 5)


def pin_dir(s, layout='2'):
    """Where the agent pins the maps of `layout` ('1': in <shm>/ itself)."""
    base = f'/sys/fs/bpf/rlshim/{s.shm}'
    return base if layout == '1' else f'{base}/{layout}'


def server(extra='', glob='', mode='generic'):
    hosts = ' '.join(h for _, h, _, _ in NETS)
    return F.Legacy(f'{glob}[xdp]\ninterfaces = {hosts}\nmode = {mode}\n'
                    f'[limit:all]\nmatch = *\nrate = 100/s\n{extra}')


def banned_in_xdp():
    """A banned client's SYNs die in XDP: no answer at all, not even a
    reset, while the other client is served; the counters say so; unban
    lets it back."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server()
    try:
        # The first accept starts the agent, which attaches.
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5), \
            'the agent did not attach'
        bad = NETS[0][3]
        assert ctl(s, 'ban', bad, '--for', '10m').returncode == 0
        assert wait_for(lambda: f'{bad}/32' in (xdp_drops(s) or {}), 10), \
            'the ban never reached the map'
        before = xdp_stats(s)[0]
        assert client(0, s.port) == 'timeout'
        assert client(1, s.port) == '200'
        counters, drops = xdp_stats(s)
        # A 1 s connect() sends the SYN and at least one retransmission.
        assert drops[f'{bad}/32'] >= 1, drops
        assert counters['dropped'] - before['dropped'] >= 1, (before, counters)
        assert counters['packets'] > before['packets']
        xdp_json_says(s, counters, drops)
        # Nothing reached accept: the shim refused no connection for it.
        row = [ln.split() for ln in ctl(s, 'bans').stdout.splitlines()
               if ln.startswith(f'{bad}/32')]
        assert row and row[0][4] == '0', row
        # A /24 covers it too; lifting the /32 alone is not enough.
        assert ctl(s, 'ban', '10.231.1.0/24').returncode == 0
        assert ctl(s, 'unban', bad).returncode == 0
        assert wait_for(lambda: list(xdp_drops(s) or {}) == ['10.231.1.0/24'], 10)
        assert client(0, s.port) == 'timeout'
        assert ctl(s, 'unban', '10.231.1.0/24').returncode == 0
        assert wait_for(lambda: not xdp_stats(s)[1], 3)
        assert client(0, s.port, timeout=3.0) == '200'
        # The application saw the three allowed requests only.
        assert len([e for e in s.log() if e['target'] == '/books']) == 3
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def dry_run_passes_xdp():
    """In mode = dry-run the dropper is attached but drops nothing: a
    banned client's packets go through to the shim, which serves it and
    counts the refusal it would have made."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server(glob='mode = dry-run\n')
    try:
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5), \
            'the agent did not attach'
        assert wait_for(lambda: xdp_drops(s) is not None, 5)
        bad = NETS[0][3]
        assert ctl(s, 'ban', bad, '--for', '10m').returncode == 0
        before = xdp_stats(s)[0]
        time.sleep(1.0)  # twenty agent rounds: in enforce mode, in the map
        assert xdp_stats(s)[1] == {}, 'a ban reached the map in dry-run'
        assert client(0, s.port) == '200'
        counters, drops = xdp_stats(s)
        assert drops == {} and counters['dropped'] == before['dropped'], \
            (before, counters, drops)
        assert counters['packets'] > before['packets']
        # It reached accept: the shim counted the refusal it did not make.
        row = [ln.split() for ln in ctl(s, 'bans').stdout.splitlines()
               if ln.startswith(f'{bad}/32')]
        assert row and row[0][4] == '1', row
        assert 'dry-run: would refuse' in s.server.stderr_text()
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def maxretry_reaches_xdp():
    """A client that earns a ban through maxretry is then dropped in XDP."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server('maxretry = 3\nbantime = 1h\n'
               '[limit:tight]\nmatch = * /books\nrate = 1/m\n'
               'maxretry = 3\nbantime = 1h\n')
    try:
        assert client(0, s.port) == '200'
        seen = [client(0, s.port) for _ in range(3)]
        assert seen == ['429'] * 3, seen
        bad = NETS[0][3]
        assert wait_for(lambda: f'{bad}/32' in (xdp_drops(s) or {}), 10)
        assert client(0, s.port) == 'timeout'
        assert xdp_stats(s)[1][f'{bad}/32'] >= 1
        assert client(1, s.port) == '200'
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def nothing_left_behind():
    """SIGTERM detaches and removes the pins; so does SIGKILL (the links
    die with the process), and the next agent attaches again."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server()
    hosts = [h for _, h, _, _ in NETS]
    pins = pin_dir(s, '1')
    try:
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) for h in hosts), 5)
        for name in ('rl_bans_v4', 'rl_pfx_v4', 'rl_dir_v6', 'rl_tries'):
            assert os.path.exists(f'{pin_dir(s)}/{name}'), name
        stop_agent(s, signal.SIGTERM)
        assert [xdp_on(h) for h in hosts] == [None, None]
        assert not os.path.exists(pins)
        # An accept once the old heartbeat is stale (1 s) and the last
        # start is 5 s old starts another agent.
        assert wait_for(lambda: client(1, s.port) == '200' and
                        all(xdp_on(h) for h in hosts), 10, 0.5)
        stop_agent(s, signal.SIGKILL)
        assert wait_for(lambda: [xdp_on(h) for h in hosts] == [None, None], 3), \
            'a killed agent left its program attached'
        # ... and rlshimctl does not say attached once the agent is dead
        # (its flag stays in the segment; no accept starts another here).
        assert wait_for(lambda: re.search(r'^xdp: .*, not attached,',
                                          ctl(s, 'status').stdout, re.M)
                        and json.loads(ctl(s, 'status', '--json').stdout)
                        ['xdp']['attached'] is False, 3), ctl(s, 'status').stdout
        assert 'rlshim_xdp_attached 0' in ctl(s, 'metrics').stdout
        # ... and the one after it cleans the stale pins and attaches.
        assert wait_for(lambda: client(1, s.port) == '200' and
                        all(xdp_on(h) for h in hosts), 10, 0.5)
        assert ctl(s, 'xdp', 'stats').returncode == 0
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def unprivileged_says_so():
    """An agent without CAP_BPF/CAP_NET_ADMIN says so once and goes on."""
    require_root('dropping privileges')
    d = tempfile.mkdtemp(prefix='rlshim-xdp-')
    shm = f'rlshim-xdpnp-{os.getpid()}'
    conf = os.path.join(d, 'rlshim.conf')
    log = os.path.join(d, 'agent.log')
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = {shm}\n[xdp]\ninterfaces = lo\n'
                '[limit:all]\nmatch = *\nrate = 1/s\n')
    os.chmod(d, 0o755)
    os.chmod(conf, 0o644)
    p = subprocess.Popen(['setpriv', '--reuid=65534', '--regid=65534',
                          '--clear-groups', '--inh-caps=-all', AGENT, '-c', conf,
                          '--foreground'], stderr=open(log, 'w'))
    try:
        assert wait_for(lambda: 'agent started' in open(log).read(), 5), open(log).read()
        time.sleep(0.3)
        text = open(log).read()
        assert text.count('lacks CAP_BPF and CAP_NET_ADMIN') == 1, text
        assert 'xdp=off' in text, text
        assert p.poll() is None, 'the agent gave up'
        assert xdp_on('lo') is None
    finally:
        p.terminate()
        p.wait(5)
        try:
            os.unlink(f'/dev/shm/{shm}')
        except FileNotFoundError:
            pass
        shutil.rmtree(d, ignore_errors=True)


def banned_in_xdp_v6():
    """The same over IPv6: a ban of the client's /64 (the default
    ipv6_prefix) drops its SYNs; the other namespace's /64 is served."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server()
    try:
        assert client(0, s.port, v6=True) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5)
        assert ctl(s, 'ban', 'fd00:231:1::/64').returncode == 0
        assert wait_for(lambda: 'fd00:231:1::/64' in (xdp_drops(s) or {}), 10)
        assert client(0, s.port, v6=True) == 'timeout'
        assert client(1, s.port, v6=True) == '200'
        assert client(0, s.port) == '200', 'IPv4 of the same client is not banned'
        assert xdp_stats(s)[1]['fd00:231:1::/64'] >= 1
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def try_client(i, port, v6):
    """client(), or None when the client could not even try (EHOSTUNREACH
    while the neighbour entry is still failed)."""
    try:
        return client(i, port, v6=v6)
    except subprocess.CalledProcessError:
        return None


def gone_from_xdp(s, ban):
    drops = xdp_drops(s)
    return drops is not None and ban not in drops


def prefix_lengths_in_xdp():
    """Prefixes of two lengths over one client, IPv4 and IPv6: it is
    dropped and the longest counts it, the other client is served; lifting
    the longest hands the drops to the shorter; lifting both lets it in."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server()
    try:
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5)
        # 10.231.1.2 is in both; 10.231.2.2 in neither. The same with
        # fd00:231:1::2 in a /48 and a /120, fd00:231:2::2 outside.
        pairs = [(('10.231.1.0/28', '10.231.0.0/23'), False),
                 (('fd00:231:1::/120', 'fd00:231:1::/48'), True)]
        for (narrow, wide), v6 in pairs:
            for p in (wide, narrow):
                assert ctl(s, 'ban', p, '--for', '10m').returncode == 0
            assert wait_for(lambda: {narrow, wide} <= set(xdp_drops(s) or {}), 10), \
                xdp_drops(s)
            assert client(0, s.port, v6=v6) == 'timeout'
            assert client(1, s.port, v6=v6) == '200'
            drops = xdp_stats(s)[1]
            assert drops[narrow] >= 1 and drops[wide] == 0, drops
            assert ctl(s, 'unban', narrow).returncode == 0
            assert wait_for(lambda: gone_from_xdp(s, narrow), 10)
            assert client(0, s.port, v6=v6) == 'timeout'
            assert xdp_stats(s)[1][wide] >= 1
            assert ctl(s, 'unban', wide).returncode == 0
            assert wait_for(lambda: gone_from_xdp(s, wide), 10)
            # Its neighbour discovery was dropped with the rest: over
            # IPv6 the first connects can fail until it resolves again.
            assert wait_for(lambda: try_client(0, s.port, v6) == '200', 10, 0.5)
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def old_layout_pins():
    """A killed agent of layout 1 left its maps in <shm>/: the next agent
    removes them and pins its own in <shm>/2/; with only such maps there,
    rlshimctl says they are of another layout rather than reading them."""
    require_root('XDP in a network namespace')
    if not shutil.which('bpftool'):
        raise AssertionError('bpftool is needed (tools/deps.sh installs it)')
    nets_up()
    s = server()
    old = pin_dir(s, '1')

    def pin_old():
        os.makedirs(old, exist_ok=True)
        for name, value in (('rl_stats', 64), ('rl_tries', 8)):
            sh('bpftool', 'map', 'create', f'{old}/{name}', 'type', 'array',
               'key', '4', 'value', str(value), 'entries', '1', 'name', name)
    try:
        pin_old()
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5)
        assert wait_for(lambda: ctl(s, 'xdp', 'stats').returncode == 0, 5)
        assert not os.path.exists(f'{old}/rl_stats')
        assert not os.path.exists(f'{old}/rl_tries')
        assert os.path.exists(f'{pin_dir(s)}/rl_stats')
        stop_agent(s)
        assert not os.path.exists(old)
        pin_old()
        out = ctl(s, 'xdp', 'stats')
        assert out.returncode == 1 and 'another layout' in out.stderr, out
    finally:
        s.stop()
        stop_agent(s)
        nets_down()
        for name in ('rl_stats', 'rl_tries'):
            try:
                os.unlink(f'{old}/{name}')
            except OSError:
                pass


def logged_modes(s):
    """{interface: mode} of the agent's `xdp attached` lines, from the log
    the server's start line names."""
    m = re.search(r'msg="started rlshimd" path=\S+ log=(\S+)', s.server.stderr_text())
    assert m and m.group(1) != 'syslog', s.server.stderr_text()
    with open(m.group(1)) as f:
        return dict(re.findall(r'msg="xdp attached" interface=(\S+) mode=(\w+)',
                               f.read()))


def in_namespace(i, s, *args):
    """rlshimctl run as `ip netns exec` runs it: in client namespace i, whose
    /sys is a mount of its own, without the bpffs and so without the pins."""
    return sh('ip', 'netns', 'exec', NETS[i][0], CTL, '-c', s.config, *args,
              check=False)


def stats_in_namespace():
    """From another mount namespace (`ip netns exec`), where the pins are
    not visible, xdp stats and status read the maps by the ids the agent
    recorded: the drops counted match the host's view. Both say the mode
    the agent attached with, which it logged (veth takes native), with the
    configured `auto` beside it."""
    require_root('XDP in a network namespace')
    nets_up()
    s = server(mode='auto')
    hosts = [h for _, h, _, _ in NETS]
    try:
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for h in hosts), 5)
        assert wait_for(lambda: len(logged_modes(s)) == 2, 5)
        modes = logged_modes(s)
        got = modes[hosts[0]]
        assert set(modes) == set(hosts) and set(modes.values()) == {got} and \
            got in ('native', 'generic'), modes
        # The kernel's word for it: `ip link` says xdp (native), xdpgeneric.
        kernel = {'xdp': 'native', 'xdpgeneric': 'generic', 'xdpoffload': 'offload'}
        for h in hosts:
            m = re.search(r' mtu \d+ (xdp\w*) ', sh('ip', 'link', 'show', h).stdout)
            assert m and kernel.get(m.group(1)) == got, (h, m and m.group(1), got)
        shown = f'{got} (configured auto)'
        bad = NETS[0][3]
        assert ctl(s, 'ban', bad, '--for', '10m').returncode == 0
        assert wait_for(lambda: f'{bad}/32' in (xdp_drops(s) or {}), 10)
        assert client(0, s.port) == 'timeout'
        counters, drops = xdp_stats(s)
        assert drops[f'{bad}/32'] >= 1, drops
        assert os.path.exists(pin_dir(s))
        assert in_namespace(1, s, 'status').returncode == 0
        assert sh('ip', 'netns', 'exec', NETS[1][0], 'ls', pin_dir(s),
                  check=False).returncode != 0, 'the pins are visible there'

        out = in_namespace(1, s, 'xdp', 'stats')
        assert out.returncode == 0 and out.stderr == '', (out.returncode, out.stderr)
        lines = out.stdout.splitlines()
        assert re.fullmatch(rf'xdp: attached, mode {re.escape(shown)}, maps by id '
                            r'\d+(,\d+){5}', lines[0]), lines[0]
        there = {f[0]: int(f[1]) for f in (ln.split() for ln in lines[1:])
                 if len(f) >= 3 and '/' in f[0]}
        assert there == drops, (there, drops)
        assert int(re.search(r'^dropped\s+(\d+)$', out.stdout, re.M).group(1)) == \
            counters['dropped'], (out.stdout, counters)
        out = in_namespace(1, s, 'xdp', 'stats', '--json')
        assert out.returncode == 0, out.stderr
        j = json.loads(out.stdout)
        assert j['attached'] and j['mode'] == got and \
            j['configured_mode'] == 'auto' and j['maps'].startswith('by id '), j
        assert [(a['interface'], a['mode']) for a in j['attached_to']] == \
            [(h, got) for h in hosts], j['attached_to']
        assert {b['address']: b['dropped'] for b in j['bans']} == drops, (j, drops)
        assert j['dropped'] == counters['dropped'], (j, counters)

        # The host's own view says the same mode.
        j = json.loads(ctl(s, 'xdp', 'stats', '--json').stdout)
        assert j['mode'] == got and j['configured_mode'] == 'auto' and \
            j['maps'] == pin_dir(s), j
        assert ctl(s, 'xdp', 'stats').stdout.startswith(
            f'xdp: attached, mode {shown}, maps {pin_dir(s)}\n')
        # status, there and here: the totals, and the mode attached.
        for st in (json.loads(in_namespace(1, s, 'status', '--json').stdout),
                   json.loads(ctl(s, 'status', '--json').stdout)):
            x = st['xdp']
            assert x['attached'] and x['mode'] == got and \
                x['configured_mode'] == 'auto', x
            assert x['dropped'] == counters['dropped'] and x['packets'] > 0, x
        text = in_namespace(1, s, 'status').stdout
        assert re.search(rf'^xdp:\s+{" ".join(hosts)} \({got}, configured auto\), '
                         rf'attached, \d+ packets, {counters["dropped"]} dropped$',
                         text, re.M), text
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


def allow_not_dropped_in_xdp():
    """The allow list is never banned, in XDP either: a forced ban over an
    allowed client's /24 stays out of the maps (the shim, which checks the
    allow list first, enforces it at accept for everybody else there), so
    that client is served; a ban of the other client is dropped in XDP as
    usual. The agent says what it kept out."""
    require_root('XDP in a network namespace')
    nets_up()
    good, bad = NETS[0][3], NETS[1][3]
    s = server(glob=f'allow = {good}\n')
    try:
        assert client(0, s.port) == '200'
        assert wait_for(lambda: all(xdp_on(h) == 'rl_xdp' for _, h, _, _ in NETS), 5), \
            'the agent did not attach'
        net = good.rsplit('.', 1)[0] + '.0/24'
        out = ctl(s, 'ban', net, '--for', '10m')
        assert out.returncode == 1 and 'allow list' in out.stderr, out
        assert ctl(s, 'ban', net, '--for', '10m', '--force').returncode == 0
        assert ctl(s, 'ban', bad, '--for', '10m').returncode == 0
        assert wait_for(lambda: f'{bad}/32' in (xdp_drops(s) or {}), 10), \
            'the ban never reached the map'
        assert net not in xdp_drops(s), xdp_drops(s)
        assert client(0, s.port) == '200'
        assert client(1, s.port) == 'timeout'
        assert wait_for(lambda: 'xdp: bans covering the allow list are left '
                        'to the shim" bans=1' in open(servers.agent_log(s.shm)).read(), 5)
    finally:
        s.stop()
        stop_agent(s)
        nets_down()


TESTS = [banned_in_xdp, banned_in_xdp_v6, dry_run_passes_xdp, maxretry_reaches_xdp,
         allow_not_dropped_in_xdp, prefix_lengths_in_xdp,
         old_layout_pins, nothing_left_behind, unprivileged_says_so, stats_in_namespace]


def main():
    try:
        want = sys.argv[1:]
        return run('xdp', [(f'xdp: {t.__name__}', t) for t in TESTS
                           if not want or t.__name__ in want])
    finally:
        nets_down()
        shutil.rmtree(F.TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
