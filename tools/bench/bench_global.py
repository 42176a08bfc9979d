#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_global.py - one limit across four hosts, in the same run: rlshim's
async sync through Redis, `sync = strict` (each admission decided in
Redis), and the naive design (each host enforces the full limit alone).

Four legacy_server "hosts" under the shim, each with its own segment (as
four machines would have) and, for async and strict, the agent its shim
starts; one real redis-server on a free port. One fleet carries the async
and the strict rules side by side (each case its own rule and path, so no
case inherits another's keys); the naive fleet the same rules without
[redis]. Admitted = what the application answered (legacy_server: 404 or
405), refused = the shim's 429. key = ip: the one client address.

  high rate   5,000/s, burst 10: wrk (one thread, one connection per
              host it loads) for SECONDS, spread evenly over the 4 hosts,
              all on one host, or on host 1 for the first half and the
              other three for the second. Ideal: rate x SECONDS + burst.
  low rate    10/m, burst 10: 40 requests in turn over the 4 hosts, one
              client as fast as it goes (TRIALS times, a rule each), and a
              sustained overload over SUSTAIN seconds (two client threads
              per design, the three designs at once, spread evenly).
              Ideal: burst, and rate x SUSTAIN + burst.
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'integration'))
import test_redis as T  # noqa: E402

HIGH_RATE, BURST = 5000, 10
DESIGNS = (('async', 'rlshim async (agents + Redis)'),
           ('strict', 'rlshim `sync = strict`'),
           ('naive', 'naive (each host alone)'))
SHAPES = ('even', 'one host', 'shifting')

# wrk's statuses, summed over its threads
LUA_STATUS = r'''
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0 limited = 0 end
function response(status, headers, body)
  if status == 429 then limited = limited + 1 else ok = ok + 1 end
end
done = function(summary, latency, requests)
  local o, l = 0, 0
  for _, t in ipairs(threads) do o = o + t:get("ok") l = l + t:get("limited") end
  local e = summary.errors
  io.write(string.format("RESULT ok=%d limited=%d errors=%d\n", o, l,
    e.connect + e.read + e.write + e.timeout))
end
'''


def rule(name, rate, design):
    strict = 'sync = strict\n' if design == 'strict' else ''
    return (f'[limit:{name}]\nmatch = * /{name}\nrate = {rate}\n'
            f'burst = {BURST}\nkey = ip\n{strict}')


def rules_for(design, trials):
    p = design[0]
    out = [rule(f'{p}_hi{i}', f'{HIGH_RATE}/s', design) for i in range(len(SHAPES))]
    out += [rule(f'{p}_rr{i}', '10/m', design) for i in range(trials)]
    out.append(rule(f'{p}_sus', '10/m', design))
    return ''.join(out)


def wrk_phase(hosts, path, seconds, lua):
    """One wrk per host, at once, for `seconds`: (admitted, refused)."""
    ps = [subprocess.Popen(['wrk', '-t1', '-c1', f'-d{seconds}s', '-s', lua,
                            f'http://127.0.0.1:{h.port}{path}'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
          for h in hosts]
    ok = refused = 0
    for p in ps:
        out = p.communicate()[0]
        m = re.search(r'RESULT ok=(\d+) limited=(\d+) errors=(\d+)', out)
        if p.returncode or not m:
            raise RuntimeError(f'wrk failed: {out}')
        if int(m.group(3)):
            print(f'note: wrk counted {m.group(3)} socket errors on {path}',
                  file=sys.stderr)
        ok += int(m.group(1))
        refused += int(m.group(2))
    return ok, refused


def high_rate(hosts, p, seconds, lua):
    """The three shapes at 5,000/s: {shape: (admitted, refused, wall s)}."""
    res = {}
    half = max(1, seconds // 2)
    for i, shape in enumerate(SHAPES):
        path = f'/{p}_hi{i}'
        t0 = time.monotonic()
        if shape == 'even':
            ok, no = wrk_phase(hosts, path, seconds, lua)
        elif shape == 'one host':
            ok, no = wrk_phase(hosts[:1], path, seconds, lua)
        else:
            ok, no = wrk_phase(hosts[:1], path, half, lua)
            ok2, no2 = wrk_phase(hosts[1:], path, seconds - half, lua)
            ok, no = ok + ok2, no + no2
        res[shape] = (ok, no, time.monotonic() - t0)
    return res


def calls(r, cmd):
    m = re.search(rf'cmdstat_{cmd}:calls=(\d+)', r.cli('INFO', 'commandstats'))
    return int(m.group(1)) if m else 0


def passed(h, path):
    r = h.get(path)
    if r is None:
        raise RuntimeError(f'no answer on {path}')
    return r.status != 429


def round_robin(hosts, p, trials):
    """40 requests in turn over the hosts, per trial: the admitted counts."""
    return [sum(passed(hosts[i % 4], f'/{p}_rr{t}') for i in range(40))
            for t in range(trials)]


def sustained(fleets, seconds):
    """The three designs' sustained low-rate overloads at once:
    {design: (admitted, refused)}."""
    res = {}

    def run(design, hosts):
        path = f'/{design[0]}_sus'
        turn = itertools.count()
        res[design] = T.overload(hosts, path, seconds,
                                 lambda t, i: hosts[next(turn) % 4], threads=2)
    ts = [threading.Thread(target=run, args=(d, hs)) for d, hs in fleets.items()]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


def row(load, design, offered, ok, ideal):
    over = ok - ideal
    name = dict(DESIGNS)[design]
    print(f'| {load} | {name} | {offered} | {ok:,} | {ideal:,} | {over:+,} '
          f'| {100 * over / ideal:+.1f}% |', flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=int, default=10)
    ap.add_argument('--sustain', type=int, default=60)
    ap.add_argument('--trials', type=int, default=5)
    a = ap.parse_args()

    lua = os.path.join(tempfile.mkdtemp(prefix='bench-global-'), 'status.lua')
    with open(lua, 'w') as f:
        f.write(LUA_STATUS)
    print('## One limit across four hosts (tools/bench/bench_global.py)\n')
    print(f'Command: `python3 tools/bench/bench_global.py --seconds {a.seconds} '
          f'--sustain {a.sustain} --trials {a.trials}`. Run of '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, {os.cpu_count()} '
          'CPUs shared by the clients, the 4 hosts, their agents and Redis. '
          f'Four legacy_server hosts, each its own segment; key = ip; '
          f'burst {BURST}. Admitted: answered by the application; '
          'overshoot: admitted - ideal.\n')
    r = T.Redis()
    url = f'redis://127.0.0.1:{r.port}/0'
    synced = naive = []
    try:
        synced = [T.Host(url, rules_for('async', a.trials) + rules_for('strict', a.trials),
                         f'sync{i}') for i in range(4)]
        naive = [T.Host(None, rules_for('naive', a.trials), f'naive{i}')
                 for i in range(4)]
        T.started(synced)
        T.hosts_up(synced)
        fleets = {'async': synced, 'strict': synced, 'naive': naive}

        print(f'### {HIGH_RATE:,}/s, burst {BURST}, {a.seconds} s of overload\n')
        print('Clients: wrk -t1 -c1 per loaded host (the shim closes a '
              'connection it answers 429, so wrk reconnects). Offered: what '
              'they achieved.\n')
        print('| load | design | offered | admitted | ideal | overshoot | % |')
        print('|---|---|---:|---:|---:|---:|---:|')
        asked = {}
        for design, _ in DESIGNS:
            h0 = calls(r, 'hget'), calls(r, 'hset')
            for shape, (ok, no, wall) in high_rate(fleets[design], design[0],
                                                   a.seconds, lua).items():
                row(shape, design, f'{(ok + no) / wall:,.0f} req/s', ok,
                    round(HIGH_RATE * wall) + BURST)
            asked[design] = calls(r, 'hget') - h0[0], calls(r, 'hset') - h0[1]
        print(f'\nIdeal: rate x the wall time of the shape\'s wrk runs '
              f'(a little over {a.seconds} s: their start and exit) + burst. '
              f'Strict, all three shapes: {asked["strict"][0]:,} requests '
              f'decided in Redis, {asked["strict"][1]:,} of them admitted '
              '(the strict script\'s HGET and HSET calls; the async rules\' '
              'keys are repaid within 2 ms, so their rounds write nothing '
              'meanwhile).\n')

        print(f'### 10/m, burst {BURST}\n')
        print(f'40 requests in turn over the 4 hosts, one client, each on a new '
              f'connection, as fast as it goes ('
              f'{a.trials} trials, a fresh rule each: the worst shown, all in '
              f'brackets); and {a.sustain} s of overload by two client threads '
              'per design, the three at once, spread evenly. Ideal: burst, and '
              f'10/m x {a.sustain} s + burst.\n')
        print('| load | design | offered | admitted | ideal | overshoot | % |')
        print('|---|---|---:|---:|---:|---:|---:|')
        for design, _ in DESIGNS:
            t0 = time.monotonic()
            ns = round_robin(fleets[design], design[0], a.trials)
            ms = 1000 * (time.monotonic() - t0) / a.trials
            row('40 in turn', design, f'40 in {ms:.0f} ms ({", ".join(map(str, ns))})',
                max(ns), BURST)
        sus = sustained(fleets, a.sustain)
        ideal = round(10 * a.sustain / 60) + BURST
        for design, _ in DESIGNS:
            ok, no = sus[design]
            row(f'{a.sustain} s overload', design,
                f'{(ok + no) / a.sustain:,.0f} req/s', ok, ideal)
        print()
    finally:
        for h in synced + naive:
            h.stop()
        r.stop()


if __name__ == '__main__':
    main()
