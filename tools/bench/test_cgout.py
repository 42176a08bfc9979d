#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_cgout.py - cgout.py against a hand-written callgrind file that uses
every compression, and against real callgrind outputs of a program whose
hot loop is inlined from a header (where callgrind_annotate's function list
names no object). Needs gcc and valgrind for the second part.

    python3 tools/bench/test_cgout.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgout  # noqa: E402

# Two event columns, Ir second; instr+line positions, relative and '*';
# IDs defined by cob=/cfn=/cfi=/jfi= and used later by ob=/fn=/fi=; a
# call's inclusive line; jumps; a cost line shorter than the events.
SYNTHETIC = '''\
# callgrind format
version: 1
creator: hand
positions: instr line
events: Dr Ir
summary: 9 1117

ob=(1) /usr/bin/app
fl=(1) app.c
fn=(1) main
0x1000 10 1 100
+4 * 0 10
cob=(2) /lib/libx.so
cfi=(2) x.c
cfn=(2) helper
calls=3 0x2000 5
+2 +1 7 5000
jfi=(3) inl.h
jfn=(3) inlined_into_main
jcnd=2/3 +8 0
jump=1 -2 0
fi=(3)
+8 -1 0 200
* * 1 1
fe=(1)
-4 +2 2 300
ob=(2)
fl=(2)
fn=(2)
0x2000 5 5 400
fn=(3)
+1 +1 0x0 0x64
fn=(4) bare
+1 0 0
+1 0
fn=(5) helper.isra.0
0x2100 9 0 6

totals: 9 1117
'''


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_synthetic(tmp):
    path = os.path.join(tmp, 'synthetic.out')
    with open(path, 'w') as f:
        f.write(SYNTHETIC)
    p = cgout.read(path)
    check(p.total == 1117, f'total {p.total}')
    want = {('/usr/bin/app', 'main'): 100 + 10 + 200 + 1 + 300,
            ('/lib/libx.so', 'helper'): 400,
            ('/lib/libx.so', 'inlined_into_main'): 100,
            ('/lib/libx.so', 'helper.isra.0'): 6}
    for k, v in want.items():
        check(p.cost.get(k, 0) == v, f'{k}: {p.cost.get(k)} != {v}')
    check(p.by_file[('/usr/bin/app', 'inl.h', 'main')] == 201, 'fi=')
    check(p.by_file[('/usr/bin/app', 'app.c', 'main')] == 410, 'fe=')
    check(cgout.by_object(p.cost) == {'app': 611, 'libx.so': 506},
          f'objects {cgout.by_object(p.cost)}')
    dr = cgout.read(path, event='Dr')
    check(dr.total == 9, f'Dr {dr.total}')
    check(cgout.merge_clones({('/lib/x.so', 'f.isra.0'): 1,
                              ('/lib/x.so', 'f'): 2}) == {('x.so', 'f'): 3},
          'clones')
    check(p.summary == 1117, f'summary {p.summary}')
    # A wrong totals: line (a call's inclusive line counted, say) fails;
    # a summary: that differs only when asked to check it.
    for text, strict in ((SYNTHETIC.replace('totals: 9 1117',
                                            'totals: 9 6117'), False),
                         (SYNTHETIC.replace('summary: 9 1117',
                                            'summary: 9 1118'), True)):
        with open(path, 'w') as f:
            f.write(text)
        try:
            cgout.read(path, summary=strict)
        except ValueError:
            pass
        else:
            raise AssertionError(f'a wrong total passed ({strict})')
    check(cgout.read(path).summary == 1118, 'summary kept as it is')


PROG_H = '''static inline __attribute__((always_inline))
unsigned mix(unsigned x)
{ for (int i = 0; i < 50; i++) x = x * 2654435761u + (x >> 7); return x; }
'''
PROG_C = '''#include <stdio.h>
#include "h.h"
unsigned __attribute__((noinline)) work(unsigned x) { return mix(x) ^ x; }
int main(int argc, char **argv)
{ unsigned s = 0; int n = argc > 1 ? 1000 : 2000;
  for (int i = 0; i < n; i++) s += work(i); printf("%u\\n", s); return 0; }
'''


def test_real(tmp):
    if not (shutil.which('gcc') and shutil.which('valgrind')):
        print('test_real: skipped (needs gcc and valgrind)')
        return
    with open(os.path.join(tmp, 'h.h'), 'w') as f:
        f.write(PROG_H)
    with open(os.path.join(tmp, 'p.c'), 'w') as f:
        f.write(PROG_C)
    exe = os.path.join(tmp, 'p')
    subprocess.run(['gcc', '-O2', '-g', '-o', exe, os.path.join(tmp, 'p.c')],
                   check=True)
    for opts in ([], ['--dump-instr=yes'],
                 ['--dump-instr=yes', '--collect-jumps=yes'],
                 ['--dump-instr=yes', '--dump-line=no'],
                 ['--compress-strings=no', '--compress-pos=no'],
                 ['--combine-dumps=yes', '--dump-every-bb=20000'],
                 ['--cache-sim=yes']):
        got = {}
        for arg in ('1', ''):
            out = os.path.join(tmp, 'cg.out')
            subprocess.run(['valgrind', '--tool=callgrind', *opts,
                            f'--callgrind-out-file={out}', exe,
                            *([arg] if arg else [])],
                           check=True, capture_output=True)
            got[arg] = cgout.read(out, summary='--cache-sim=yes' not in opts)
            check(got[arg].summary is not None, 'summary: kept')
            os.unlink(out)
        # 1000 more calls of work(), mix()'s 50 rounds inlined from h.h
        # (about 256 Ir a call; callgrind_annotate's `[p]` line has 6).
        per = cgout.difference(got['1'], got[''], 1000)
        w = per.get((exe, 'work'), 0)
        check(w > 200, f'{opts}: work() {w} per call, the inlined loop lost')
        obj = cgout.by_object(per)
        check(abs(obj['p'] - w) < 20, f'{opts}: p {obj["p"]}, work {w}')
        print(f'test_real {" ".join(opts) or "(defaults)"}: work() {w:.1f} '
              'Ir per call')


def main():
    tmp = tempfile.mkdtemp(prefix='test-cgout-')
    try:
        test_synthetic(tmp)
        print('test_synthetic: ok')
        test_real(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
