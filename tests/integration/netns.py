# SPDX-License-Identifier: MIT
"""netns.py - a client network namespace behind a veth pair, for what needs
traffic that arrives on an interface from an address of its own: XDP sees
no loopback traffic (test_xdp.py, test_ctl.py) and a flood must come from
somewhere it can be banned (tools/bench/bench_flood.py imports this).

    veth_up('rlx1c', 'rlx1h', 'rlx1p', '10.231.1', 'fd00:231:1')
    ...
    veth_down('rlx1c', 'rlx1h')

Needs root. The host end gets <net>.1/24 (and <net6>::1/64), the end in
the namespace <net>.2/24 (<net6>::2/64); IPv6 addresses without duplicate
address detection, so they are usable at once.
"""
import subprocess


def sh(*args, check=True, timeout=20):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, check=check, timeout=timeout)


def veth_up(ns, host, peer, net, net6=None):
    """Namespace `ns` with the `peer` end of a veth pair whose other end,
    `host`, stays here; what a run killed before veth_down() left of them
    goes first. Returns (host address, client address)."""
    veth_down(ns, host)
    sh('ip', 'netns', 'add', ns)
    sh('ip', 'link', 'add', host, 'type', 'veth', 'peer', 'name', peer)
    sh('ip', 'link', 'set', peer, 'netns', ns)
    sh('ip', 'addr', 'add', f'{net}.1/24', 'dev', host)
    sh('ip', 'link', 'set', host, 'up')
    sh('ip', '-n', ns, 'addr', 'add', f'{net}.2/24', 'dev', peer)
    sh('ip', '-n', ns, 'link', 'set', peer, 'up')
    sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
    if net6:
        sh('ip', 'addr', 'add', f'{net6}::1/64', 'dev', host, 'nodad')
        sh('ip', '-n', ns, 'addr', 'add', f'{net6}::2/64', 'dev', peer,
           'nodad')
    return f'{net}.1', f'{net}.2'


def veth_down(ns, host):
    """Delete the namespace and the pair (deleting one end deletes both);
    what is not there is no error."""
    sh('ip', 'netns', 'del', ns, check=False)
    sh('ip', 'link', 'del', host, check=False)
