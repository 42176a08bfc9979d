#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_global.py - one limit across four hosts: rlshim's sync through
Redis against the naive design (each host enforces the full limit on its
own), in the same run, for three load shapes.

Four legacy_server "hosts" under the shim, each with its own segment (as
four machines would have) and, for rlshim, the agent its shim starts; a
real redis-server on a free port. A rule of 50/s, burst 10; clients
overload the hosts for 10 s; admitted = what the application answered.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'integration'))
import test_redis as T  # noqa: E402

RATE, BURST, SECONDS = T.RATE, T.BURST, T.SECONDS


def hosts_for(design, r):
    url = f'redis://127.0.0.1:{r.port}/0' if design == 'rlshim' else None
    return [T.Host(url, T.ACC_RULES, f'{design}{i}') for i in range(4)]


def main():
    print('## One limit across four hosts (tools/bench/bench_global.py)\n')
    print(f'Command: `python3 tools/bench/bench_global.py`. Run of '
          f'{time.strftime("%Y-%m-%d")}. Four legacy_server hosts, each its own '
          f'segment; rule {RATE}/s, burst {BURST}; clients overload them for '
          f'{SECONDS} s. Ideal: rate x time + burst = {RATE * SECONDS + BURST}.\n')
    print('| load | design | offered | admitted | vs ideal |')
    print('|---|---|---:|---:|---:|')
    r = T.Redis()
    try:
        for design in ('rlshim', 'naive'):
            hosts = hosts_for(design, r)
            try:
                if design == 'rlshim':
                    T.started(hosts)
                picks = {
                    'even': lambda t, i: hosts[i % 4],
                    'one host': lambda t, i: hosts[0],
                    'shifting': lambda t, i: hosts[0] if t < SECONDS / 2
                    else hosts[1 + i % 3],
                }
                for shape, path in (('even', '/even'), ('one host', '/one'),
                                    ('shifting', '/shift')):
                    ok, denied = T.overload(hosts, path, SECONDS, picks[shape])
                    ideal = RATE * SECONDS + BURST
                    name = ('rlshim (agents + Redis)' if design == 'rlshim'
                            else 'naive (each host alone)')
                    print(f'| {shape} | {name} | {(ok + denied) / SECONDS:,.0f} req/s '
                          f'| {ok} | {100 * (ok - ideal) / ideal:+.1f}% |', flush=True)
            finally:
                for h in hosts:
                    h.stop()
    finally:
        r.stop()
    print()


if __name__ == '__main__':
    main()
