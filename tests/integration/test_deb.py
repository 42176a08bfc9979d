#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_deb.py - the Debian packages, as README's "Debian packages" says:
`dpkg-buildpackage -us -uc -b` in a clean copy of the tree (its tracked
files, as a clone has them, in a temporary git repository) builds librlshim,
rlshim and librlcore-dev (everything its Build-Depends names, tools/deps.sh
installs), and leaves `git status` clean; lintian finds no
error in them; each key file is in its package, and no file in two; the
version is the Makefile's; the unit is shipped but neither enabled nor
started; `apt install` of them resolves (simulated: a real one would change
this machine). Unpacked with `dpkg -x` instead:
the programs say their version, rlshimctl passes the shipped examples, the
unit and the drop-in name files the packages hold, a server under the
packaged shim gets 429 past its limit, and a program built with the
packaged rlcore.pc links the packaged core.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, check_example, exchange, parse_responses, request,  # noqa: E402
                     run, wait_for)
from servers import end_process, free_port, unlink_segment  # noqa: E402

TMP = tempfile.mkdtemp(prefix='rlshim-deb-')
SRC = os.path.join(TMP, 'rlshim')
ROOT = os.path.join(TMP, 'root')
PACKAGES = ('librlshim', 'rlshim', 'librlcore-dev')
BUILT = {}  # package -> path of its .deb


def sh(*args, env=None, cwd=None, timeout=60):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def multiarch():
    return sh('dpkg-architecture', '-qDEB_HOST_MULTIARCH').stdout.strip()


def version():
    with open(os.path.join(REPO, 'Makefile')) as f:
        return re.search(r'^RLSHIM_VERSION := (\S+)$', f.read(), re.M).group(1)


def copy_tree():
    """The tree's tracked files, as they are now, in a new git repository
    (nothing of build/ or of another build's debian/)."""
    files = sh('git', '-C', REPO, 'ls-files', '-z').stdout.split('\0')
    for rel in filter(None, files):
        src = os.path.join(REPO, rel)
        if not os.path.lexists(src):
            continue  # deleted, not yet committed
        dst = os.path.join(SRC, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    git = ['git', '-C', SRC, '-c', 'user.name=test', '-c',
           'user.email=test@rlshim.invalid']
    for args in (['init', '-q'], ['add', '-A'], ['commit', '-q', '-m', 'tree']):
        p = sh(*git, *args)
        assert p.returncode == 0, (args, p.stderr)


def debs():
    assert BUILT, 'the build failed'
    return BUILT


# ---- the build ------------------------------------------------------------------------

def build_depends_in_deps():
    """Every package debian/control's Build-Depends names is one
    tools/deps.sh installs, and so are the packaging tools (and git, for
    the copy of the tree this test builds in)."""
    with open(os.path.join(REPO, 'debian', 'control')) as f:
        m = re.search(r'^Build-Depends:(.*?)^\S', f.read(), re.M | re.S)
    need = {re.match(r'\s*([a-z0-9][a-z0-9.+-]*)', d).group(1)
            for d in m.group(1).split(',') if d.strip()}
    need.discard('debhelper-compat')
    assert {'clang', 'libbpf-dev', 'libhiredis-dev'} <= need, need
    p = sh('sh', os.path.join(REPO, 'tools', 'deps.sh'), '--list')
    assert p.returncode == 0, p.stderr
    have = set(p.stdout.split())
    need |= {'debhelper', 'dpkg-dev', 'fakeroot', 'lintian', 'git'}
    assert need <= have, sorted(need - have)


def build():
    """dpkg-buildpackage -us -uc -b in the copy builds the three packages
    (and their -dbgsym), at the Makefile's version, and the tree it ran in
    is as clean for git as before."""
    copy_tree()
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'SANITIZE',
                        'DEB_BUILD_OPTIONS', 'CFLAGS', 'LDFLAGS')}
    p = sh('dpkg-buildpackage', '-us', '-uc', '-b', cwd=SRC, env=env,
           timeout=900)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    # the unit tests ran, and passed
    assert re.search(r'^\d+ passed, 0 failed$', p.stdout, re.M), p.stdout[-2000:]
    v = version()
    for pkg in PACKAGES:
        path = os.path.join(TMP, f'{pkg}_{v}-1_{arch()}.deb')
        assert os.path.exists(path), (path, sorted(os.listdir(TMP)))
        BUILT[pkg] = path
    st = sh('git', '-C', SRC, 'status', '--porcelain', '--ignored=no')
    assert st.returncode == 0 and st.stdout == '', st.stdout


def arch():
    return sh('dpkg', '--print-architecture').stdout.strip()


def lintian_clean():
    """lintian on the .changes: no E: line (overrides are in debian/)."""
    changes = os.path.join(TMP, f'rlshim_{version()}-1_{arch()}.changes')
    assert os.path.exists(changes), sorted(os.listdir(TMP))
    p = sh('lintian', changes, timeout=300)
    errors = [line for line in p.stdout.splitlines() if line.startswith('E: ')]
    assert not errors and p.returncode == 0, (p.stdout, p.stderr)
    for line in p.stdout.splitlines():
        print(f'  lintian: {line}')


def contents(deb):
    """The files (and links) of a .deb, as absolute paths."""
    p = sh('dpkg-deb', '--contents', deb)
    assert p.returncode == 0, p.stderr
    out = set()
    for line in p.stdout.splitlines():
        name = line.split(None, 5)[5].split(' -> ')[0]
        if not name.endswith('/'):
            out.add(name[1:])
    return out


def field(deb, name):
    p = sh('dpkg-deb', '-f', deb, name)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def files_in_packages():
    """Each key file is in the package the README names, none is in two,
    the documents the examples and the unit the documents name are not
    compressed, and rlshim needs the very librlshim it was built with."""
    ma = multiarch()
    want = {
        'librlshim': ['/usr/lib/librlshim.so', '/usr/lib/rlshim/rlshim.bpf.o',
                      '/usr/share/man/man7/librlshim.7.gz'],
        'rlshim': ['/usr/sbin/rlshimd', '/usr/bin/rlshimctl',
                   '/usr/share/man/man5/rlshim.conf.5.gz',
                   '/usr/share/man/man8/rlshimd.8.gz',
                   '/usr/share/man/man8/rlshimctl.8.gz',
                   '/lib/systemd/system/rlshimd.service',
                   '/usr/share/doc/rlshim/systemd/rlshimd.service',
                   '/usr/share/doc/rlshim/systemd/rlshim-preload.conf',
                   '/usr/share/doc/rlshim/examples/quickstart.conf',
                   '/usr/libexec/rlshim/legacy_server',
                   '/usr/share/rlshim/demo.sh',
                   '/usr/share/bash-completion/completions/rlshimctl',
                   '/usr/share/doc/rlshim/examples/prometheus/rlshim-alerts.yml',
                   '/usr/share/doc/rlshim/examples/grafana/rlshim-dashboard.json'],
        'librlcore-dev': ['/usr/include/rlshim.h', f'/usr/lib/{ma}/librlcore.a',
                          f'/usr/lib/{ma}/pkgconfig/rlcore.pc'],
    }
    have = {pkg: contents(deb) for pkg, deb in debs().items()}
    for pkg, files in want.items():
        missing = [f for f in files if f not in have[pkg]]
        assert not missing, (pkg, missing, sorted(have[pkg]))
    seen = {}
    for pkg, files in have.items():
        for f in files:
            assert f not in seen, (f, seen.get(f), pkg)
            seen[f] = pkg
    examples = [f for f in have['rlshim']
                if f.startswith('/usr/share/doc/rlshim/examples/')
                and f.endswith('.conf')]
    with_conf = [n for n in os.listdir(os.path.join(REPO, 'examples'))
                 if n.endswith('.conf')]
    assert sorted(os.path.basename(f) for f in examples) == sorted(with_conf), \
        examples
    v = f'{version()}-1'
    assert field(debs()['rlshim'], 'Version') == v
    assert f'librlshim (= {v})' in field(debs()['rlshim'], 'Depends'), \
        field(debs()['rlshim'], 'Depends')
    # The completion it ships is loaded by bash-completion.
    assert 'bash-completion' in field(debs()['rlshim'], 'Suggests').split(', '), \
        field(debs()['rlshim'], 'Suggests')


def unit_not_enabled():
    """The maintainer scripts never enable or start rlshimd.service: its
    User= must first be the servers' user (rlshimd(8))."""
    d = os.path.join(TMP, 'control')
    p = sh('dpkg-deb', '-e', debs()['rlshim'], d)
    assert p.returncode == 0, p.stderr
    scripts = ''
    for n in ('preinst', 'postinst', 'prerm', 'postrm'):
        if os.path.exists(os.path.join(d, n)):
            with open(os.path.join(d, n)) as f:
                scripts += f.read()
    assert 'rlshimd.service' in scripts, scripts  # dh_installsystemd ran
    for line in scripts.splitlines():
        assert not re.search(r'deb-systemd-invoke .*\bstart\b', line), line
        # enabled only where the administrator had enabled it before
        if re.search(r"deb-systemd-helper enable 'rlshimd", line):
            assert 'was-enabled' in scripts, scripts


def apt_would_install():
    """`apt install` of the three .deb files resolves on this Debian
    machine: simulated (apt-get -s), which installs nothing."""
    p = sh('apt-get', '-s', 'install', *debs().values(), cwd=TMP, timeout=120)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    for pkg in PACKAGES:
        assert re.search(rf'^Inst {re.escape(pkg)} \({re.escape(version())}-1 ',
                         p.stdout, re.M), (pkg, p.stdout[-2000:])


# ---- unpacked ---------------------------------------------------------------------

def unpack():
    if not os.path.isdir(ROOT):
        for deb in debs().values():
            p = sh('dpkg-deb', '-x', deb, ROOT)
            assert p.returncode == 0, p.stderr
    return ROOT


def at(path):
    return os.path.join(unpack(), path.lstrip('/'))


def programs_run():
    """The unpacked rlshimctl and rlshimd say the Makefile's version, and
    rlshimctl passes every shipped example."""
    for prog in ('/usr/bin/rlshimctl', '/usr/sbin/rlshimd'):
        p = sh(at(prog), '--version')
        assert p.returncode == 0 and \
            p.stdout == f'{os.path.basename(prog)} {version()}\n', \
            (prog, p.stdout, p.stderr)
    ex = at('/usr/share/doc/rlshim/examples')
    for n in sorted(n for n in os.listdir(ex) if n.endswith('.conf')):
        p = check_example(at('/usr/bin/rlshimctl'), os.path.join(ex, n))
        assert p.returncode == 0 and ': ok,' in p.stdout, (n, p.stdout, p.stderr)


def unit_names_packaged_files():
    """The unit's ExecStart= and the drop-in's LD_PRELOAD= name files the
    packages hold; the unit systemd reads is the documented one."""
    with open(at('/lib/systemd/system/rlshimd.service')) as f:
        unit = f.read()
    with open(at('/usr/share/doc/rlshim/systemd/rlshimd.service')) as f:
        assert f.read() == unit
    m = re.search(r'^ExecStart=(\S+) --foreground$', unit, re.M)
    assert m and m.group(1) == '/usr/sbin/rlshimd', unit
    assert os.access(at(m.group(1)), os.X_OK)
    with open(at('/usr/share/doc/rlshim/systemd/rlshim-preload.conf')) as f:
        m = re.search(r'^Environment=LD_PRELOAD=(\S+)$', f.read(), re.M)
    assert m and m.group(1) == '/usr/lib/librlshim.so', m
    assert os.path.isfile(at(m.group(1)))


def shim_limits_a_server():
    """The unpacked legacy_server under the unpacked librlshim.so: 200, 200,
    then 429 with rate = 2/m."""
    port = free_port()
    shm = f'rlshim-deb-{os.getpid()}'
    conf = os.path.join(TMP, 'deb.conf')
    with open(conf, 'w') as f:
        f.write(f'[global]\nports = {port}\nshm = {shm}\n\n'
                '[limit:sms]\nmatch = POST /sms\nrate = 2/m\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith('RLSHIM_')}
    env.update(RLSHIM_CONFIG=conf, LD_PRELOAD=at('/usr/lib/librlshim.so'))
    log = os.path.join(TMP, 'server.log')
    with open(log, 'w') as out:
        srv = subprocess.Popen([at('/usr/libexec/rlshim/legacy_server'), '-p',
                                str(port)], stdout=out,
                               stderr=subprocess.STDOUT, env=env)

    def post():
        rs = parse_responses(exchange(port, request('POST', '/sms')),
                             first_only=True)
        return rs[0].status if rs else None

    try:
        assert wait_for(lambda: 'listening' in open(log).read(), 10), \
            open(log).read()
        assert [post() for _ in range(3)] == [200, 200, 429], open(log).read()
        assert 'msg="limiting"' in open(log).read(), open(log).read()
    finally:
        end_process(srv)
        unlink_segment(shm)


GCRA_PROGRAM = r'''
#include <rlshim.h>
#include <stdio.h>

int main(void)
{
	struct rl_rate rate = { 1000000000ull, 10, 10 };
	uint64_t tat = 0, now = rl_time_now_ns();
	struct rl_result r;

	rl_gcra_step(&tat, &rate, 3, now, &r);
	printf("allowed %d remaining %u\n", r.allowed, r.remaining);
	return 0;
}
'''


def core_links():
    """A program built with the packaged rlcore.pc (under the unpacked
    root) against the packaged header and archive alone gets GCRA's
    numbers."""
    ma = multiarch()
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=unpack(),
               PKG_CONFIG_LIBDIR=at(f'/usr/lib/{ma}/pkgconfig'))
    flags = sh('pkg-config', '--cflags', '--libs', 'rlcore', env=env)
    assert flags.returncode == 0, flags.stderr
    assert f'-I{at("/usr/include")}' in flags.stdout, flags.stdout
    assert f'-L{at(f"/usr/lib/{ma}")}' in flags.stdout, flags.stdout
    src, exe = os.path.join(TMP, 'gcra.c'), os.path.join(TMP, 'gcra')
    with open(src, 'w') as f:
        f.write(GCRA_PROGRAM)
    cc = sh('cc', '-Wall', '-Werror', '-o', exe, src, *flags.stdout.split())
    assert cc.returncode == 0, (flags.stdout, cc.stderr)
    out = sh(exe)
    assert out.returncode == 0 and out.stdout == 'allowed 1 remaining 7\n', \
        out.stdout


TESTS = [build_depends_in_deps, build, lintian_clean, files_in_packages,
         unit_not_enabled, apt_would_install, programs_run,
         unit_names_packaged_files, shim_limits_a_server, core_links]


def main():
    try:
        return run('deb', [(f'deb: {t.__name__}', t) for t in TESTS])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
