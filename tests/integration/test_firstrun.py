#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_firstrun.py - what a newcomer meets first: the README's two commands
on a fresh Debian machine, and the documents they read.

tools/deps.sh runs with stand-in apt-get, dpkg-query and id first on PATH
(each call recorded) and RLSHIM_POLICY_RC_D naming a policy-rc.d of the
test's own, never /usr/sbin/policy-rc.d: a missing package is installed and
nothing else, nothing missing calls no apt-get, a failing apt-get fails with
a message that names the packages and the command, a policy-rc.d that was
there is left as it was, one that was not is there (and says 101) while
apt-get runs and gone afterwards; the Makefile's deps target gets exit 0 from
it where a policy-rc.d already exists (make used to stop with "Error 1");
`make demo` shows what the README shows, and cleans up after itself even
when its server exits non-zero; every relative link of README.md
and docs/*.md leads to a file of the repository (and an anchor to a
heading); docs/REFERENCE.md has every configuration key, command, option and
environment variable the code has; the documents speak to users (no seed,
no issue numbers, terms defined before use); the scripts pass shellcheck.

The copy-paste path of the README's install section, as a newcomer runs it
against a real nginx on a free port: examples/rlshim.conf copied as the
README says (its `ports` set to that port, the one edit the README names,
and a segment of the test's own), nginx started as the README's line does;
its clients get 429s past the rule, its log says "limiting", and `rlshimctl
status` reads the segment. With `ports` naming another port, nginx's
requests pass, each worker process says once that it accepts outside
`ports` (the port and the ports guarded), and `rlshimctl status` says that
nginx listens outside `ports`, not that nothing has been accepted.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, run, exchange, request, parse_responses  # noqa: E402
import servers  # noqa: E402

TMP = tempfile.mkdtemp(prefix='rlshim-firstrun-')
DEPS = os.path.join(REPO, 'tools', 'deps.sh')
REAL_POLICY = '/usr/sbin/policy-rc.d'

# The stand-ins. State lives in $FAKE_STATE: `installed` (what dpkg has),
# `apt_mode` (ok: installs what it is asked; fail: refuses; noop: says yes
# and installs nothing), `uid`, and `calls`, one line per apt-get call
# followed by what policy-rc.d was at that moment.
FAKE_DPKG_QUERY = r'''#!/bin/sh
# dpkg-query -W -f='${Status}' PKG
for p; do :; done
if grep -qx -- "$p" "$FAKE_STATE/installed"; then
	printf 'install ok installed'
	exit 0
fi
echo "dpkg-query: no packages found matching $p" >&2
exit 1
'''

FAKE_APT_GET = r'''#!/bin/sh
echo "apt-get $*" >>"$FAKE_STATE/calls"
policy=$RLSHIM_POLICY_RC_D
if [ -x "$policy" ]; then
	"$policy" nginx start >/dev/null 2>&1
	echo "policy-rc.d: exits $?" >>"$FAKE_STATE/calls"
else
	echo "policy-rc.d: absent" >>"$FAKE_STATE/calls"
fi
mode=$(cat "$FAKE_STATE/apt_mode")
case "$1" in
update) exit 0 ;;
install) ;;
*) exit 0 ;;
esac
case "$mode" in
fail)
	echo "E: Unable to locate package $(echo "$*" | awk '{print $NF}')" >&2
	exit 100 ;;
noop) exit 0 ;;
esac
for a; do
	case "$a" in
	-*|install) ;;
	*) echo "$a" >>"$FAKE_STATE/installed" ;;
	esac
done
exit 0
'''

FAKE_ID = r'''#!/bin/sh
[ "${1:-}" = -u ] && { cat "$FAKE_STATE/uid"; exit 0; }
exec /usr/bin/id "$@"
'''


def all_packages():
    p = subprocess.run(['sh', DEPS, '--list'], capture_output=True, text=True,
                       env=dict(os.environ, PATH=fake_path()), timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def fake_bin():
    d = os.path.join(TMP, 'bin')
    if not os.path.isdir(d):
        os.makedirs(d)
        for name, text in (('dpkg-query', FAKE_DPKG_QUERY),
                           ('apt-get', FAKE_APT_GET), ('id', FAKE_ID)):
            path = os.path.join(d, name)
            with open(path, 'w') as f:
                f.write(text)
            os.chmod(path, 0o755)
    return d


def fake_path():
    return fake_bin() + ':' + os.environ.get('PATH', '/usr/bin:/bin')


class Host:
    """A pretend Debian host: which packages are installed, what apt-get
    does, who runs deps.sh, and whether policy-rc.d exists."""

    def __init__(self, name, missing=(), apt='ok', uid=0, policy=None):
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir)
        self.policy = os.path.join(self.dir, 'policy-rc.d')
        pkgs = all_packages()
        for m in missing:
            assert m in pkgs, m
        self.write('installed', ''.join(p + '\n' for p in pkgs
                                        if p not in missing))
        self.write('apt_mode', apt + '\n')
        self.write('uid', f'{uid}\n')
        self.write('calls', '')
        if policy is not None:
            with open(self.policy, 'w') as f:
                f.write(policy)
            os.chmod(self.policy, 0o755)

    def write(self, name, text):
        with open(os.path.join(self.dir, name), 'w') as f:
            f.write(text)

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL')}
        env.update(PATH=fake_path(), FAKE_STATE=self.dir,
                   RLSHIM_POLICY_RC_D=self.policy)
        return env

    def deps(self, *args):
        return subprocess.run(['sh', DEPS, *args], capture_output=True,
                              text=True, env=self.env(), timeout=60)

    def calls(self):
        """The apt-get calls: [(argv text, what policy-rc.d was)]."""
        lines = self.read('calls').splitlines()
        return list(zip(lines[0::2], lines[1::2]))

    def installs(self):
        return [c for c, _ in self.calls() if c.startswith('apt-get install')]


def real_policy_state():
    try:
        st = os.lstat(REAL_POLICY)
    except FileNotFoundError:
        return None
    with open(REAL_POLICY, 'rb') as f:
        return (st.st_mode, st.st_mtime_ns, f.read())


# ---- tools/deps.sh ----------------------------------------------------------------

def deps_package_missing():
    """One package missing: apt-get install is called with that one only,
    exit 0, and it is installed afterwards."""
    h = Host('missing', missing=['wrk'])
    p = h.deps()
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert 'installing Debian packages: wrk' in p.stderr, p.stderr
    inst = h.installs()
    assert inst and all([a for a in c.split()[2:] if not a.startswith('-')] ==
                        ['wrk'] for c in inst), inst
    assert inst[0] == 'apt-get install -y --no-install-recommends wrk', inst
    assert 'wrk' in h.read('installed').split()
    assert h.deps('--check').returncode == 0


def deps_nothing_missing():
    """Nothing missing: no apt-get call, no policy-rc.d, exit 0 silently;
    --check says so too."""
    h = Host('none')
    p = h.deps()
    assert p.returncode == 0 and p.stdout == '' and p.stderr == '', \
        (p.returncode, p.stdout, p.stderr)
    assert h.calls() == [], h.calls()
    assert not os.path.lexists(h.policy)
    c = h.deps('--check')
    assert c.returncode == 0 and c.stderr == '', c.stderr


def deps_apt_get_fails():
    """apt-get failing (even after an update): exit 1, and the last lines
    say that apt-get failed, which packages are still missing and the
    command to run; the policy-rc.d it wrote is gone."""
    h = Host('fail', missing=['hping3', 'wrk'], apt='fail')
    p = h.deps()
    assert p.returncode == 1, (p.returncode, p.stderr)
    tail = p.stderr.strip().splitlines()[-3:]
    assert tail[0] == 'rlshim: apt-get install failed; the Debian packages ' \
        'still missing: wrk hping3', p.stderr
    assert tail[-1].strip() == 'apt-get update && apt-get install -y ' \
        '--no-install-recommends wrk hping3', p.stderr
    assert 'E: Unable to locate package' in p.stderr, p.stderr  # apt's own
    cmds = [c for c, _ in h.calls()]
    assert cmds[0].startswith('apt-get install') and \
        'apt-get update -q' in cmds and cmds[-1].startswith('apt-get install'), cmds
    assert not os.path.lexists(h.policy), 'policy-rc.d left behind'


def deps_apt_get_installs_nothing():
    """apt-get says yes but the packages are still not installed: exit 1
    with a message naming them."""
    h = Host('noop', missing=['wrk'], apt='noop')
    p = h.deps()
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert 'did not install everything; the Debian packages still missing: ' \
        'wrk' in p.stderr, p.stderr
    assert not os.path.lexists(h.policy)


def deps_not_root():
    """Not root: the one apt-get line to run, exit 1, no apt-get call."""
    h = Host('user', missing=['wrk', 'strace'], uid=1000)
    p = h.deps()
    assert p.returncode == 1, p.returncode
    assert p.stderr.splitlines()[-1].strip() == \
        'apt-get install -y --no-install-recommends wrk strace', p.stderr
    assert h.calls() == [] and not os.path.lexists(h.policy)


def deps_policy_present_before():
    """A policy-rc.d that was there (Debian's container images ship one) is
    used as it is and left in place, unchanged; exit 0 (the EXIT trap used
    to make it 1)."""
    text = '#!/bin/sh\n# the image\'s own\nexit 101\n'
    h = Host('policy-there', missing=['wrk'], policy=text)
    os.chmod(h.policy, 0o750)
    before = os.stat(h.policy)
    p = h.deps()
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert h.installs(), h.calls()
    assert all(pol == 'policy-rc.d: exits 101' for _, pol in h.calls()), h.calls()
    after = os.stat(h.policy)
    with open(h.policy) as f:
        assert f.read() == text
    assert (after.st_mode, after.st_mtime_ns, after.st_ino) == \
        (before.st_mode, before.st_mtime_ns, before.st_ino)


def deps_policy_absent_before():
    """No policy-rc.d before: one that exits 101 (services do not start)
    is there while apt-get runs, and removed afterwards."""
    h = Host('policy-absent', missing=['nginx', 'wrk'])
    p = h.deps()
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert h.calls() and all(pol == 'policy-rc.d: exits 101'
                             for _, pol in h.calls()), h.calls()
    assert not os.path.lexists(h.policy), 'policy-rc.d left behind'


def deps_real_policy_untouched():
    """None of the runs above touched the real /usr/sbin/policy-rc.d."""
    assert real_policy_state() == REAL_BEFORE, 'the real policy-rc.d changed'


def make_deps_exit_status():
    """`make deps` (the first step of `make demo` and `make test`) on a host
    with a policy-rc.d and a package missing: deps.sh installs it, make
    exits 0 and writes its stamp."""
    h = Host('make', missing=['wrk'], policy='#!/bin/sh\nexit 101\n')
    stamp = os.path.join(h.dir, 'deps-ok')
    p = subprocess.run(['make', '--no-print-directory', '-C', REPO,
                        f'DEPS_STAMP={stamp}', 'deps'], capture_output=True,
                       text=True, env=h.env(), timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert 'Error' not in p.stdout + p.stderr, p.stderr
    assert h.installs() and os.path.exists(stamp), (h.calls(), p.stderr)
    assert os.path.exists(h.policy)


# ---- make demo ----------------------------------------------------------------------

def make_demo():
    """`make demo` exits 0 and shows what the README says it shows."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'SANITIZE')
           and not k.startswith('RLSHIM_')}
    p = subprocess.run(['make', '--no-print-directory', '-C', REPO, 'demo'],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert 'five POST /sms: 200 200 200 429 429' in p.stdout, p.stdout
    with open(os.path.join(REPO, 'README.md')) as f:
        readme = f.read()
    assert 'five POST /sms: 200 200 200 429 429' in readme
    for field in ('HTTP/1.1 429 Too Many Requests', 'Retry-After: 20',
                  'RateLimit-Limit: 3', 'RateLimit-Remaining: 0',
                  'RateLimit-Reset: 60', 'Cache-Control: no-store'):
        assert field in p.stdout and field in readme, field
    assert re.search(r'^Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$',
                     p.stdout, re.M), p.stdout


def demo_cleans_up():
    """tools/demo.sh with a server that exits 1 when stopped (a wrapper
    around legacy_server): the demo still exits 0, its segment and its
    temporary directory are gone, and the server with them."""
    wrapper = os.path.join(TMP, 'failing_server')
    with open(wrapper, 'w') as f:
        f.write('#!/bin/sh\n"$REAL_LEGACY" "$@" &\np=$!\n'
                "trap 'kill $p; wait $p; exit 1' TERM\nwait $p\n")
    os.chmod(wrapper, 0o755)
    tmpdir = os.path.join(TMP, 'demo-tmp')
    os.makedirs(tmpdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith('RLSHIM_')}
    env.update(RLSHIM_LEGACY=wrapper, TMPDIR=tmpdir,
               REAL_LEGACY=os.path.join(REPO, 'build', 'legacy_server'))
    before = {n for n in os.listdir('/dev/shm') if n.startswith('rlshim-demo-')}
    p = subprocess.run(['sh', os.path.join(REPO, 'tools', 'demo.sh'), 'build'],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert 'five POST /sms: 200 200 200 429 429' in p.stdout, p.stdout
    after = {n for n in os.listdir('/dev/shm') if n.startswith('rlshim-demo-')}
    assert after <= before, after - before
    assert os.listdir(tmpdir) == [], os.listdir(tmpdir)
    port = re.search(r'on port (\d+)', p.stdout).group(1)
    with socket.socket() as c:
        assert c.connect_ex(('127.0.0.1', int(port))) != 0, 'server left running'


# ---- the documents' links ---------------------------------------------------------------

def markdown_files():
    docs = os.path.join(REPO, 'docs')
    return [os.path.join(REPO, 'README.md')] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith('.md'))


def prose(text):
    """The text without fenced code blocks and inline code."""
    text = re.sub(r'^(```|~~~).*?^\1[^\n]*$', '', text, flags=re.M | re.S)
    return re.sub(r'`[^`\n]*`', '', text)


def links(text):
    """Inline links and images [x](target "title"), and reference
    definitions [x]: target."""
    out = re.findall(r'\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)', text)
    out += re.findall(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)', text, re.M)
    return out


def anchors(path):
    """GitHub's heading ids of a Markdown file."""
    with open(path) as f:
        text = re.sub(r'^(```|~~~).*?^\1[^\n]*$', '', f.read(),
                      flags=re.M | re.S)
    ids = set()
    seen = {}
    for h in re.findall(r'^#{1,6}\s+(.*?)\s*#*\s*$', text, re.M):
        h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)  # a link's text
        slug = re.sub(r'[^\w\- ]', '', h.lower()).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        ids.add(slug if n == 0 else f'{slug}-{n}')
    ids.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', text))
    return ids


def doc_links_resolve():
    """Every relative link in README.md and docs/*.md names a file (or
    directory) inside the repository, outside build/, and an anchor names a
    heading of its Markdown file."""
    root = os.path.realpath(REPO)
    bad = []
    count = 0
    for md in markdown_files():
        with open(md) as f:
            text = prose(f.read())
        for target in links(text):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I) or \
                    target.startswith('//'):
                continue  # https:, mailto:, man: ...
            count += 1
            where = f'{os.path.relpath(md, REPO)}: ({target})'
            path, _, frag = target.partition('#')
            dest = os.path.realpath(os.path.join(os.path.dirname(md), path)) \
                if path else os.path.realpath(md)
            if not (dest == root or dest.startswith(root + os.sep)):
                bad.append(f'{where} leaves the repository')
            elif dest.startswith(os.path.join(root, 'build') + os.sep):
                bad.append(f'{where} is a build product')
            elif not os.path.exists(dest):
                bad.append(f'{where} does not exist')
            elif frag and dest.endswith('.md') and frag not in anchors(dest):
                bad.append(f'{where}: no heading #{frag}')
    assert not bad, '\n'.join(bad)
    assert count >= 10, count  # the check did see the links


def link_checker_catches():
    """The link check itself: it finds a broken link, one out of the tree,
    and a bad anchor, and ignores code and URLs."""
    text = prose('see [a](docs/nothing.md), [b](../shared/DESIGN.md), '
                 '[c](https://example.com/x) `[d](no.md)`\n'
                 '```\n[e](no.md)\n```\n[f]: README.md#nope\n')
    assert links(text) == ['docs/nothing.md', '../shared/DESIGN.md',
                           'https://example.com/x', 'README.md#nope'], \
        links(text)
    assert 'what-make-demo-shows' in anchors(os.path.join(REPO, 'README.md'))


# ---- the reference -----------------------------------------------------------------

REFERENCE = os.path.join(REPO, 'docs', 'REFERENCE.md')
# Keys docs/REFERENCE.md lists as not implemented: once the parser knows
# one, it belongs in its section's table instead.
NOT_IMPLEMENTED = ['cluster_shards']


def section(text, heading):
    """The text of a Markdown section, from its heading to the next one of
    the same or a higher level."""
    level = len(heading) - len(heading.lstrip('#'))
    start = text.index('\n' + heading + '\n') + 1
    nxt = re.compile(r'^#{1,%d} ' % level, re.M).search(text, start + 1)
    return text[start:nxt.start() if nxt else len(text)]


def sources():
    out = ''
    for d, _, names in os.walk(os.path.join(REPO, 'src')):
        for n in names:
            if n.endswith('.c') or n.endswith('.h'):
                with open(os.path.join(d, n)) as f:
                    out += f.read()
    return out


def reference_is_complete():
    """docs/REFERENCE.md has a row for every key the parser knows, in its
    section's table; every command of `rlshimctl --help` and option of
    `rlshimd --help`; every environment variable the programs and scripts
    read; and what it calls not implemented is not in the parser."""
    with open(REFERENCE) as f:
        ref = f.read()
    src = sources()
    keys = re.findall(r'\{\s*SEC_(GLOBAL|REDIS|XDP|LIMIT),\s*"([a-z0-9_]+)"', src)
    assert len(keys) >= 30, keys
    heads = {'GLOBAL': '### [global]', 'REDIS': '### [redis]',
             'XDP': '### [xdp]', 'LIMIT': '### [limit:NAME]'}
    for sec, key in keys:
        assert re.search(r'^\| `' + key + r'` \|', section(ref, heads[sec]),
                         re.M), f'{key} of [{sec.lower()}] has no row'
    for key in NOT_IMPLEMENTED:
        assert key not in {k for _, k in keys}, \
            f'{key} is implemented now: document it in its section'
        assert f'`{key}`' in section(ref, '## 14. Not implemented'), key

    ctl = subprocess.run([os.path.join(REPO, 'build', 'rlshimctl'), '--help'],
                         capture_output=True, text=True, timeout=10)
    assert ctl.returncode == 0, ctl.stderr
    cmds = re.findall(r'^  ([a-z]+) ', ctl.stdout.split('\n\n')[1], re.M)
    assert {'status', 'check', 'ban', 'xdp'} <= set(cmds), cmds
    text = section(ref, '## 7. rlshimctl')
    for c in cmds:
        assert re.search(r'^\| `' + c + r'\b', text, re.M), f'rlshimctl {c}'
    agent = subprocess.run([os.path.join(REPO, 'build', 'rlshimd'), '--help'],
                           capture_output=True, text=True, timeout=10)
    assert agent.returncode == 0, agent.stderr
    text = section(ref, '## 8. rlshimd')
    for o in set(re.findall(r'(?<![\w-])(--?[a-z][a-z-]*)', agent.stdout)):
        assert re.search(r'^\| `' + re.escape(o) + r'\b', text, re.M), o

    env = set(re.findall(r'getenv\("([A-Z_]+)"\)', src))
    env |= set(re.findall(r'#define RL_\w+_ENV "([A-Z_]+)"', src))
    for sh in ('demo.sh', 'deps.sh'):
        with open(os.path.join(REPO, 'tools', sh)) as f:
            env |= set(re.findall(r'\$\{(RLSHIM_[A-Z_]+)[:}]', f.read()))
    assert {'RLSHIM_CONFIG', 'RLSHIM_AGENT', 'RLSHIM_POLICY_RC_D'} <= env, env
    text = section(ref, '## 11. Environment variables')
    for v in env:
        assert f'`{v}`' in text, f'{v} is not in the environment table'


# ---- the copy-paste path: examples/rlshim.conf in front of nginx ---------------------

EXAMPLE = os.path.join(REPO, 'examples', 'rlshim.conf')
CTL = os.path.join(REPO, 'build', 'rlshimctl')


def readme_copies_the_example():
    """The README's install section copies examples/rlshim.conf to
    /etc/rlshim.conf and names what to edit; the example guards 80 and 443
    with one rule and passes `rlshimctl check`."""
    with open(os.path.join(REPO, 'README.md')) as f:
        inst = section(f.read(), '## Installing')
    assert re.search(r'^    cp \S+/examples/rlshim\.conf /etc/rlshim\.conf$',
                     inst, re.M), inst
    assert 'quickstart.conf /etc/rlshim.conf' not in inst
    for what in ('`ports`', '`rate`', '`burst`', 'accepting on a port outside ports'):
        assert what in inst, what
    with open(EXAMPLE) as f:
        text = f.read()
    assert re.search(r'^ports = 80, 443\b', text, re.M), text
    assert re.search(r'^shm = rlshim\b', text, re.M), text
    p = subprocess.run([CTL, 'check', EXAMPLE], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 0 and 'ok, 1 rule' in p.stdout, p


def newcomer_config(ports, name):
    """examples/rlshim.conf as the README has it copied, `ports` edited as
    it says (the test's nginx cannot take 80), in a segment of its own."""
    with open(EXAMPLE) as f:
        text = f.read()
    text = re.sub(r'^ports = .*$', f'ports = {ports}', text, count=1, flags=re.M)
    shm = f'rlshim-firstrun-{name}-{os.getpid()}'
    text = re.sub(r'^shm = \S+', f'shm = {shm}', text, count=1, flags=re.M)
    path = os.path.join(TMP, f'{name}.conf')
    with open(path, 'w') as f:
        f.write(text)
    return path, shm


def get_statuses(port, n):
    out = []
    for _ in range(n):
        r = parse_responses(exchange(port, request('GET', '/books')), first_only=True)
        out.append(r[0].status if r else None)
    return out


def nginx_server(name, port, conf):
    if not servers.available('nginx'):
        raise AssertionError('nginx is not installed: tools/deps.sh installs it')
    return servers.Server('nginx', os.path.join(TMP, name), str(servers.SHIM),
                          conf, port)


def copied_config_protects_nginx():
    """nginx under the copied example: past the burst of 100 its clients
    get 429, its log has the "limiting" line and no warning of a port
    outside `ports`, and `rlshimctl status` shows the rule."""
    port = servers.free_port()
    conf, shm = newcomer_config(str(port), 'guarded')
    srv = nginx_server('nginx-guarded', port, conf)
    srv.start()
    try:
        got = get_statuses(port, 130)
        assert got[:90] == [200] * 90, got
        assert 429 in got[100:], got
        log = srv.stderr_text()
        assert 'msg="limiting"' in log and f'shm={shm}' in log, log
        assert 'outside ports' not in log, log
        p = subprocess.run([CTL, '-c', conf, 'status'], capture_output=True,
                           text=True, timeout=10)
        assert p.returncode == 0, p
        assert 'site' in p.stdout, p.stdout
    finally:
        servers.stop_with_segment(srv, shm)


def port_outside_ports_is_said():
    """`ports` naming another port than nginx's: its requests pass, each
    process that accepts says once, in nginx's log, that it accepts outside
    `ports`, with the port and the ports guarded; `rlshimctl status` does
    not say that no server has accepted a connection, but that nginx listens
    outside `ports`, and what to edit."""
    port, other = servers.free_port(), servers.free_port()
    conf, shm = newcomer_config(f'{other}, 443', 'outside')
    srv = nginx_server('nginx-outside', port, conf)
    srv.start()
    try:
        got = get_statuses(port, 120)
        assert got == [200] * 120, got
        log = srv.stderr_text()
        warns = re.findall(r'pid=(\d+) msg="accepting on a port outside '
                           r'ports[^"]*" port=(\d+) ports=(\S+)', log)
        assert warns, log
        pids = [w[0] for w in warns]
        assert len(pids) == len(set(pids)), warns   # once per process
        assert {(w[1], w[2]) for w in warns} == {(str(port), f'{other},443')}, warns
        assert 'msg="limiting"' not in log, log
        p = subprocess.run([CTL, '-c', conf, 'status'], capture_output=True,
                           text=True, timeout=10)
        assert p.returncode == 1, p
        assert 'accepted a connection yet' not in p.stderr, p.stderr
        assert 'no server under the shim has accepted a connection on a ' \
            f'guarded port (ports {other},443) yet' in p.stderr, p.stderr
        assert re.search(r'nginx \(pid \d+[^)]*\) listening on [\d,]*\b%d\b'
                         % port, p.stderr), p.stderr
        assert f'add its ports to ports in {conf}' in p.stderr, p.stderr
    finally:
        servers.stop_with_segment(srv, shm)



def docs_self_contained():
    """README.md and REFERENCE.md speak to users: no "seed" of the design,
    no issue numbers; strict rules are not called unimplemented; "segment"
    and "agent" are defined before they are used; REFERENCE does not say
    allowed answers never get the rate-limit fields (headers_on = all)."""
    with open(os.path.join(REPO, 'README.md')) as f:
        readme = f.read()
    with open(REFERENCE) as f:
        ref = f.read()
    for text, name in ((readme, 'README.md'), (ref, 'REFERENCE.md')):
        assert not re.search(r"the seed's|\bissues? \d", text), name
    flat = ' '.join(readme.split())
    assert not re.search(r'[Ss]trict rules \([^)]*\) are not implemented', flat)
    for word in ('segment', 'agent'):
        first = re.search(r'\b' + word + r'\b', readme, re.I)
        assert first and readme[first.start() - 2:first.start()] == '**', \
            (word, readme[max(0, first.start() - 200):first.end() + 50])
    flat = ' '.join(ref.split())
    assert 'Answers the application writes to allowed requests get none of ' \
        'these fields: the shim' not in flat
    assert 'fields with the default `headers_on = denied`' in flat


def scripts_pass_shellcheck():
    """The shell scripts we ship or run pass shellcheck at warning level
    (demo.sh had SC2034)."""
    if not shutil.which('shellcheck'):
        raise AssertionError('shellcheck is missing: tools/deps.sh installs it')
    names = ['tools/demo.sh', 'tools/deps.sh', 'tools/installdirs.sh',
             'tools/check-selfcalls.sh']
    p = subprocess.run(['shellcheck', '-S', 'warning',
                        *[os.path.join(REPO, n) for n in names]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(['shellcheck', '-S', 'warning', '-s', 'bash',
                        os.path.join(REPO, 'tools/ctl/rlshimctl.bash-completion')],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


TESTS = [deps_package_missing, deps_nothing_missing, deps_apt_get_fails,
         deps_apt_get_installs_nothing, deps_not_root,
         deps_policy_present_before, deps_policy_absent_before,
         make_deps_exit_status, deps_real_policy_untouched, make_demo,
         demo_cleans_up,
         link_checker_catches, doc_links_resolve, reference_is_complete,
         readme_copies_the_example, copied_config_protects_nginx,
         port_outside_ports_is_said, docs_self_contained,
         scripts_pass_shellcheck]

REAL_BEFORE = real_policy_state()


def main():
    try:
        return run('firstrun', [(f'firstrun: {t.__name__}', t) for t in TESTS])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
