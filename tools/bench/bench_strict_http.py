#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_strict_http.py - what `sync = strict` costs an event-loop server:
nginx (worker_processes 1) throughput with wrk, in the same run, as

  (a) nginx alone;
  (b) under the shim, a rule that never limits, async, with [redis] (the
      agent syncing through a real redis-server every 50 ms);
  (c) the same rule with `sync = strict`: every request the rule admits
      is decided in Redis through the agent, and the worker waits for it.

    python3 tools/bench/bench_strict_http.py [--duration 5] [--reps 3]

wrk -t1 -c32 -d DURATION against a small static file, keep-alive; variants
interleaved a,b,c,a,b,c,...; a fresh nginx (and segment, and agent) per
run; medians. For (c), Redis decisions per request: the strict script's
HGET calls (one per call) over wrk's requests.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'integration'))
import bench_http as H  # noqa: E402
import test_redis as T  # noqa: E402

RULE = '[limit:all]\nmatch = *\nrate = 100000000/s\nkey = ip\n'


def hget_calls(r):
    m = re.search(r'cmdstat_hget:calls=(\d+)', r.cli('INFO', 'commandstats'))
    return int(m.group(1)) if m else 0


def agent_pids(config):
    out = subprocess.run(['pgrep', '-f', f'rlshimd -c {config}'],
                         capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def stop_agent(config):
    for pid in agent_pids(config):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    T.wait_for(lambda: not agent_pids(config), 5)


def one_run(root, lua, duration, r, variant):
    redis = f'[redis]\nurl = redis://127.0.0.1:{r.port}/0\nsync_interval = 50ms\n'
    rule = {'a': None, 'b': redis + RULE, 'c': redis + RULE + 'sync = strict\n'}[variant]
    srv = H.Nginx(root, 1, shim_rule=rule)
    try:
        srv.start()
        srv.check_shim()
        if rule:
            # the first request starts the agent; wait until it syncs
            T.exchange(srv.port, b'GET /index.html HTTP/1.0\r\n\r\n')
            assert T.wait_for(lambda: 'store connected' in open_log(srv), 10), \
                open_log(srv)
        h0 = hget_calls(r)
        res = H.wrk(['-t1', '-c32', f'-d{duration}s'], lua,
                    f'http://127.0.0.1:{srv.port}/index.html', srv)
        res['asked'] = hget_calls(r) - h0
    finally:
        srv.stop()
        if srv.config:
            stop_agent(srv.config)
            try:
                os.unlink(T.servers.agent_log(srv.shm))
            except FileNotFoundError:
                pass
    res['rps'] = res['requests'] / (res['duration_us'] / 1e6)
    res['bad'] = (res['status_errors'] + res['connect_errors'] + res['read_errors']
                  + res['write_errors'] + res['timeouts'])
    return res


def open_log(srv):
    try:
        with open(T.servers.agent_log(srv.shm)) as f:
            return f.read()
    except FileNotFoundError:
        return ''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--duration', type=int, default=5)
    ap.add_argument('--reps', type=int, default=3)
    a = ap.parse_args()
    names = {'a': 'nginx alone', 'b': 'nginx + shim, async rule, [redis]',
             'c': 'nginx + shim, `sync = strict` rule'}
    root = tempfile.mkdtemp(prefix='bench-strict-http-')
    lua = Path(root) / 'latency.lua'
    lua.write_text(H.LUA_LATENCY)
    r = T.Redis()
    runs = {k: [] for k in names}
    try:
        for rep in range(a.reps):
            for k in names:
                res = one_run(root, lua, a.duration, r, k)
                runs[k].append(res)
                H.log(f'  rep {rep + 1}/{a.reps} ({k}) {res["rps"]:,.0f} req/s '
                      f'p50 {res["p50_us"]} µs p99 {res["p99_us"]} µs '
                      f'errors {res["bad"]}')
    finally:
        r.stop()
        H.cleanup_segments()
    med = {k: {f: statistics.median(x[f] for x in v)
               for f in ('rps', 'p50_us', 'p99_us')} for k, v in runs.items()}
    print('## What strict costs an event-loop server (tools/bench/bench_strict_http.py)\n')
    print(f'Command: `python3 tools/bench/bench_strict_http.py --duration {a.duration} '
          f'--reps {a.reps}`. Run of {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{os.cpu_count()} CPUs shared by wrk, nginx, rlshimd and Redis. nginx '
          '`worker_processes 1`, a 210-byte static file; `wrk -t1 -c32 '
          f'-d{a.duration}s` (keep-alive); rule `rate = 100000000/s` (never '
          'limits), key = ip; medians of the runs, interleaved a,b,c.\n')
    print('| variant | req/s (median) | runs (req/s) | / (a) | p50 latency | p99 latency | '
          'decided in Redis per request | errors |')
    print('|---|---:|---|---:|---:|---:|---:|---:|')
    for k, name in names.items():
        m = med[k]
        each = ', '.join(H.fmt_int(x['rps']) for x in runs[k])
        asked = sum(x['asked'] for x in runs[k]) / sum(x['requests'] for x in runs[k])
        print(f'| ({k}) {name} | {H.fmt_int(m["rps"])} | {each} | '
              f'{m["rps"] / med["a"]["rps"]:.2f} | {H.fmt_us(m["p50_us"])} | '
              f'{H.fmt_us(m["p99_us"])} | {asked:.3f} | '
              f'{sum(x["bad"] for x in runs[k])} |')
    print()


if __name__ == '__main__':
    main()
