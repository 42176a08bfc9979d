#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_answers.py - what framing the answers costs nginx, in one run:
user-space instructions (callgrind) and system calls (strace) per request
of nginx (`worker_processes 1`) serving a 210-byte static page over one
keep-alive connection, as

  (a) nginx alone;
  (b) under the shim, a rule that never limits (headers_on = denied, the
      default);
  (o) (b) with an older build of the shim (--old-shim), e.g. the commit
      before the answer side;
  (c) (b) with `headers_on = all`: the rule's fields inserted into every
      answer's head;
  (d) (b) with `count_status = 401 403` on the rule: every request charged
      when read, its 200 given back when the answer's head goes out.

each with nginx's default `sendfile off` (head and body in one writev) and
with `sendfile on` (the head by writev, the body by sendfile).

    python3 tools/bench/bench_answers.py [--shim build/librlshim.so]
        [--old-shim|--shim-b /tmp/old/build/librlshim.so] [--sendfile off,on]
        [--variants a,b,o,c,d] [--only instructions,syscalls,functions]
        [--top 20] [--keep DIR]

--old-shim: e.g. the base commit built in a scratch tree
(`git worktree add --detach /tmp/old 8c039b5 && make -C /tmp/old -j2`);
make bench passes RL_BENCH_OLD_SHIM. --keep DIR keeps the callgrind
outputs (callgrind.<variant>-<sendfile>.<N>) for callgrind_annotate.

Counts are differences of two runs, N = 2000 and N = 4000 sequential GETs
(each answer read before the next request), so start-up cancels: exact,
unlike times. Before counting, one request checks that the answer carries
RateLimit-Limit exactly in (c). Prints markdown to stdout, progress to
stderr; bench_http.py's Nginx runs every server (own temp dir, port and
segment).
"""
import argparse
import datetime
import os
import platform
import shutil
import socket
import sys
import tempfile
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_http as H  # noqa: E402
import cgout  # noqa: E402

N1, N2 = 2000, 4000
RULE = H.NEVER_LIMITS
FAILURES = RULE + 'count_status = 401 403\n'

# key: (label, Nginx keyword arguments less the shim's path)
VARIANTS = {
    'a': ('nginx alone', {}),
    'b': ('shim, headers_on = denied (default)', {'shim_rule': RULE}),
    'o': ('older shim (--old-shim), the same config as (b)',
          {'shim_rule': RULE}),
    'c': ('shim, headers_on = all', {'shim_rule': RULE,
                                     'shim_global': 'headers_on = all\n'}),
    'd': ('shim, count_status = 401 403', {'shim_rule': FAILURES}),
}


def kwargs(key, sendfile, old):
    kw = dict(VARIANTS[key][1])
    kw['http'] = f'sendfile {sendfile};'
    if key == 'o':
        kw['shim'] = old
    return kw


def check_answer(port, fields):
    """One GET; its head must carry RateLimit-Limit if and only if
    `fields` (the variant is what it says it is)."""
    with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
        s.sendall(H.REQUEST)
        f = s.makefile('rb')
        head = []
        while True:
            line = f.readline()
            if line in (b'\r\n', b''):
                break
            head.append(line)
    if not head or not head[0].startswith(b'HTTP/1.1 200'):
        raise RuntimeError(f'bad answer: {head!r}')
    has = any(h.lower().startswith(b'ratelimit-limit:') for h in head)
    if has != fields:
        what = 'missing' if fields else 'present'
        raise RuntimeError(f'RateLimit-Limit {what}: {b"".join(head)!r}')
    return b''.join(head)


# -- system calls ------------------------------------------------------------

def syscalls(root, kw, fields):
    srv = H.Nginx(root, 1, **kw)
    try:
        srv.start()
        H.keepalive_client(srv.port, 100)
        check_answer(srv.port, fields)
        srv.check_shim()
        (wpid,) = srv.worker_pids()
        c1 = H.strace_count(wpid, srv.work, 'x', srv.port, N1)
        c2 = H.strace_count(wpid, srv.work, 'y', srv.port, N2)
    finally:
        srv.stop()
    return {s: (c2.get(s, 0) - c1.get(s, 0)) / (N2 - N1)
            for s in set(c1) | set(c2)}


# -- instructions ------------------------------------------------------------

KEEP = None


def callgrind(root, kw, n, fields, tag):
    out = Path(tempfile.mkdtemp(prefix='cg-', dir=root))
    cg, vlog = out / 'callgrind.out', out / 'valgrind.log'
    srv = H.Nginx(root, 1, master=False,
                  wrapper=['valgrind', '--tool=callgrind',
                           f'--callgrind-out-file={cg}',
                           f'--log-file={vlog}'], **kw)
    try:
        srv.start(timeout=60)
        check_answer(srv.port, fields)
        H.keepalive_client(srv.port, n)
        srv.check_shim()
    finally:
        srv.stop(timeout=60)
    if 'Collected' not in vlog.read_text(errors='replace'):
        raise RuntimeError('callgrind wrote no totals:\n'
                           + vlog.read_text(errors='replace')[-2000:])
    if KEEP:
        shutil.copyfile(cg, Path(KEEP) / f'callgrind.{tag}.{n}')
    # Every cost line, its sum checked against callgrind's totals: (not
    # callgrind_annotate's list, which drops the object of inlined code).
    return cgout.read(cg)


def instructions(root, kw, fields, tag):
    c1 = callgrind(root, kw, N1, fields, tag)
    c2 = callgrind(root, kw, N2, fields, tag)
    return cgout.difference(c1, c2, N2 - N1)


def by_object(fns):
    return cgout.by_object(fns)


# -- tables ----------------------------------------------------------------

def ratio(x, y):
    return f'{x / y:.3f}' if y else '-'


def summary(keys, ins, sys_, sendfile):
    out = [f'`sendfile {sendfile}`:', '',
           '| variant | instructions per request | of which librlshim.so | '
           '/ (a) | / (b) | system calls per request | / (a) | / (b) |',
           '|---|---:|---:|---:|---:|---:|---:|---:|']
    ti = {k: sum(ins[k].values()) for k in ins}
    ts = {k: sum(sys_[k].values()) for k in sys_}
    for k in keys:
        i = f'{ti[k]:,.0f}' if k in ti else '-'
        shim = (f'{by_object(ins[k]).get("librlshim.so", 0):,.0f}'
                if k in ins else '-')
        ia = ratio(ti[k], ti['a']) if k in ti and 'a' in ti else '-'
        ib = ratio(ti[k], ti['b']) if k in ti and 'b' in ti else '-'
        s = f'{ts[k]:.3f}' if k in ts else '-'
        sa = ratio(ts[k], ts['a']) if k in ts and 'a' in ts else '-'
        sb = ratio(ts[k], ts['b']) if k in ts and 'b' in ts else '-'
        out.append(f'| ({k}) {VARIANTS[k][0]} | {i} | {shim} | {ia} | {ib} | '
                   f'{s} | {sa} | {sb} |')
    out.append('')
    return out


def syscall_table(keys, sys_):
    keys = [k for k in keys if k in sys_]
    names = sorted({s for k in keys for s, v in sys_[k].items() if v},
                   key=lambda s: (-max(sys_[k].get(s, 0) for k in keys), s))
    out = ['| system call | ' + ' | '.join(f'({k})' for k in keys) + ' |',
           '|---|' + '---:|' * len(keys)]
    for s in names:
        out.append(f'| {s} | ' + ' | '.join(f'{sys_[k].get(s, 0):.3f}'
                                            for k in keys) + ' |')
    out.append('| **total** | ' + ' | '.join(
        f'**{sum(sys_[k].values()):.3f}**' for k in keys) + ' |')
    out.append('')
    return out


def object_table(keys, ins):
    keys = [k for k in keys if k in ins]
    objs = {k: by_object(ins[k]) for k in keys}
    names = sorted({o for k in keys for o, v in objs[k].items()
                    if abs(v) >= 0.5},
                   key=lambda o: -max(objs[k].get(o, 0) for k in keys))
    out = ['| object | ' + ' | '.join(f'({k})' for k in keys) + ' |',
           '|---|' + '---:|' * len(keys)]
    for o in names:
        out.append(f'| {o} | ' + ' | '.join(f'{objs[k].get(o, 0):,.0f}'
                                            for k in keys) + ' |')
    out.append('')
    return out


def merged(fns):
    """Per function of the shim and libc (where the shim's calls land),
    the compiler's clones (.isra.0, .lto_priv.0, ...) counted as their
    function: two builds clone differently."""
    return {k: v for k, v in cgout.merge_clones(fns).items()
            if k[0] in ('librlshim.so', 'libc.so.6')}


def function_table(ins, key, base, top, by_diff=False):
    """The functions of the shim and libc by exclusive cost per request in
    `key` (or by how much more they cost than in `base`), beside `base`'s."""
    x, y = merged(ins[key]), merged(ins[base])
    rows = [(f, x.get(f, 0), y.get(f, 0)) for f in set(x) | set(y)]
    if by_diff:
        rows = [r for r in rows if abs(r[1] - r[2]) >= 1]
        rows.sort(key=lambda r: -abs(r[1] - r[2]))
    else:
        # libc's functions only where the shim calls them more: the rest
        # is nginx's own (its pools' malloc).
        rows = [r for r in rows if r[1] >= 1 and
                (r[0][0] == 'librlshim.so' or abs(r[1] - r[2]) >= 1)]
        rows.sort(key=lambda r: -r[1])
    out = [f'| function (object) | ({key}) | ({base}) | difference |',
           '|---|---:|---:|---:|']
    for (o, fn), v, b in rows[:top]:
        out.append(f'| `{fn}` ({o}) | {v:,.0f} | {b:,.0f} | {v - b:+,.0f} |')
    tx, ty = sum(v for (o, _), v in x.items() if o == 'librlshim.so'), \
        sum(v for (o, _), v in y.items() if o == 'librlshim.so')
    out.append(f'| all of librlshim.so | {tx:,.0f} | {ty:,.0f} | '
               f'{tx - ty:+,.0f} |')
    out.append('')
    return out


def identity(path):
    return H.shim_identity(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--shim', default=str(H.SHIM))
    ap.add_argument('--old-shim', '--shim-b', default=None,
                    help='another librlshim.so (an older or a newer build), '
                    'run as (o), (b)\'s config')
    ap.add_argument('--sendfile', default='off,on')
    ap.add_argument('--only', default='instructions,syscalls,functions')
    ap.add_argument('--variants', default='a,b,o,c,d',
                    help='which of a,b,o,c,d to run (o needs --old-shim)')
    ap.add_argument('--top', type=int, default=20)
    ap.add_argument('--keep', default=None,
                    help='a directory to keep the callgrind outputs in')
    a = ap.parse_args()
    only = set(a.only.split(','))
    global KEEP
    if a.keep:
        KEEP = a.keep
        os.makedirs(KEEP, exist_ok=True)
    if not shutil.which('nginx', path=os.environ.get('PATH', '') +
                        ':/usr/sbin:/sbin') or not shutil.which('strace'):
        print('## The answer side: skipped (needs nginx and strace)\n')
        return 0
    if not shutil.which('valgrind'):
        only -= {'instructions', 'functions'}
    root = tempfile.mkdtemp(prefix='bench-answers-')
    # Every run preloads the bytes this invocation started with.
    shim_id = identity(Path(a.shim).resolve())
    H.SHIM = Path(root) / 'librlshim.so'
    shutil.copyfile(a.shim, H.SHIM)
    old, old_id = None, None
    if a.old_shim:
        old_id = identity(Path(a.old_shim).resolve())
        # The same file name, so that callgrind names its functions as
        # (b)'s and the two can be set side by side.
        (Path(root) / 'old').mkdir()
        old = Path(root) / 'old' / 'librlshim.so'
        shutil.copyfile(a.old_shim, old)
    keys = [k for k in VARIANTS if k in a.variants.split(',')
            and (k != 'o' or old)]
    p = print
    try:
        p('## The answer side (tools/bench/bench_answers.py)\n')
        now = datetime.datetime.now(datetime.timezone.utc)
        p(f'Command: `python3 tools/bench/bench_answers.py'
          f'{" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""}`. Run of '
          f'{now:%Y-%m-%d %H:%M} UTC, '
          f'{os.cpu_count()} vCPUs, Linux {platform.release()}, '
          f'{H.tool_version(["nginx", "-v"])}.\n')
        p(f'Shim: {shim_id}.' + (f' Older shim (o): {old_id}.' if old else ''))
        p()
        p('nginx `worker_processes 1`, `access_log off`, a '
          f'{len(H.INDEX_HTML)}-byte static page; rule `[limit:all] match = * '
          'rate = 100000000/s key = ip` (never limits). One keep-alive '
          f'connection, `{H.REQUEST!r}` sent N times, each answer read '
          f'before the next; per request = (count at N = {N2} - count at '
          f'N = {N1}) / {N2 - N1}. Instructions: nginx under `valgrind '
          '--tool=callgrind` (`master_process off`), two fresh processes. '
          'System calls: `strace -f -c -p` on the one worker, both counts on '
          'the same warmed-up worker.\n')
        fns = {}
        for sf in a.sendfile.split(','):
            ins, sys_ = {}, {}
            for k in keys:
                kw = kwargs(k, sf, old)
                if 'syscalls' in only:
                    H.log(f'syscalls ({k}) sendfile {sf}')
                    sys_[k] = syscalls(root, kw, k == 'c')
                    H.log(f'  {sum(sys_[k].values()):.3f} per request')
                if only & {'instructions', 'functions'}:
                    H.log(f'instructions ({k}) sendfile {sf}')
                    ins[k] = instructions(root, kw, k == 'c', f'{k}-{sf}')
                    H.log(f'  {sum(ins[k].values()):,.0f} per request')
            for line in summary(keys, ins, sys_, sf):
                p(line)
            if sys_:
                p(f'System calls per request by name, `sendfile {sf}`:\n')
                for line in syscall_table(keys, sys_):
                    p(line)
            if ins:
                p(f'Instructions per request by object, `sendfile {sf}`:\n')
                for line in object_table(keys, ins):
                    p(line)
            fns[sf] = ins
            sys.stdout.flush()
        if 'functions' in only:
            for sf, ins in fns.items():
                if 'c' not in ins or 'b' not in ins:
                    continue
                p(f'Where (c) spends its instructions, `sendfile {sf}`: '
                  'exclusive Ir per request by function (every line of the '
                  'callgrind output, tools/bench/cgout.py; '
                  'the shim is linked with LTO, so a function holds what was '
                  'inlined into it; clones such as `.isra.0` counted as their '
                  f'function), the top {a.top} of the shim and libc:\n')
                for line in function_table(ins, 'c', 'b', a.top):
                    p(line)
                if 'd' in ins:
                    p(f'What count_status adds, (d) against (b), `sendfile '
                      f'{sf}`, the top {a.top} by difference:\n')
                    for line in function_table(ins, 'd', 'b', a.top, True):
                        p(line)
                if 'o' not in ins:
                    continue
                p(f'Where (b) differs from the older shim (o), '
                  f'`sendfile {sf}`, the same way, the top {a.top} by '
                  'difference:\n')
                for line in function_table(ins, 'b', 'o', a.top, True):
                    p(line)
    finally:
        H.cleanup_segments()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
