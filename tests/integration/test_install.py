#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_install.py - `make install` and `make uninstall`, as a newcomer meets
them: everything lands under PREFIX (or DESTDIR/PREFIX) with the right modes
and nothing else; the installed shim needs only libc; the installed
rlshimctl checks the installed examples; every man page renders without a
warning and documents what the installed programs say they do; the
pkg-config file builds a program against the installed core that gets the
published GCRA numbers; the systemd examples verify, name PREFIX's files and
their command lines work; the unit's sandbox rates 5.0 or below in
systemd-analyze security and allows every system call the agent makes;
README.md, REFERENCE.md and BENCHMARKS.md are installed, and no installed
text names a file under /usr/local when PREFIX is elsewhere; a server under
the installed shim can be watched with the installed rlshimctl and its limit
changed live; the installed bash completion completes the installed
examples' rule names; the installed demo runs from the installed files; uninstall removes exactly what install put there.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, Skip, check_example, exchange, parse_responses,  # noqa: E402
                     request, require_root, run, wait_for)
from servers import agent_log as agent_log_path, end_process, free_port, unlink_segment  # noqa: E402

TMP = tempfile.mkdtemp(prefix='rlshim-install-')
PREFIX = os.path.join(TMP, 'prefix')

MANS = {'rlshim.conf': 'man5/rlshim.conf.5', 'librlshim': 'man7/librlshim.7',
        'rlshimd': 'man8/rlshimd.8', 'rlshimctl': 'man8/rlshimctl.8'}
SYSTEMD = ['rlshimd.service', 'rlshim-preload.conf']
MONITORING = ['prometheus/rlshim-alerts.yml', 'prometheus/rlshim-alerts.test.yml',
              'grafana/rlshim-dashboard.json']
DOCS = {'README.md': 'README.md', 'REFERENCE.md': 'docs/REFERENCE.md',
        'BENCHMARKS.md': 'docs/BENCHMARKS.md'}
# What installed text may still say of /usr/local whatever PREFIX is: the
# default prefix itself (README, REFERENCE), and the places the shim looks
# for rlshimd after those beside it, which are built into it (spawn.c).
USR_LOCAL_KEPT = {'/usr/local': {'share/doc/rlshim/README.md',
                                 'share/doc/rlshim/REFERENCE.md'},
                  '/usr/local/sbin/rlshimd': {'share/man/man7/librlshim.7',
                                              'share/doc/rlshim/REFERENCE.md'},
                  '/usr/local/sbin': {'share/man/man8/rlshimd.8'}}


def expected_files(staged=False):
    """path under PREFIX -> mode, as the README's table says (`staged`:
    with DESTDIR, which records no installed-dirs)."""
    files = {
        'lib/librlshim.so': 0o755,
        'lib/librlcore.a': 0o644,
        'include/rlshim.h': 0o644,
        'lib/pkgconfig/rlcore.pc': 0o644,
        'bin/rlshimctl': 0o755,
        'sbin/rlshimd': 0o755,
        'lib/rlshim/rlshim.bpf.o': 0o644,
        'libexec/rlshim/legacy_server': 0o755,
        'share/rlshim/demo.sh': 0o755,
        'share/bash-completion/completions/rlshimctl': 0o644,
    }
    for n in os.listdir(os.path.join(REPO, 'examples')):
        if n.endswith('.conf'):
            files[f'share/doc/rlshim/examples/{n}'] = 0o644
    for n in MONITORING:
        files[f'share/doc/rlshim/examples/{n}'] = 0o644
    for n in SYSTEMD:
        files[f'share/doc/rlshim/systemd/{n}'] = 0o644
    for m in MANS.values():
        files[f'share/man/{m}'] = 0o644
    for n in DOCS:
        files[f'share/doc/rlshim/{n}'] = 0o644
    if not staged:
        files['share/rlshim/installed-dirs'] = 0o644
    return files


def make(*args):
    """make in the tree, outside any make that runs this test (its
    jobserver descriptors are not ours)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'SANITIZE')}
    p = subprocess.run(['make', '--no-print-directory', '-C', REPO, *args],
                       capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    return p


def parents(path):
    """'a/b/c' -> 'a/b', 'a'."""
    out = []
    d = os.path.dirname(path)
    while d:
        out.append(d)
        d = os.path.dirname(d)
    return out


def dirs_under(root):
    return sorted(os.path.relpath(d, root) for d, _, _ in os.walk(root))


def files_under(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.lstat(p).st_mode & 0o7777
    return out


def sh(*args, env=None, cwd=None, timeout=60):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def inst(path):
    return os.path.join(PREFIX, path)


def render(page):
    """`man -l` of an installed page, as plain text."""
    env = dict(os.environ, MANWIDTH='100', LC_ALL='C.UTF-8', MANPAGER='cat',
               PAGER='cat')
    p = sh('man', '-l', inst('share/man/' + MANS[page]), env=env)
    assert p.returncode == 0, (page, p.stderr)
    # no bold/underline overstrikes, whatever man-db decides
    return re.sub(r'.\x08', '', p.stdout)


# ---- install ------------------------------------------------------------------------

def install():
    """make install PREFIX=...: every file of the README's table, with its
    mode, and no other file."""
    assert not os.path.exists(PREFIX)
    make('install', f'PREFIX={PREFIX}')
    want = expected_files()
    # the directories it made, PREFIX itself too, for make uninstall
    with open(inst('share/rlshim/installed-dirs')) as f:
        made = f.read().split()
    assert made == sorted({'.'} | {d for p in want for d in parents(p)}), made
    have = files_under(PREFIX)
    assert set(have) == set(want), (sorted(set(have) ^ set(want)))
    for path, mode in want.items():
        assert have[path] == mode, (path, oct(have[path]), oct(mode))
    # the build's own files, not stale copies
    for src, dst in (('build/librlshim.so', 'lib/librlshim.so'),
                     ('build/rlshim.bpf.o', 'lib/rlshim/rlshim.bpf.o'),
                     ('include/rlshim.h', 'include/rlshim.h')):
        with open(os.path.join(REPO, src), 'rb') as a, open(inst(dst), 'rb') as b:
            assert a.read() == b.read(), dst
    with open(inst('lib/pkgconfig/rlcore.pc')) as f:
        pc = f.read()
    assert f'prefix={PREFIX}\n' in pc and '@' not in pc, pc


def destdir():
    """make install DESTDIR=D PREFIX=P stages into D/P while every path
    written into the files is P's; uninstall with the same removes it all."""
    dest = os.path.join(TMP, 'stage')
    prefix = f'/opt/rlshim-install-test-{os.getpid()}'
    assert not os.path.exists(prefix)
    make('install', f'DESTDIR={dest}', f'PREFIX={prefix}')
    try:
        root = dest + prefix
        have = files_under(root)
        assert set(have) == set(expected_files(staged=True)), sorted(have)
        assert set(files_under(dest)) == {os.path.join(prefix[1:], p)
                                          for p in have}
        assert not os.path.exists(prefix), 'install wrote outside DESTDIR'
        with open(os.path.join(root, 'lib/pkgconfig/rlcore.pc')) as f:
            assert f'prefix={prefix}\n' in f.read()
        with open(os.path.join(root, 'share/rlshim/demo.sh')) as f:
            demo = f.read()
        assert f'{prefix}/lib/librlshim.so' in demo and dest not in demo
        prefix_in_texts(root, prefix, dest)
    finally:
        make('uninstall', f'DESTDIR={dest}', f'PREFIX={prefix}')
    assert files_under(dest) == {}, files_under(dest)
    assert not os.path.exists(prefix)


def text_files(root):
    """path under root -> text, for the installed files that are text."""
    out = {}
    for rel in files_under(root):
        with open(os.path.join(root, rel), 'rb') as f:
            data = f.read()
        if b'\0' in data:
            continue
        try:
            out[rel] = data.decode()
        except UnicodeDecodeError:
            continue
    return out


def prefix_in_texts(root, prefix, dest):
    """Installed with PREFIX=prefix (staged in dest): the unit's ExecStart=
    and the drop-in's LD_PRELOAD= name prefix's files, no text names a file
    under /usr/local (but USR_LOCAL_KEPT) or the staging directory, and the
    documents are the tree's, with prefix's paths."""
    texts = text_files(root)
    assert 'share/doc/rlshim/systemd/rlshimd.service' in texts, sorted(texts)
    for rel, text in texts.items():
        assert dest not in text, rel
        for m in re.finditer(r'/usr/local(?:/[\w.+-]+)*', text):
            assert rel in USR_LOCAL_KEPT.get(m.group(0), ()), \
                (rel, text[max(0, m.start() - 60):m.end() + 20])
    u = unit_values(os.path.join(root, 'share/doc/rlshim/systemd/rlshimd.service'))
    assert u['ExecStart'] == [f'{prefix}/sbin/rlshimd --foreground'], u
    env = dict(v.split('=', 1) for v in unit_values(
        os.path.join(root, 'share/doc/rlshim/systemd/rlshim-preload.conf'))
        ['Environment'])
    assert env == {'LD_PRELOAD': f'{prefix}/lib/librlshim.so',
                   'RLSHIM_CONFIG': '/etc/rlshim.conf'}, env
    for name, src in DOCS.items():
        with open(os.path.join(REPO, src)) as f:
            want = re.sub(r'/usr/local/(lib|bin|share|libexec|include)/',
                          prefix + r'/\1/', f.read())
        assert texts[f'share/doc/rlshim/{name}'] == want, name
    assert f'LD_PRELOAD={prefix}/lib/librlshim.so' in \
        texts['share/doc/rlshim/README.md']
    assert f'{prefix}/lib/librlshim.so' in texts['share/man/man7/librlshim.7']


def docs_installed():
    """README.md, REFERENCE.md and BENCHMARKS.md under share/doc/rlshim,
    with the paths of this PREFIX; the default PREFIX installs the files of
    the tree unchanged (the examples stay valid as they are)."""
    prefix_in_texts(PREFIX, PREFIX, os.path.join(TMP, 'stage'))
    dest = os.path.join(TMP, 'default')
    make('install', f'DESTDIR={dest}')
    try:
        root = dest + '/usr/local'
        for rel, src in [(f'share/doc/rlshim/{n}', s) for n, s in DOCS.items()] + \
                [(f'share/doc/rlshim/systemd/{n}', f'examples/systemd/{n}')
                 for n in SYSTEMD] + \
                [(f'share/man/{m}', f'docs/{m.split("/")[1]}')
                 for m in MANS.values()]:
            with open(os.path.join(root, rel)) as a, \
                    open(os.path.join(REPO, src)) as b:
                assert a.read() == b.read(), rel
    finally:
        make('uninstall', f'DESTDIR={dest}')
    assert files_under(dest) == {}, files_under(dest)


def shim_needs_only_libc():
    """The installed librlshim.so lists libc and nothing else as NEEDED."""
    p = sh('readelf', '-d', inst('lib/librlshim.so'))
    assert p.returncode == 0, p.stderr
    needed = re.findall(r'\(NEEDED\)\s+Shared library: \[([^]]+)\]', p.stdout)
    assert needed == ['libc.so.6'], needed


SELF_CALL = r'''
#include <unistd.h>
#define EXPORT __attribute__((visibility("default")))
EXPORT ssize_t read(int fd, void *buf, size_t len) { (void)fd; (void)buf; return (ssize_t)len; }
EXPORT int through_%s(void) { char c = 0; return (int)%s(1, &c, 1); }
'''


def build_refuses_self_calls():
    """tools/check-selfcalls.sh, run on every link of librlshim.so, passes
    the installed library and fails a library whose code calls a name it
    exports (its own hook, through the PLT), naming the name and the
    caller; a call to a name it does not export passes."""
    check = os.path.join(REPO, 'tools', 'check-selfcalls.sh')
    p = sh(check, inst('lib/librlshim.so'))
    assert p.returncode == 0, p.stderr
    for callee, fails in (('read', True), ('write', False)):
        src = os.path.join(TMP, f'self_{callee}.c')
        lib = os.path.join(TMP, f'libself_{callee}.so')
        with open(src, 'w') as f:
            f.write(SELF_CALL % (callee, callee))
        cc = sh('cc', '-shared', '-fPIC', '-O2', '-fvisibility=hidden',
                '-o', lib, src)
        assert cc.returncode == 0, cc.stderr
        p = sh(check, lib)
        if fails:
            assert p.returncode == 1, (p.stdout, p.stderr)
            assert f"calls its own hook 'read'" in p.stderr, p.stderr
            assert f'through_{callee}' in p.stderr, p.stderr
        else:
            assert p.returncode == 0, p.stderr


def check_examples():
    """The installed rlshimctl says ok to every installed example
    configuration, and refuses a broken copy of one with file:line."""
    ctl = inst('bin/rlshimctl')
    ex = inst('share/doc/rlshim/examples')
    names = sorted(n for n in os.listdir(ex) if n.endswith('.conf'))
    assert len(names) >= 4, names
    for n in names:
        p = check_example(ctl, os.path.join(ex, n))
        assert p.returncode == 0 and ': ok,' in p.stdout, (n, p.stdout, p.stderr)
    bad = os.path.join(TMP, 'bad.conf')
    with open(os.path.join(ex, 'quickstart.conf')) as f:
        text = f.read()
    with open(bad, 'w') as f:
        f.write(text.replace('rate = 3/m', 'rate = 3/x'))
    line = text[:text.index('rate = 3/m')].count('\n') + 1
    p = sh(ctl, 'check', bad)
    assert p.returncode == 1 and p.stderr.startswith(f'{bad}:{line}: bad rate'), \
        (p.returncode, p.stderr)


# ---- man pages ------------------------------------------------------------------------

def man_pages_render():
    """Each installed page: groff -ww finds nothing to warn about, nor
    mandoc -Tlint (where mandoc is installed: tools/deps.sh installs it),
    not even a style notice; man -l shows NAME and SYNOPSIS, and man -M
    PREFIX/share/man finds it by name."""
    env = dict(os.environ, LC_ALL='C.UTF-8', MANPAGER='cat', PAGER='cat')
    for page, rel in MANS.items():
        p = sh('groff', '-man', '-Tutf8', '-ww', '-z', inst('share/man/' + rel))
        assert p.returncode == 0 and p.stderr == '', (page, p.stderr)
        if shutil.which('mandoc'):
            p = sh('mandoc', '-Tlint', '-Wstyle', inst('share/man/' + rel))
            assert p.returncode == 0 and p.stdout + p.stderr == '', \
                (page, p.stdout, p.stderr)
        text = render(page)
        assert re.search(r'^NAME\n\s+' + re.escape(page) + r' \\?- ', text,
                         re.M), (page, text[:300])
        assert re.search(r'^SYNOPSIS$', text, re.M), page
        section = rel[3]
        p = sh('man', '-M', inst('share/man'), section, page, env=env)
        assert p.returncode == 0 and f'{page.upper()}({section})' in p.stdout, \
            (page, p.stderr)


def man_conf_has_every_key():
    """rlshim.conf(5) names every key the parser knows, in its section."""
    with open(os.path.join(REPO, 'src/core/config_key.c')) as f:
        src = f.read()
    keys = re.findall(r'\{\s*SEC_(GLOBAL|REDIS|XDP|LIMIT),\s*"([a-z0-9_]+)"', src)
    assert len(keys) >= 30, keys
    text = render('rlshim.conf')
    heads = {'GLOBAL': '[global]', 'REDIS': '[redis]', 'XDP': '[xdp]',
             'LIMIT': '[limit:NAME]'}
    for sec, key in keys:
        # the section runs to the next heading (a line that is not indented)
        start = text.index('\n' + heads[sec] + '\n') + 1
        end = re.compile(r'^\S', re.M).search(text, start + 1).start()
        assert re.search(r'^ {7}' + key + r' = ', text[start:end], re.M), \
            f'{key} of [{sec.lower()}] is not documented in its section'


def man_programs_match_their_help():
    """Every command `rlshimctl --help` lists and every metric family its
    `metrics --help` names is in rlshimctl(8); every option of
    `rlshimd --help` is in rlshimd(8)."""
    ctl = sh(inst('bin/rlshimctl'), '--help')
    assert ctl.returncode == 0, ctl.stderr
    cmds = re.findall(r'^  ([a-z]+) ', ctl.stdout.split('\n\n')[1], re.M)
    assert {'check', 'ban', 'unban', 'bans', 'xdp'} <= set(cmds), cmds
    text = render('rlshimctl')
    synopsis = text[text.index('SYNOPSIS'):text.index('DESCRIPTION')]
    documented = re.findall(r'rlshimctl \[-c FILE\] ([a-z]+)', synopsis)
    assert sorted(documented) == sorted(cmds), (documented, cmds)
    for c in cmds:
        assert re.search(r'^       ' + c + r'\b', text, re.M), c
    if 'metrics' in cmds:
        m = sh(inst('bin/rlshimctl'), 'metrics', '--help')
        assert m.returncode == 0, m.stderr
        families = set(re.findall(r'\brlshim_[a-z_]*[a-z]\b', m.stdout))
        assert families, m.stdout
        for fam in families:
            assert fam in text, f'metric family {fam} not in rlshimctl(8)'
    agent = sh(inst('sbin/rlshimd'), '--help')
    assert agent.returncode == 0, agent.stderr
    opts = re.findall(r'(?<![\w-])(--?[a-z][a-z-]*)', agent.stdout)
    assert {'-c', '--foreground', '--log'} <= set(opts), opts
    text = render('rlshimd')
    for o in opts:
        assert re.search(r'^       ' + re.escape(o) + r'\b', text, re.M), o


# ---- the embeddable core ----------------------------------------------------------------

GCRA_PROGRAM = r'''
#include <rlshim.h>
#include <stdio.h>

/* DESIGN.md: 10 per second, burst 10, at one instant. */
int main(void)
{
	struct rl_rate rate = { 1000000000ull, 10, 10 };
	const unsigned costs[] = { 1, 2, 7, 1000 };
	uint64_t tat = 0, now = rl_time_now_ns();

	for (int i = 0; i < 4; i++) {
		struct rl_result r;

		rl_gcra_step(&tat, &rate, costs[i], now, &r);
		printf("cost %u: allowed %d remaining %u reset %llu ms retry %llu ms\n",
		       costs[i], r.allowed, r.remaining,
		       (unsigned long long)(r.reset_after_ns / 1000000),
		       (unsigned long long)(r.retry_after_ns / 1000000));
	}
	return 0;
}
'''

# The README's example over the shared table, from the installed core alone
# (no object of the shim in it), and an error's text through struct rl_err.
TABLE_PROGRAM = r'''
#include <rlshim.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	struct rl_table *t;
	struct rl_rule_def sms = { "sms", RL_ALGO_GCRA, { 60000000000ull, 3, 3 } };
	struct rl_err err;
	char name[64];
	unsigned rule;

	if (rl_table_open("bad/name", 64, RL_TABLE_CREATE, &t, &err) == 0)
		return 1;
	printf("refused: %.16s\n", err.msg);
	snprintf(name, sizeof(name), "rlshim-test-embed-%d", (int)getpid());
	if (rl_table_open(name, 64, RL_TABLE_CREATE, &t, &err) ||
	    rl_table_rule(t, &sms, &rule)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < 4; i++) {
		struct rl_result r;

		rl_table_take(t, rule, "192.0.2.7", 9, 1, rl_time_now_ns(), &r);
		printf("%d", r.allowed);
	}
	printf("\n");
	rl_table_close(t);
	rl_table_unlink(name);
	return 0;
}
'''

TABLE_OUTPUT = 'refused: bad segment name\n1110\n'

GCRA_OUTPUT = '''\
cost 1: allowed 1 remaining 9 reset 100 ms retry 0 ms
cost 2: allowed 1 remaining 7 reset 300 ms retry 0 ms
cost 7: allowed 1 remaining 0 reset 1000 ms retry 0 ms
cost 1000: allowed 0 remaining 0 reset 1000 ms retry 100000 ms
'''


def pkg_config_links():
    """A program built with `pkg-config --cflags --libs rlcore` against the
    installed prefix alone (not the tree) gets DESIGN.md's numbers; so does
    one built with --static."""
    d = os.path.join(TMP, 'app')
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, PKG_CONFIG_PATH=inst('lib/pkgconfig'))
    for name, program, want in (('gcra', GCRA_PROGRAM, GCRA_OUTPUT),
                                ('table', TABLE_PROGRAM, TABLE_OUTPUT)):
        src = os.path.join(d, name + '.c')
        with open(src, 'w') as f:
            f.write(program)
        for static in ([], ['--static']):
            flags = sh('pkg-config', *static, '--cflags', '--libs', 'rlcore',
                       env=env)
            assert flags.returncode == 0, flags.stderr
            assert f'-I{PREFIX}/include' in flags.stdout, flags.stdout
            assert f'-L{PREFIX}/lib' in flags.stdout, flags.stdout
            exe = os.path.join(d, name + ('-static' if static else ''))
            cc = sh('cc', '-Wall', '-Werror', '-o', exe, src,
                    *flags.stdout.split(), cwd=d)
            assert cc.returncode == 0, (flags.stdout, cc.stderr)
            out = sh(exe)
            assert out.returncode == 0 and out.stdout == want, out.stdout


def core_holds_no_shim():
    """The installed librlcore.a is the core alone: none of the shim's
    objects (its read path, its fd table, its hooks) comes with it."""
    nm = sh('nm', '-g', '--defined-only', inst('lib/librlcore.a'))
    assert nm.returncode == 0, nm.stderr
    syms = re.findall(r' [TDBR] (\w+)$', nm.stdout, re.M)
    assert 'rl_table_open' in syms and 'rl_gcra_step' in syms, syms[:20]
    shim = [s for s in syms if re.match(
        r'rl_(io|shim|spawn|fd|conn|http|accept|reply|proxy|policy)_', s)
        or s in ('read', 'write', 'accept', 'close')]
    assert not shim, shim


# ---- systemd examples ------------------------------------------------------------------

def unit_values(path):
    """key -> [values] of a unit file, comments and sections left out."""
    with open(path) as f:
        return unit_values_of(f.read())


def unit_values_of(text):
    vals = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in '#;[':
            continue
        k, _, v = line.partition('=')
        vals.setdefault(k.strip(), []).append(v.strip())
    return vals


def capabilities_known(names):
    with open('/usr/include/linux/capability.h') as f:
        known = set(re.findall(r'#define (CAP_[A-Z_]+)\s+\d+', f.read()))
    for n in names:
        assert n in known, n


def need_systemd_analyze():
    if shutil.which('systemd-analyze'):
        return
    if os.environ.get('CI'):
        raise AssertionError('systemd-analyze is missing (systemd; '
                             'tools/deps.sh installs it)')
    raise Skip('systemd-analyze is not installed; the files were checked '
               'by hand only')


def systemd_examples():
    """The unit and the drop-in name the installed files (under this
    PREFIX), the unit's capabilities exist, and systemd-analyze verify
    (where installed) accepts both, capability lines commented or not."""
    unit = inst('share/doc/rlshim/systemd/rlshimd.service')
    dropin = inst('share/doc/rlshim/systemd/rlshim-preload.conf')
    u = unit_values(unit)
    exe = u['ExecStart'][0].split()[0]
    assert exe == inst('sbin/rlshimd') and os.path.isfile(exe), exe
    assert 'RLSHIM_CONFIG=/etc/rlshim.conf' in u['Environment'], u
    assert u['Restart'] == ['on-failure'], u
    with open(unit) as f:
        caps = re.findall(r'^#?AmbientCapabilities=(.*)$', f.read(), re.M)
    assert caps and {'CAP_BPF', 'CAP_NET_ADMIN', 'CAP_PERFMON'} <= \
        set(caps[0].split()), caps
    capabilities_known(caps[0].split())
    env = dict(v.split('=', 1) for v in unit_values(dropin)['Environment'])
    assert set(env) == {'LD_PRELOAD', 'RLSHIM_CONFIG'}, env
    assert env['LD_PRELOAD'] == inst('lib/librlshim.so') and \
        os.path.isfile(env['LD_PRELOAD']), env

    need_systemd_analyze()
    d = os.path.join(TMP, 'units')
    os.makedirs(os.path.join(d, 'rlshim-dummy.service.d'))
    with open(unit) as f:
        text = f.read()
    with open(os.path.join(d, 'rlshimd.service'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'rlshimd-xdp.service'), 'w') as f:
        f.write(unit_with_xdp(text))
    with open(os.path.join(d, 'rlshim-dummy.service'), 'w') as f:
        f.write('[Unit]\nDescription=a server\n[Service]\nExecStart=/bin/true\n')
    shutil.copy(dropin, os.path.join(d, 'rlshim-dummy.service.d', 'rlshim.conf'))
    # No man page on the man path: Documentation= must not need one.
    venv = dict(os.environ, MANPATH=os.path.join(TMP, 'no-man-pages'))
    assert re.search(r'^Documentation=file:' + re.escape(inst('share/doc/rlshim/')) + '$',
                     text, re.M), text
    assert os.path.isdir(inst('share/doc/rlshim'))
    for name in ('rlshimd.service', 'rlshimd-xdp.service', 'rlshim-dummy.service'):
        p = sh('systemd-analyze', 'verify', os.path.join(d, name), env=venv)
        assert p.returncode == 0 and p.stdout + p.stderr == '', (name, p.stdout,
                                                               p.stderr)


def unit_with_xdp(text):
    """The unit with its commented capability lines in force."""
    return re.sub(r'^#((Ambient|CapabilityBounding)\w*=)', r'\1', text,
                  flags=re.M)


def unit_sandboxed():
    """systemd-analyze security rates the installed unit 5.0 or below
    (OK), with its XDP lines commented and in force, as its comment says;
    and it leaves open what the agent needs: the bpffs writable for the
    pins, Unix, IP and netlink sockets, bpf(), the network, capabilities
    that count (no PrivateUsers=), and the servers' segment kept when it
    stops (no RemoveIPC= or DynamicUser=)."""
    need_systemd_analyze()
    unit = inst('share/doc/rlshim/systemd/rlshimd.service')
    with open(unit) as f:
        text = f.read()
    said = re.search(r'rates it (\d+\.\d) OK, and\n# (\d+\.\d) OK with the XDP',
                     text)
    assert said, 'the unit does not say how systemd-analyze rates it'
    d = os.path.join(TMP, 'sandbox')
    os.makedirs(d)
    for name, body, want in (('rlshimd.service', text, said.group(1)),
                             ('rlshimd-xdp.service', unit_with_xdp(text),
                              said.group(2))):
        path = os.path.join(d, name)
        with open(path, 'w') as f:
            f.write(body)
        p = sh('systemd-analyze', 'security', '--offline=yes', path)
        m = re.search(r'Overall exposure level for \S+: (\d+\.\d) (\w+)',
                      p.stdout)
        assert p.returncode == 0 and m, (name, p.stdout[-500:], p.stderr)
        assert float(m.group(1)) <= 5.0, (name, m.group(0), p.stdout)
        assert m.group(1) == want, (name, m.group(0), f'the unit says {want}')
    u = unit_values(unit)
    for key in ('RemoveIPC', 'DynamicUser', 'PrivateUsers', 'PrivateNetwork'):
        assert key not in u, (key, u[key])
    assert u['ReadWritePaths'] == ['-/sys/fs/bpf'], u
    assert set(u['RestrictAddressFamilies'][0].split()) == \
        {'AF_UNIX', 'AF_INET', 'AF_INET6', 'AF_NETLINK'}, u
    assert u['SystemCallFilter'] == ['@system-service bpf'], u


def unit_command_line_runs():
    """The unit's ExecStart= and Environment=, with the installed rlshimd and
    a configuration of our own: it stays in the foreground, serves the
    segment, and stops cleanly on SIGTERM (what systemctl stop sends)."""
    u = unit_values(inst('share/doc/rlshim/systemd/rlshimd.service'))
    argv = u['ExecStart'][0].split()
    assert argv[0] == inst('sbin/rlshimd'), argv
    shm = f'rlshim-inst-{os.getpid()}'
    conf = os.path.join(TMP, 'agent.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = {shm}\n\n[limit:api]\nrate = 10/s\n')
    env = dict(os.environ)
    for v in u.get('Environment', []):
        k, _, val = v.partition('=')
        env[k] = conf if k == 'RLSHIM_CONFIG' else val
    log = os.path.join(TMP, 'agent.log')
    with open(log, 'w') as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             env=env)
    try:
        assert wait_for(lambda: 'agent started' in open(log).read(), 10), \
            open(log).read()
        assert f'shm={shm}' in open(log).read(), open(log).read()
        assert p.poll() is None, 'rlshimd left the foreground'
        ok = sh(inst('bin/rlshimctl'), '-c', conf, 'bans')
        assert ok.returncode == 0 and 'no bans' in ok.stdout, ok.stderr
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
        assert 'agent stopped' in open(log).read(), open(log).read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        unlink_segment(shm)


def unit_xdp_capabilities():
    """The unit's commented XDP lines are enough for its User= to attach the
    dropper where bpffs is mounted as systemd mounts it (mode 0700, root),
    and CAP_DAC_OVERRIDE is the one that makes the difference there: run
    the installed rlshimd as that user with those ambient capabilities on a
    veth, in a mount namespace of its own."""
    require_root('attaching XDP to a veth')
    for tool in ('setpriv', 'unshare', 'ip'):
        if not shutil.which(tool):
            raise AssertionError(f'{tool} is missing (util-linux, iproute2)')
    unit = inst('share/doc/rlshim/systemd/rlshimd.service')
    u = unit_values(unit)
    user = u['User'][0]
    with open(unit) as f:
        caps = re.search(r'^#AmbientCapabilities=(.*)$', f.read(), re.M)
    caps = caps.group(1).split()
    assert 'CAP_DAC_OVERRIDE' in caps, caps
    shm = f'rlshim-inst-xdp-{os.getpid()}'
    ifc = f'rlin{os.getpid() % 100000}'
    d = os.path.join(TMP, 'xdp')
    os.makedirs(d)
    os.chmod(TMP, 0o755)  # the unit's user reads the configuration
    os.chmod(d, 0o755)
    conf = os.path.join(d, 'xdp.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = {shm}\n\n[xdp]\ninterfaces = {ifc}\n'
                'mode = generic\n\n[limit:api]\nrate = 10/s\n')
    os.chmod(conf, 0o644)
    script = r'''
set -e
mount -t bpf bpf /sys/fs/bpf -o mode=0700
setpriv --reuid "$1" --regid "$1" --clear-groups --inh-caps "$2" \
    --ambient-caps "$2" "$3" -c "$4" --foreground 2>"$5" &
pid=$!
i=0
until grep -q 'agent started' "$5" || [ $i -ge 100 ]; do sleep 0.05; i=$((i+1)); done
kill -TERM $pid
wait $pid
'''
    sh('ip', 'link', 'del', ifc)
    p = sh('ip', 'link', 'add', ifc, 'type', 'veth', 'peer', 'name', ifc + 'p')
    assert p.returncode == 0, p.stderr
    try:
        sh('ip', 'link', 'set', ifc, 'up')
        sh('ip', 'link', 'set', ifc + 'p', 'up')
        results = {}
        for name, cs in (('unit', caps),
                         ('without CAP_DAC_OVERRIDE',
                          [c for c in caps if c != 'CAP_DAC_OVERRIDE'])):
            log = os.path.join(d, f'{len(results)}.log')
            spec = ','.join('+' + c[4:].lower() for c in cs)
            p = sh('unshare', '-m', '--propagation', 'private', 'sh', '-c',
                   script, 'sh', user, spec, inst('sbin/rlshimd'), conf, log,
                   timeout=30)
            text = open(log).read() if os.path.exists(log) else ''
            assert p.returncode == 0 and 'agent stopped' in text, \
                (name, p.stderr, text)
            results[name] = text
            unlink_segment(shm)
        assert f'msg="xdp attached" interface={ifc} mode=generic' in \
            results['unit'], \
            results['unit']
        assert 'xdp detached' in results['unit'], results['unit']
        assert 'xdp attached' not in results['without CAP_DAC_OVERRIDE'], \
            results['without CAP_DAC_OVERRIDE']
        # ... and it says why, not that it lacks CAP_BPF.
        assert 'is not writable by this user (add CAP_DAC_OVERRIDE' in \
            results['without CAP_DAC_OVERRIDE'], results['without CAP_DAC_OVERRIDE']
    finally:
        sh('ip', 'link', 'del', ifc)
        os.chmod(TMP, 0o700)


def syscall_set(spec):
    """The system calls a SystemCallFilter= allow list names, its @groups
    expanded as systemd-analyze expands them."""
    out = set()
    for name in spec.split():
        if not name.startswith('@'):
            out.add(name)
            continue
        p = sh('systemd-analyze', 'syscall-filter', name)
        assert p.returncode == 0, p.stderr
        for line in p.stdout.splitlines()[1:]:
            s = line.strip()
            if s and not s.startswith('#'):
                out |= syscall_set(s) if s.startswith('@') else {s}
    return out


SYSCALLS_SCRIPT = r'''
set -e
mount -t bpf bpf /sys/fs/bpf -o mode=0700
strace -f -qq -o "$6" setpriv --reuid "$1" --regid "$1" --clear-groups \
    --inh-caps "$2" --ambient-caps "$2" "$3" -c "$4" --foreground 2>"$5" &
pid=$!
started() {
    i=0
    until [ "$(grep -c 'agent started' "$5")" -ge "$1" ] || [ $i -ge 200 ]; do
        sleep 0.05; i=$((i+1))
    done
}
started 1
"$7" -c "$4" ban 192.0.2.7 >/dev/null
sleep 0.3
echo >>"$4"
started 2
sleep 0.3
kill -TERM $(pgrep -P $pid)
wait $pid
'''


def unit_syscalls_allowed():
    """Every system call the installed rlshimd makes, as the unit's user
    with its XDP capabilities, with Redis and XDP, issuing a ban and
    restarting on an edit, is in the unit's SystemCallFilter= (else
    systemd would refuse it EPERM)."""
    require_root('attaching XDP to a veth')
    need_systemd_analyze()
    for tool in ('setpriv', 'unshare', 'ip', 'strace', 'redis-server'):
        if not shutil.which(tool):
            raise AssertionError(f'{tool} is missing (tools/deps.sh)')
    unit = inst('share/doc/rlshim/systemd/rlshimd.service')
    with open(unit) as f:
        u = unit_values_of(unit_with_xdp(f.read()))
    allowed = syscall_set(u['SystemCallFilter'][0])
    assert {'read', 'execve'} <= allowed, sorted(allowed)[:20]
    caps = u['AmbientCapabilities'][0].split()
    spec = ','.join('+' + c[4:].lower() for c in caps)
    shm = f'rlshim-inst-sc-{os.getpid()}'
    ifc = f'rlsc{os.getpid() % 100000}'
    d = os.path.join(TMP, 'syscalls')
    os.makedirs(d)
    os.chmod(TMP, 0o755)
    os.chmod(d, 0o777)  # the unit's user reads the configuration
    port = free_port()
    redis = subprocess.Popen(['redis-server', '--port', str(port), '--save', '',
                              '--appendonly', 'no', '--bind', '127.0.0.1'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conf = os.path.join(d, 'agent.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nshm = {shm}\n\n[redis]\n'
                f'url = redis://127.0.0.1:{port}/0\n\n[xdp]\ninterfaces = {ifc}\n'
                'mode = generic\n\n[limit:api]\nrate = 10/s\nmaxretry = 5\n'
                'findtime = 1m\nbantime = 10m\n')
    os.chmod(conf, 0o666)
    log, trace = os.path.join(d, 'agent.log'), os.path.join(d, 'trace')
    sh('ip', 'link', 'del', ifc)
    p = sh('ip', 'link', 'add', ifc, 'type', 'veth', 'peer', 'name', ifc + 'p')
    assert p.returncode == 0, p.stderr
    try:
        assert wait_for(lambda: sh('redis-cli', '-p', str(port), 'ping')
                        .stdout.strip() == 'PONG', 10), 'redis-server'
        sh('ip', 'link', 'set', ifc, 'up')
        p = sh('unshare', '-m', '--propagation', 'private', 'sh', '-c',
               SYSCALLS_SCRIPT, 'sh', u['User'][0], spec, inst('sbin/rlshimd'),
               conf, log, trace, inst('bin/rlshimctl'), timeout=60)
        text = open(log).read() if os.path.exists(log) else ''
        assert p.returncode == 0 and 'agent stopped' in text, (p.stderr, text)
        for want in ('xdp attached', 'store connected',
                     'agent restarting on the changed configuration'):
            assert want in text, (want, text)
        with open(trace) as f:
            lines = f.read().splitlines()
        first = next(i for i, line in enumerate(lines)
                     if re.search(r'execve\("' + re.escape(inst('sbin/rlshimd')),
                                  line))
        made = set()
        for line in lines[first:]:
            m = re.match(r'\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]', line)
            if m:
                made.add(m.group(1))
        assert len(made) > 20, sorted(made)
        assert made <= allowed, sorted(made - allowed)
    finally:
        end_process(redis)
        sh('ip', 'link', 'del', ifc)
        unlink_segment(shm)
        os.chmod(TMP, 0o700)


# ---- protect a server, watch it, change a limit -------------------------------------------

def watch_and_change_live():
    """The README's story from the installed files only: the installed
    legacy_server under the installed shim; rlshimctl status, top and
    metrics show it (every metric family printed is in rlshimctl(8)); an
    edited limit applies without a restart, and metrics count the reload."""
    port = free_port()
    shm = f'rlshim-inst-live-{os.getpid()}'
    conf = os.path.join(TMP, 'live.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\n\n'
                '[limit:sms]\nmatch = POST /sms\nrate = 2/m\n')
    env = dict(os.environ, RLSHIM_CONFIG=conf,
               LD_PRELOAD=inst('lib/librlshim.so'))
    log = os.path.join(TMP, 'live.log')
    ctl = [inst('bin/rlshimctl'), '-c', conf]
    with open(log, 'w') as out:
        srv = subprocess.Popen([inst('libexec/rlshim/legacy_server'), '-p',
                                str(port)], stdout=out, stderr=subprocess.STDOUT,
                               env=env)

    def post():
        """The status, or None when the connection was closed unanswered."""
        rs = parse_responses(exchange(port, request('POST', '/sms')),
                             first_only=True)
        return rs[0].status if rs else None

    try:
        assert wait_for(lambda: 'listening' in open(log).read(), 10)
        assert [post() for _ in range(3)] == [200, 200, 429]
        assert 'msg="limiting"' in open(log).read(), open(log).read()
        st = sh(*ctl, 'status')
        assert st.returncode == 0 and 'sms' in st.stdout, (st.stdout, st.stderr)
        top = sh(*ctl, 'top')
        assert top.returncode == 0 and '127.0.0.1' in top.stdout, top.stdout
        m = sh(*ctl, 'metrics')
        assert m.returncode == 0, m.stderr
        assert 'rlshim_requests_total{rule="sms",decision="denied"} 1' in \
            m.stdout, m.stdout
        man = render('rlshimctl')
        for fam in re.findall(r'^# TYPE (\S+) ', m.stdout, re.M):
            assert fam in man, f'metric family {fam} not in rlshimctl(8)'
        # raise the limit, no restart; written whole and renamed into
        # place, as rlshim.conf(5) advises
        with open(conf) as f:
            text = f.read()
        with open(conf + '.new', 'w') as f:
            f.write(text.replace('rate = 2/m', 'rate = 20/m'))
        os.rename(conf + '.new', conf)
        assert wait_for(lambda: post() == 200, 5, 0.2), open(log).read()
        assert srv.poll() is None
        assert 'configuration reloaded' in open(log).read(), open(log).read()
        m = sh(*ctl, 'metrics')
        assert re.search(r'^rlshim_config_reloads_total 1$', m.stdout, re.M), \
            m.stdout
    finally:
        end_process(srv)
        unlink_segment(shm)


def shim_starts_installed_agent():
    """With [redis], the installed shim starts the installed rlshimd (found
    at ../sbin from the library) at the first accept, logging to
    /run/rlshim/rlshimd-<shm>.log (as root), as rlshimd(8) says. Redis is a
    closed port here: the agent says so and requests still pass
    (on_store_down = open)."""
    port, dead = free_port(), free_port()
    shm = f'rlshim-inst-agent-{os.getpid()}'
    conf = os.path.join(TMP, 'agent-redis.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\n\n'
                f'[redis]\nurl = redis://127.0.0.1:{dead}/0\n\n'
                '[limit:api]\nrate = 100/s\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith('RLSHIM_')}
    env.update(RLSHIM_CONFIG=conf, LD_PRELOAD=inst('lib/librlshim.so'))
    log = os.path.join(TMP, 'agent-server.log')
    agent_log = agent_log_path(shm)
    with open(log, 'w') as out:
        srv = subprocess.Popen([inst('libexec/rlshim/legacy_server'), '-p',
                                str(port)], stdout=out, stderr=subprocess.STDOUT,
                               env=env)
    agent = None
    try:
        assert wait_for(lambda: 'listening' in open(log).read(), 10)
        rs = parse_responses(exchange(port, request('GET', '/books')),
                             first_only=True)
        assert rs and rs[0].status == 200, rs
        assert wait_for(lambda: 'started rlshimd' in open(log).read(), 5), \
            open(log).read()
        m = re.search(r'started rlshimd" path="?([^"\s]+)"? log="?([^"\s]+)',
                      open(log).read())
        assert m and os.path.realpath(m.group(1)) == \
            os.path.realpath(inst('sbin/rlshimd')), open(log).read()
        assert m.group(2) == agent_log, m.group(0)
        assert wait_for(lambda: os.path.exists(agent_log) and
                        'agent started' in open(agent_log).read(), 5)
        assert wait_for(lambda: 'store unreachable' in open(agent_log).read(), 5), \
            open(agent_log).read()
    finally:
        # the agent the shim started, whatever went wrong above
        if 'started rlshimd' in open(log).read():
            wait_for(lambda: os.path.exists(agent_log) and
                     'agent started' in open(agent_log).read(), 5)
        if os.path.exists(agent_log):
            m = re.search(r'pid=(\d+) msg="agent started"', open(agent_log).read())
            agent = int(m.group(1)) if m else None
        if agent:
            try:
                os.kill(agent, signal.SIGTERM)
                wait_for(lambda: 'agent stopped' in open(agent_log).read(), 5)
            except ProcessLookupError:
                pass
        end_process(srv)
        unlink_segment(shm)
        try:
            os.unlink(agent_log)
        except FileNotFoundError:
            pass


def completion_installed():
    """The installed bash completion, with the installed rlshimctl: the
    rule names of an installed example after `show`."""
    script = ('source "$0" || exit 9\n'
              'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _rlshimctl\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    p = sh('bash', '--norc', '-c', script,
           inst('share/bash-completion/completions/rlshimctl'),
           inst('bin/rlshimctl'), '-c',
           inst('share/doc/rlshim/examples/login-bans.conf'), 'show', '')
    assert (p.returncode, p.stdout, p.stderr) == (0, 'login\nsite\n', ''), p


# ---- the demo and uninstall ----------------------------------------------------------------

def installed_demo():
    """PREFIX/share/rlshim/demo.sh, run from elsewhere, uses the installed
    shim, server and example, and shows what `make demo` shows."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('RLSHIM_')}
    p = sh(inst('share/rlshim/demo.sh'), env=env, cwd=TMP, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert 'five POST /sms: 200 200 200 429 429' in p.stdout, p.stdout
    assert f'LD_PRELOAD={PREFIX}/lib/librlshim.so with ' \
        f'{PREFIX}/share/doc/rlshim/examples/quickstart.conf' in p.stdout, p.stdout
    assert 'Retry-After: 20' in p.stdout and 'msg="limiting"' in p.stdout, p.stdout


def uninstall():
    """make uninstall PREFIX=... leaves no file of ours, removes the rlshim
    directories, and keeps what it did not install."""
    mine = [inst('lib/other.so'), inst('share/man/man8/other.8')]
    for m in mine:
        with open(m, 'w') as f:
            f.write('not rlshim\n')
    make('uninstall', f'PREFIX={PREFIX}')
    left = files_under(PREFIX)
    assert set(left) == {'lib/other.so', 'share/man/man8/other.8'}, left
    # the directories make install created, once empty, are gone: only
    # those holding what it did not install stay
    assert dirs_under(PREFIX) == ['.', 'lib', 'share', 'share/man',
                                  'share/man/man8'], dirs_under(PREFIX)
    for d in ('lib/rlshim', 'libexec/rlshim', 'share/rlshim', 'share/doc/rlshim',
              'share/doc/rlshim/examples/prometheus'):
        assert not os.path.exists(inst(d)), d
    for m in mine:
        os.unlink(m)
    assert files_under(PREFIX) == {}
    # and again: nothing to remove is not an error
    make('uninstall', f'PREFIX={PREFIX}')


TESTS = [install, shim_needs_only_libc, build_refuses_self_calls, check_examples, man_pages_render,
         man_conf_has_every_key, man_programs_match_their_help,
         pkg_config_links, core_holds_no_shim, systemd_examples, unit_sandboxed,
         docs_installed, completion_installed,
         unit_command_line_runs,
         unit_xdp_capabilities, unit_syscalls_allowed,
         watch_and_change_live, shim_starts_installed_agent, installed_demo,
         uninstall, destdir]


def main():
    try:
        return run('install', [(f'install: {t.__name__}', t) for t in TESTS])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
