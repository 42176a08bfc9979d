#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_completion.py - the bash completion of rlshimctl
(tools/ctl/rlshimctl.bash-completion), driven as bash drives it: COMP_WORDS
and COMP_CWORD set, _rlshimctl called, COMPREPLY read. The commands (every
one `rlshimctl --help` lists, and show and reset), each command's options
(every one its `COMMAND --help` names), `xdp stats`, the rule names of the
-c FILE on the line (or of $RLSHIM_CONFIG's file) after show and reset,
even while the file does not parse; files after -c and check; durations
after --for. The rule names come from the hidden `rlshimctl __complete
rules`, which the usage does not list.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, run  # noqa: E402

CTL = os.path.join(REPO, 'build', 'rlshimctl')
SCRIPT = os.path.join(REPO, 'tools', 'ctl', 'rlshimctl.bash-completion')
TMP = tempfile.mkdtemp(prefix='rlshim-completion-')

RULES = ('[global]\nshm = rlshim-completion\n'
         '[limit:login]\nmatch = POST /login\nrate = 5/m\n'
         '[limit:site]\nmatch = *\nrate = 600/m\n'
         '[limit:sms-2]\nmatch = POST /sms\nrate = 3/m\n')
# Being edited: an unknown key. The servers keep their rules; the names
# are still worth completing.
BROKEN = ('[limit:api]\nmatch = *\nrate = 10/m\nbogus = 1\n'
          '[limit:api.v2]\nmatch = /v2/\nrate = 10/m\n')
# The commands of DESIGN.md that another branch adds: completed whatever
# this build's --help says.
ALSO = {'show', 'reset'}


def config(name, text):
    path = os.path.join(TMP, name)
    with open(path, 'w') as f:
        f.write(text)
    return path


def complete(*words, env=None):
    """COMPREPLY for the line `rlshimctl WORDS...`, the cursor at the end of
    the last word ('' after a space)."""
    words = [CTL, *words]
    script = ('source "$0" || exit 9\n'
              'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))\n'
              '_rlshimctl || exit 8\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    p = subprocess.run(['bash', '--norc', '--noprofile', '-c', script, SCRIPT,
                        *words], capture_output=True, text=True, timeout=20,
                       env=env)
    assert p.returncode == 0, (words, p.returncode, p.stderr)
    assert p.stderr == '', (words, p.stderr)
    return [w for w in p.stdout.split('\n') if w]


def help_commands():
    """The commands `rlshimctl --help` lists."""
    p = subprocess.run([CTL, '--help'], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 0, p.stderr
    listing = p.stdout.split('\n\n')[1]  # between the usage and -c FILE
    cmds = re.findall(r'^  ([a-z]+) ', listing, re.M)
    assert len(cmds) >= 8, p.stdout
    return cmds


def help_options(cmd):
    """The options `rlshimctl CMD --help` names (its usage line and the
    option lines under it)."""
    p = subprocess.run([CTL, cmd, '--help'], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 0, (cmd, p.stderr)
    usage = p.stdout.split('\n')[0]
    return set(re.findall(r'(?<![\w-])(--?[a-z][a-z-]*)', usage.split(cmd, 1)[1]))


def commands():
    got = complete('')
    want = set(help_commands()) | ALSO | {'help'}
    assert set(got) == want, (got, want)
    assert complete('s') == ['status', 'show'], complete('s')
    assert complete('re') == ['reset'], complete('re')
    assert complete('ba') == ['ban', 'bans'], complete('ba')
    # The command after the global options.
    assert 'metrics' in complete('-c', '/dev/null', 'me')
    assert sorted(complete('-')) == ['--config', '--help', '--version', '-c']


def options():
    for cmd in help_commands():
        want = help_options(cmd) | {'--help'}
        got = set(complete(cmd, '-'))
        assert got == want, (cmd, got, want)
    assert set(complete('show', 'r', 'k', '-')) == {'--json', '--help'}
    assert complete('reset', '--') == ['--all', '--help']
    assert complete('unban', '--a') == ['--all']
    assert complete('bans', '--r') == ['--rule']
    assert set(complete('who', '-')) == {'--json', '--help'}
    # After "--", arguments only.
    assert complete('top', '--', '--') == []
    assert complete('top', '--j') == ['--json']
    assert complete('ban', '10.0.0.1', '--f') == ['--for', '--force']
    # An option's value is not an argument: after `-n 5` the options again.
    assert '--json' in complete('top', '-n', '5', '')
    # Nothing after `unban ADDR` or `metrics` but --help.
    assert complete('metrics', '') == []
    assert complete('--version', '') == []


def durations():
    assert complete('ban', '10.0.0.1', '--for', '') == ['30s', '10m', '1h', '1d']
    # --for=1 comes as "--for" "=" "1" (= is in COMP_WORDBREAKS).
    assert complete('ban', '10.0.0.1', '--for', '=', '1') == ['10m', '1h', '1d']
    assert complete('ban', '10.0.0.1', '--for', '=', '') == \
        ['30s', '10m', '1h', '1d']
    # Each one is a duration rlshimctl takes (a usage-free parse: a bad one
    # fails with "bad duration" before the segment is opened).
    for d in complete('ban', '10.0.0.1', '--for', ''):
        p = subprocess.run([CTL, '-c', '/nonexistent/rlshim.conf', 'ban',
                            '10.0.0.1', '--for', d], capture_output=True,
                           text=True, timeout=10)
        assert 'bad duration' not in p.stderr, (d, p.stderr)


def xdp_stats():
    assert complete('xdp', '') == ['stats']
    assert complete('xdp', 'st') == ['stats']
    assert complete('xdp', 'stats', '') == ['--json']
    assert set(complete('xdp', 'stats', '-')) == {'--json', '--help'}


def rule_names():
    good = config('rules.conf', RULES)
    for cmd in ('show', 'reset', 'status'):
        assert complete('-c', good, cmd, '') == ['login', 'site', 'sms-2'], cmd
        assert complete('-c', good, cmd, 's') == ['site', 'sms-2'], cmd
        # Options before the rule are not arguments.
        assert complete('-c', good, cmd, '--json', 'l') == ['login'], cmd
    assert complete('--config', good, 'show', 'l') == ['login']
    assert complete('--config', '=', good, 'show', 'l') == ['login']
    assert complete(f'--config={good}', 'show', 'l') == ['login']
    assert complete(f'-c{good}', 'show', 'l') == ['login']
    # bans --rule RULE, --rule=RULE
    assert complete('-c', good, 'bans', '--rule', 's') == ['site', 'sms-2']
    assert complete('-c', good, 'bans', '--rule', '=', 'l') == ['login']
    assert complete('-c', good, 'bans', '--rule', 'login', '') == ['--json', '--rule']
    # status takes one rule; who an address: nothing to offer.
    assert complete('-c', good, 'status', 'login', '') == ['--json']
    assert complete('-c', good, 'who', '') == []
    # The second argument is the KEY: no rule names there, nor after it.
    assert complete('-c', good, 'show', 'login', '') == []
    assert complete('-c', good, 'reset', 'login', '10.0.0.1', '') == []
    # Without -c, the file the tool would read: $RLSHIM_CONFIG's.
    env = dict(os.environ, RLSHIM_CONFIG=good)
    assert complete('show', '', env=env) == ['login', 'site', 'sms-2']
    # A file being edited (it does not parse) still names its rules.
    broken = config('broken.conf', BROKEN)
    assert subprocess.run([CTL, 'check', broken], capture_output=True,
                          timeout=10).returncode == 1
    assert complete('-c', broken, 'show', '') == ['api', 'api.v2']
    # No file: nothing, and no message on the terminal.
    assert complete('-c', os.path.join(TMP, 'none.conf'), 'show', '') == []


def files():
    good = config('rules.conf', RULES)
    assert complete('-c', os.path.join(TMP, 'ru')) == [good]
    assert complete('check', os.path.join(TMP, 'ru')) == [good]
    spaced = config('my rules.conf', RULES)
    assert complete('check', os.path.join(TMP, 'my')) == [spaced]


def hidden_command():
    good = config('rules.conf', RULES)
    p = subprocess.run([CTL, '-c', good, '__complete', 'rules'],
                       capture_output=True, text=True, timeout=10)
    assert (p.returncode, p.stdout, p.stderr) == (0, 'login\nsite\nsms-2\n', ''), p
    p = subprocess.run([CTL, '__complete', 'keys'], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 2 and p.stdout == '', p
    p = subprocess.run([CTL, '--help'], capture_output=True, text=True,
                       timeout=10)
    assert '__complete' not in p.stdout
    # Registered for the command's name, as bash-completion loads it.
    p = subprocess.run(['bash', '--norc', '-c', 'source "$0"; complete -p rlshimctl',
                        SCRIPT], capture_output=True, text=True, timeout=10)
    assert p.stdout.strip() == 'complete -F _rlshimctl rlshimctl', p


TESTS = [commands, options, durations, xdp_stats, rule_names, files,
         hidden_command]


def main():
    try:
        return run('completion', [(f'completion: {t.__name__}', t)
                                  for t in TESTS])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
