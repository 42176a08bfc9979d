#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_windows.py - fixed and sliding windows as one limit across four
hosts: how many requests each 1 s window admits under overload.

Four legacy_server "hosts" under the shim, each with its own segment and the
agent its shim starts, syncing through a real redis-server every 50 ms; a
rule of 50/s, key = ip; 8 clients overload the hosts for 10 s, spread over
the four or all on one. Per window: the count the store holds for the key
at the window's end (what all hosts admitted in it, as the agents pushed
it), first and last window (partial) left out. The bound is count + N - 1
= 53 (sliding: the estimate over these counts).
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'integration'))
import test_redis as T  # noqa: E402

SECONDS = 10


def rules(algorithm):
    return f'[limit:w]\nmatch = * /w\nrate = 50/s\nalgorithm = {algorithm}\nkey = ip\n'


def run(algorithm, shape):
    with T.fleet(rules(algorithm), 4, 'bw') as (r, hosts):
        T.hosts_up(hosts)
        store = {}
        t0 = time.monotonic()

        def poll():
            while time.monotonic() - t0 < SECONDS + 1:
                v = r.cli('HGET', 'rlshim:{w}:win', '127.0.0.1')
                if v:
                    idx, cur = map(int, v.split(':')[:2])
                    store[idx] = max(store.get(idx, 0), cur)
                time.sleep(0.05)
        p = threading.Thread(target=poll)
        p.start()
        pick = (lambda t, i: hosts[i % 4]) if shape == 'even' else (lambda t, i: hosts[0])
        ok, denied = T.overload(hosts, '/w', SECONDS, pick, threads=8)
        p.join()
        counts = [v for k, v in sorted(store.items())][1:-1]
        print(f'| {algorithm} | {shape} | {(ok + denied) / SECONDS:,.0f} req/s | {ok} '
              f'| {min(counts)}-{max(counts)} | {" ".join(map(str, counts))} |', flush=True)


def main():
    print('| rule | load | offered | admitted in 10 s | per window | windows |')
    print('|---|---|---:|---:|---:|---|')
    try:
        for algorithm in ('fixed-window', 'sliding-window'):
            for shape in ('even', 'one host'):
                run(algorithm, shape)
    finally:
        T.shutil.rmtree(T.TMP, ignore_errors=True)


if __name__ == '__main__':
    main()
