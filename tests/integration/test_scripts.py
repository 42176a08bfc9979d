#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_scripts.py [SETUP...] - a rule on a script counts every path the
server runs that script for (issue 26).

A server that runs a script for a path runs the same script for the paths
below it, with the rest as PATH_INFO (RFC 3875 4.1.5): `/secret.php/x` is
secret.php with PATH_INFO `/x` on php -S (docroot mode), apache's mod_php, PHP-FPM behind
nginx's fastcgi_split_path_info; `/cgi-bin/secret.cgi/x` is the CGI script
on apache (mod_cgid), lighttpd (mod_cgi), busybox httpd and python's
http.server; a WSGI application mounted at SCRIPT_NAME `/app` gets `/app/x`
(gunicorn). An index file runs for its directory (`/shop/` is
`/shop/index.php`).

Each setup is a real server under the shim with one rule on the script,
`key = header:X-Key`, 3 an hour:

  1. every PATH_INFO form of the script, each with a key of its own, runs
     the script (its body says so): the forms are real ways in;
  2. with one key, three requests for the script itself run it, then every
     form, in every spelling (encoded slashes, dot segments, doubled
     slashes, a query, absolute-form, HEAD), gets the shim's 429;
  3. paths beside the script (`/secret.phpx`, `/other.php/x`) are not
     counted by its rule;
  4. the server's access log, where it has one, holds exactly the requests
     of steps 1-3 that were not refused: none of the 429s reached it.

    python3 tests/integration/test_scripts.py            # every setup
    python3 tests/integration/test_scripts.py php nginx  # names containing these
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SHIM, exchange, parse_responses, run)  # noqa: E402
import servers  # noqa: E402

PHP_SECRET = b"""<?php
header('Content-Type: text/plain');
echo "secret ran PATH_INFO=" . ($_SERVER['PATH_INFO'] ?? '') . "\\n";
"""
PHP_INDEX = b"""<?php
header('Content-Type: text/plain');
echo "shop index ran\\n";
"""
CGI_SECRET = b"""#!/bin/sh
printf 'Content-Type: text/plain\\r\\n\\r\\nsecret ran PATH_INFO=%s\\n' "$PATH_INFO"
"""
PHP_FPM = shutil.which('php-fpm8.2') or '/usr/sbin/php-fpm8.2'
LIBPHP = '/usr/lib/apache2/modules/libphp8.2.so'


def spellings(script):
    """(target, method, ran): the PATH_INFO forms of `script` and other
    spellings of them. ran: every server runs the script for it (step 1
    asserts it); the others only have to be counted."""
    d, name = script.rsplit('/', 1)
    return [
        (f'{script}/x', 'GET', True),
        (f'{script}/y', 'GET', True),
        (f'{script}/x/y', 'GET', True),
        (f'{script}/x?q=/z', 'GET', True),
        (f'{script}/x/', 'GET', False),
        (f'{script}/', 'GET', False),
        (f'{script}%2Fx', 'GET', False),
        (f'{script}%2fx%2Fy', 'GET', False),
        (f'/{script}//x', 'GET', False),
        (f'{d}/./{name}/./x', 'GET', False),
        (f'{d}/zz/../{name}/x', 'GET', False),
        (f'{d}/%{ord(name[0]):02X}{name[1:]}/x', 'GET', False),
        (f'http://localhost{script}/x', 'GET', False),
        (f'{script}/x', 'HEAD', False),
        (f'{script}/x', 'POST', False),
    ]


class Setup:
    """One server kind and a script it runs. make(dir) writes the docroot
    and returns the Server (not started); script: the rule's path; beside:
    paths the rule must not count; index: (rule path, directory forms
    that run it) or None."""

    def __init__(self, name, kind, script, beside, make, index=None,
                 body=b'secret ran'):
        self.name, self.kind, self.script = name, kind, script
        self.beside, self.make, self.index = beside, make, index
        self.body = body


CONFIG = """\
[global]
ports = {port}
shm = {shm}

[limit:script]
match = * {script}
key = header:X-Key
rate = 3/h
{index}"""

INDEX_RULE = """
[limit:index]
match = * {path}
key = header:X-Key
rate = 3/h
"""


def send(port, method, target, key, body=None):
    head = f'{method} {target} HTTP/1.1\r\nHost: localhost\r\nX-Key: {key}\r\n'
    if body is not None:
        head += f'Content-Length: {len(body)}\r\n'
    raw = (head + 'Connection: close\r\n\r\n').encode() + (body or b'')
    rs = parse_responses(exchange(port, raw), [method], first_only=True)
    assert rs, f'no answer to {method} {target}'
    return rs[0]


def check(setup):
    tmp = tempfile.mkdtemp(prefix=f'rlshim-scripts-{setup.name}-')
    shm = f'rlshim-scripts-{os.getpid()}-{setup.name}'
    port = servers.free_port()
    config = os.path.join(tmp, 'rlshim.conf')
    index = ''
    if setup.index:
        index = INDEX_RULE.format(path=setup.index[0])
    with open(config, 'w') as f:
        f.write(CONFIG.format(port=port, shm=shm, script=setup.script,
                              index=index))
    extra = []
    srv = setup.make(tmp, config, port, extra)
    try:
        srv.start()
        served = 0   # requests the server answered (not the shim's 429s)
        # 1. each form, a key of its own: the server runs the script
        for i, (target, method, ran) in enumerate(spellings(setup.script)):
            if not ran:
                continue
            r = send(port, method, target, f'probe{i}')
            served += 1
            assert r.status == 200 and setup.body in r.body, \
                (setup.name, target, r.status, r.body[:200])
        # 2. one key: the script three times, then every spelling refused
        for _ in range(3):
            r = send(port, 'GET', setup.script, 'k')
            served += 1
            assert r.status == 200 and setup.body in r.body, \
                (setup.name, r.status, r.body[:200])
        got = []
        for target, method, _ in spellings(setup.script):
            r = send(port, method, target, 'k',
                     b'a=1' if method == 'POST' else None)
            got.append((method, target, r.status))
        wrong = [g for g in got if g[2] != 429]
        assert not wrong, (setup.name, 'passed uncounted', wrong)
        # 3. beside the script: another budget (not 429 with key k)
        for target in setup.beside:
            r = send(port, 'GET', target, 'k')
            served += 1
            assert r.status != 429, (setup.name, target, r.status)
        # the index file's rule: its directory runs it, and is counted
        if setup.index:
            path, dirs = setup.index
            for _ in range(3):
                r = send(port, 'GET', path, 'k')
                served += 1
                assert r.status == 200, (setup.name, path, r.status)
            for d in dirs + [path + '/x']:
                r = send(port, 'GET', d, 'k')
                assert r.status == 429, (setup.name, 'index', d, r.status)
            r = send(port, 'GET', dirs[0], 'k2')
            served += 1
            assert r.status == 200 and b'index ran' in r.body, \
                (setup.name, dirs[0], r.status, r.body[:200])
        # 4. what reached the server: only what it answered
        if 'access_log' in srv.features:
            log = srv.access_log(min_entries=served)
            assert len(log) == served, (setup.name, served, len(log), log)
    finally:
        srv.stop()
        for p in extra:
            servers.end_process(p)
        servers.unlink_segment(shm)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- the setups ------------------------------------------------------------

def docroot(tmp, files):
    """Write {relative path: bytes} under tmp/server/docroot; .cgi files
    executable. Returns the server's work directory."""
    wd = os.path.join(tmp, 'server')
    for rel, data in files.items():
        p = os.path.join(wd, 'docroot', rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(data)
        os.chmod(p, 0o755 if rel.endswith('.cgi') else 0o644)
    return wd


def cgi_files():
    return {'cgi-bin/secret.cgi': CGI_SECRET, 'cgi-bin/other.cgi': CGI_SECRET}


def php_files():
    return {'secret.php': PHP_SECRET, 'other.php': PHP_SECRET,
            'shop/index.php': PHP_INDEX}


CGI_BESIDE = ['/cgi-bin/secret.cgix', '/cgi-bin/other.cgi/x',
              '/cgi-bin/secret', '/cgi-bin/']
PHP_BESIDE = ['/secret.phpx', '/other.php/x', '/secret.ph', '/shop/x.txt']
PHP_INDEX_DIRS = ('/shop/index.php', ['/shop/', '/shop//', '/shop/.'])


def make_python(tmp, config, port, extra):
    wd = docroot(tmp, cgi_files())
    return servers.Server('python', wd, SHIM, config, port)


def make_busybox(tmp, config, port, extra):
    wd = docroot(tmp, cgi_files())
    return servers.Server('busybox', wd, SHIM, config, port)


def make_lighttpd(tmp, config, port, extra):
    wd = docroot(tmp, cgi_files())
    return servers.Server('lighttpd', wd, SHIM, config, port,
                          lighttpd_extra='server.modules += ( "mod_cgi" )\n'
                          '$HTTP["url"] =~ "^/cgi-bin/" {\n'
                          '  cgi.assign = ( "" => "" )\n}\n')


def make_apache_cgi(tmp, config, port, extra):
    wd = docroot(tmp, cgi_files())
    root = os.path.join(wd, 'docroot')
    return servers.Server(
        'apache', wd, SHIM, config, port,
        apache_extra='LoadModule cgid_module '
        '/usr/lib/apache2/modules/mod_cgid.so\n'
        f'ScriptSock "{wd}/run/cgid.sock"\n'
        f'<Directory "{root}/cgi-bin">\n'
        '    Options +ExecCGI\n    SetHandler cgi-script\n</Directory>\n')


def make_apache_php(tmp, config, port, extra):
    wd = docroot(tmp, php_files())
    return servers.Server(
        'apache', wd, SHIM, config, port, apache_mpm='prefork',
        apache_extra=f'LoadModule php_module {LIBPHP}\n'
        'LoadModule dir_module /usr/lib/apache2/modules/mod_dir.so\n'
        'DirectoryIndex index.php\n'
        '<FilesMatch "\\.php$">\n'
        '    SetHandler application/x-httpd-php\n</FilesMatch>\n')


def make_nginx_fpm(tmp, config, port, extra):
    """nginx under the shim in front of PHP-FPM (without it), the
    fastcgi_split_path_info location of nginx's own PHP example."""
    wd = docroot(tmp, php_files())
    fpm_port = servers.free_port()
    fpm_conf = os.path.join(tmp, 'php-fpm.conf')
    with open(fpm_conf, 'w') as f:
        f.write(f"""[global]
error_log = {tmp}/php-fpm.log
daemonize = no
pid = {tmp}/php-fpm.pid
[www]
listen = 127.0.0.1:{fpm_port}
pm = static
pm.max_children = 2
clear_env = yes
""" + ('user = root\ngroup = root\n' if os.geteuid() == 0 else ''))
    env = {k: v for k, v in os.environ.items()
           if k not in ('LD_PRELOAD', 'RLSHIM_CONFIG')}
    p = subprocess.Popen([PHP_FPM, '-F', '-y', fpm_conf]
                         + (['-R'] if os.geteuid() == 0 else []),
                         env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    extra.append(p)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(('127.0.0.1', fpm_port), 0.5).close()
            break
        except OSError:
            assert p.poll() is None and time.monotonic() < deadline, \
                open(f'{tmp}/php-fpm.log', errors='replace').read() \
                if os.path.exists(f'{tmp}/php-fpm.log') else 'php-fpm'
            time.sleep(0.05)
    return servers.Server(
        'nginx', wd, SHIM, config, port,
        nginx_extra='        index index.php;\n'
        '        location ~ [^/]\\.php(/|$) {\n'
        '            fastcgi_split_path_info ^(.+?\\.php)(/.*)$;\n'
        '            if (!-f $document_root$fastcgi_script_name) {\n'
        '                return 404;\n            }\n'
        f'            fastcgi_pass 127.0.0.1:{fpm_port};\n'
        '            fastcgi_index index.php;\n'
        '            include /etc/nginx/fastcgi_params;\n'
        '            fastcgi_param SCRIPT_FILENAME '
        '$document_root$fastcgi_script_name;\n'
        '            fastcgi_param PATH_INFO $fastcgi_path_info;\n'
        '        }\n')


PHP = shutil.which('php') or '/usr/bin/php'


class PhpServer:
    """`php -S 127.0.0.1:PORT -t DOCROOT` under the shim (PHP's built-in
    server, docroot mode): the case of issue 26 as a new user runs it."""
    features = frozenset()

    def __init__(self, wd, config, port):
        self.wd, self.config, self.port = wd, config, port
        self.proc = None

    def start(self):
        env = dict(os.environ, LD_PRELOAD=str(SHIM), RLSHIM_CONFIG=self.config)
        self.log = open(os.path.join(self.wd, 'php.log'), 'ab')
        self.proc = subprocess.Popen(
            [PHP, '-S', f'127.0.0.1:{self.port}', '-t',
             os.path.join(self.wd, 'docroot')], env=env,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True)
        deadline = time.monotonic() + 10
        # php -S listens at once; a bare connect would count for a
        # `match = accept` rule, which this file has none of.
        while True:
            try:
                socket.create_connection(('127.0.0.1', self.port), 0.5).close()
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, \
                    'php -S did not start'
                time.sleep(0.05)

    def stop(self):
        if self.proc:
            servers.end_process(self.proc)
            self.proc = None
            self.log.close()


def make_php(tmp, config, port, extra):
    wd = docroot(tmp, php_files())
    return PhpServer(wd, config, port)


SETUPS = [
    Setup('php-S', 'php', '/secret.php', PHP_BESIDE, make_php,
          PHP_INDEX_DIRS),
    Setup('python-cgi', 'python', '/cgi-bin/secret.cgi', CGI_BESIDE,
          make_python),
    Setup('busybox-cgi', 'busybox', '/cgi-bin/secret.cgi', CGI_BESIDE,
          make_busybox),
    Setup('lighttpd-cgi', 'lighttpd', '/cgi-bin/secret.cgi', CGI_BESIDE,
          make_lighttpd),
    Setup('apache-cgi', 'apache', '/cgi-bin/secret.cgi', CGI_BESIDE,
          make_apache_cgi),
    Setup('apache-php', 'apache', '/secret.php', PHP_BESIDE,
          make_apache_php, PHP_INDEX_DIRS),
    Setup('nginx-fpm', 'nginx', '/secret.php', PHP_BESIDE, make_nginx_fpm,
          PHP_INDEX_DIRS),
]


def main():
    words = sys.argv[1:]
    chosen = [s for s in SETUPS
              if not words or any(w in s.name for w in words)]
    tests = []
    for s in chosen:
        def t(s=s):
            check(s)
        tests.append((s.name, t))
    return run('test_scripts', tests)


if __name__ == '__main__':
    sys.exit(main())
