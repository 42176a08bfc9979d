# SPDX-License-Identifier: MIT
"""cgout.py - exclusive cost per (object, function) read from a callgrind
output file itself, every cost line counted.

callgrind_annotate's function list cannot be used for this: a line of code
inlined from another source file (`fi=`/`fe=`) is listed as FILE:FUNCTION
without its `[object]`, so counting the lines that name an object dropped a
third to a half of the shim's instructions (the shim is linked with LTO and
inlines across its files). Here every cost line is charged to the object and
the function it ran in, and the sum over everything must equal the file's
`totals:` line exactly (ValueError if not): the sum of what callgrind wrote.
Its `summary:` line comes from callgrind's running counter and can differ
from `totals:` by a few hundred instructions of the process's end (nginx
stopped by a signal; --cache-sim=yes): it is kept as `summary`, and checked
only where there is no `totals:` or when asked (summary=True); a difference
of two runs should agree with it to well under an instruction a request.

The format (valgrind's docs, "Callgrind Format Specification"):
  - `events:` names the cost columns, `positions:` the subpositions (`line`,
    or `instr line`) that start every cost line; a cost line may give fewer
    costs than events (the rest are 0);
  - subpositions are absolute (decimal or 0x hex) or relative to the last
    cost line's: `+N`, `-N`, `*` (the same);
  - `ob=`, `fl=`, `fi=`, `fe=`, `fn=` set the object, the file, the inlined
    file and the function of the cost lines that follow; `cob=`, `cfi=`,
    `cfl=`, `cfn=`, `jfi=`, `jfn=` name a call's or a jump's target. Names
    are compressed: `(ID) name` defines an ID, `(ID)` refers to it; objects
    (ob, cob), files (fl fi fe cfi cfl jfi) and functions (fn cfn jfn) have
    one ID space each, shared by their setters and their targets;
  - `calls=COUNT TARGET` is followed by one cost line whose costs are the
    call's inclusive cost: skipped here, the callee's own lines count it;
  - `jump=COUNT TARGET` and `jcnd=EXE JUMPS TARGET` (--collect-jumps) are
    single lines without cost.

    python3 tools/bench/cgout.py FILE [FILE2 N]   # per object (and per
        # request: (FILE2 - FILE) / N), then the top functions
"""
import re

SPEC = re.compile(r'(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn|jfi|jfn)=\s*'
                  r'(?:\((\d+)\))?\s*(.*)$')
SPACE = {'ob': 'ob', 'cob': 'ob',
         'fl': 'fl', 'fi': 'fl', 'fe': 'fl', 'cfi': 'fl', 'cfl': 'fl',
         'jfi': 'fl',
         'fn': 'fn', 'cfn': 'fn', 'jfn': 'fn'}
HEADER = re.compile(r'([A-Za-z][A-Za-z0-9_]*):\s*(.*)$')


def _number(tok):
    return int(tok, 16) if tok[:2] in ('0x', '0X') else int(tok)


class Profile:
    """One callgrind output file.

    events: the event names; cost[(object, function)] and
    by_file[(object, file, function)] are exclusive costs of `event`
    (file: where the code came from, the inlined file under fi=/fe=);
    total: the file's total of `event` (checked against totals:);
    summary: callgrind's summary: of `event` (None if it wrote none)."""

    def __init__(self, path, event='Ir', summary=False):
        self.path = str(path)
        self.event = event
        self.check_summary = summary
        self.events = None
        self.cost = {}
        self.by_file = {}
        self.total = 0
        self.summary = None
        self._read()

    def objects(self):
        out = {}
        for (o, _), v in self.cost.items():
            out[o] = out.get(o, 0) + v
        return out

    def _read(self):
        names = {'ob': {}, 'fl': {}, 'fn': {}}
        ob = fl = fn = '???'
        npos, col = 1, None
        pos = None
        call_cost_next = False
        summary, totals = [], []
        seen = 0            # the sum of all exclusive cost lines
        by_file = self.by_file
        with open(self.path, errors='replace') as f:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip('\n')
                if not line or line[0] == '#':
                    continue
                c = line[0]
                if c.isdigit() or c in '+-*':
                    tok = line.split()
                    if len(tok) < npos:
                        raise ValueError(f'{self.path}:{lineno}: cost line '
                                         f'with fewer than {npos} positions')
                    pos = self._positions(tok[:npos], pos, lineno)
                    if call_cost_next:
                        # A call's inclusive cost: the callee's lines hold it.
                        call_cost_next = False
                        continue
                    if col is None:
                        raise ValueError(f'{self.path}:{lineno}: cost before '
                                         f'"events:" names {self.event}')
                    if npos + col < len(tok):
                        v = _number(tok[npos + col])
                        if v:
                            k = (ob, fl, fn)
                            by_file[k] = by_file.get(k, 0) + v
                            seen += v
                    continue
                m = SPEC.match(line)
                if m:
                    spec, ident, name = m.groups()
                    space = names[SPACE[spec]]
                    if ident is not None:
                        if name:
                            space[ident] = name
                        elif ident in space:
                            name = space[ident]
                        else:
                            raise ValueError(f'{self.path}:{lineno}: '
                                             f'{spec}=({ident}) never defined')
                    if spec == 'ob':
                        ob = name
                    elif spec in ('fl', 'fi', 'fe'):
                        fl = name
                    elif spec == 'fn':
                        fn = name
                    continue
                if line.startswith('calls='):
                    call_cost_next = True
                    continue
                if line.startswith(('jump=', 'jcnd=')):
                    continue
                m = HEADER.match(line)
                if not m:
                    raise ValueError(f'{self.path}:{lineno}: cannot read '
                                     f'{line[:80]!r}')
                key, value = m.groups()
                if key == 'events':
                    events = value.split()
                    if self.events is not None and events != self.events:
                        raise ValueError(f'{self.path}:{lineno}: events '
                                         'change between parts')
                    self.events = events
                    if self.event not in events:
                        raise ValueError(f'{self.path}: no event '
                                         f'{self.event} in {events}')
                    col = events.index(self.event)
                elif key == 'positions':
                    npos = len(value.split())
                elif key in ('summary', 'totals'):
                    vals = [_number(t) for t in value.split()]
                    (summary if key == 'summary' else totals).append(vals)
        if call_cost_next:
            raise ValueError(f'{self.path}: calls= without its cost line')
        if col is None:
            raise ValueError(f'{self.path}: no "events:" line')
        if not summary and not totals:
            raise ValueError(f'{self.path}: no summary: or totals: line '
                             '(a truncated file?)')
        checks = [('totals', totals)]
        if self.check_summary or not totals:
            checks.append(('summary', summary))
        for what, rows in checks:
            vals = [r[col] if col < len(r) else 0 for r in rows]
            if vals and sum(vals) != seen:
                raise ValueError(f'{self.path}: the cost lines sum to '
                                 f'{seen:,} {self.event}, {what}: says '
                                 f'{sum(vals):,}')
        self.total = seen
        if summary:
            self.summary = sum(r[col] if col < len(r) else 0
                               for r in summary)
        for (o, _, f_), v in by_file.items():
            k = (o, f_)
            self.cost[k] = self.cost.get(k, 0) + v

    def _positions(self, toks, last, lineno):
        out = []
        for i, t in enumerate(toks):
            if t == '*' or t[0] in '+-':
                if last is None:
                    raise ValueError(f'{self.path}:{lineno}: relative '
                                     'subposition before an absolute one')
                out.append(last[i] if t == '*' else
                           last[i] + (_number(t[1:]) if t[0] == '+'
                                      else -_number(t[1:])))
            else:
                out.append(_number(t))
        return out


def read(path, event='Ir', summary=False):
    """summary=True: check summary: exactly as well as totals:."""
    return Profile(path, event, summary)


def difference(p1, p2, n):
    """Per (object, function): (cost in p2 - cost in p1) / n, for the
    difference of two runs (n more requests in p2), start-up cancelled."""
    return {k: (p2.cost.get(k, 0) - p1.cost.get(k, 0)) / n
            for k in set(p1.cost) | set(p2.cost)}


def by_object(fns, base=True):
    """Sum a {(object, function): cost} by object (by the object's file
    name when base: two builds at different paths count as one)."""
    out = {}
    for (o, _), v in fns.items():
        if base:
            o = o.rsplit('/', 1)[-1]
        out[o] = out.get(o, 0) + v
    return out


CLONE = re.compile(r'(\.(lto_priv|isra|constprop|part|cold)\.\d+)+$')


def merge_clones(fns, base=True):
    """The compiler's clones (.isra.0, .lto_priv.0, ...) counted as their
    function (two builds clone differently); objects by file name."""
    out = {}
    for (o, fn), v in fns.items():
        k = (o.rsplit('/', 1)[-1] if base else o, CLONE.sub('', fn))
        out[k] = out.get(k, 0) + v
    return out


def main(argv):
    if len(argv) not in (2, 4):
        print(__doc__.strip().splitlines()[-3])
        return 2
    p1 = read(argv[1])
    if len(argv) == 4:
        p2, n = read(argv[2]), int(argv[3])
        fns = difference(p1, p2, n)
        print(f'per request: {(p2.total - p1.total) / n:,.1f} Ir (summary: '
              f'{(p2.summary - p1.summary) / n:,.1f})')
    else:
        fns = {k: float(v) for k, v in p1.cost.items()}
        print(f'total: {p1.total:,} Ir (= totals:; summary: '
              f'{p1.summary:,})')
    for o, v in sorted(by_object(fns).items(), key=lambda x: -abs(x[1])):
        if abs(v) >= 0.5:
            print(f'{v:14,.1f}  {o}')
    print()
    for (o, fn), v in sorted(merge_clones(fns).items(),
                             key=lambda x: -abs(x[1]))[:30]:
        print(f'{v:14,.1f}  {fn} [{o}]')
    return 0


if __name__ == '__main__':
    import sys
    sys.exit(main(sys.argv))
