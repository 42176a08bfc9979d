"""Fixtures that start real HTTP servers, with or without the shim.

Python 3.11 stdlib only. Each Server runs one server program in its own
process group, with LD_PRELOAD=<shim> and RLSHIM_CONFIG=<config> when given,
stdout and stderr in files in its work directory.

    s = Server('nginx', workdir, shim, config, free_port(), echo_port=...)
    s.start()
    ...                       # talk to 127.0.0.1:s.port / [::1]:s.port
    s.access_log()            # the server's own log, parsed
    s.stderr_text()           # server + shim stderr and error logs
    s.stop()

Kinds and what they claim (`features`):

  legacy    build/legacy_server -p PORT: single process, poll-free blocking
            loop. echo (/echo), chunked_echo, keepalive, pipelining, ipv6
            (listens on [::], dual stack), access_log (stdout).
  python    http.server (ThreadingHTTPServer, dual stack on ::, CGI,
            HTTP/1.0: one request per connection). echo (/cgi-bin/echo,
            Content-Length bodies only), ipv6, access_log (stderr).
            python_protocol='HTTP/1.1': http.server --protocol HTTP/1.1,
            which adds keepalive and pipelining.
  nginx     master + 2 workers, epoll, reuseport on 127.0.0.1 and [::1].
            keepalive, pipelining, ipv6, workers, access_log; echo and
            chunked_echo (/echo, proxied to echo_port) when echo_port is given.
            nginx_extra='...': lines added to its server block (e.g.
            `sendfile on;`, or a `location` that answers 401);
            nginx_listen='...': parameters added to its listen lines (e.g.
            `sndbuf=4k`); nginx_main='...': lines added to its main context
            (e.g. `env NAME;`: workers keep only the variables named so).
  lighttpd  single process, linux-sysepoll, 127.0.0.1 and [::1]. keepalive,
            pipelining, ipv6, access_log; echo and chunked_echo (/echo,
            mod_proxy to echo_port) when echo_port is given.
            lighttpd_extra='...': lines appended to its configuration (e.g.
            debug.log-request-header, which logs every request head it
            reads to error.log, also those its access log leaves out).
  busybox   busybox httpd -f, forks a child per connection, one request per
            connection, listens on [::] (dual stack). echo (/cgi-bin/echo),
            ipv6, access_log (partial: no method; no status for CGI).
  apache    Apache httpd (Debian 12's apache2), its own ServerRoot and
            config in the work directory (fixtures/apache2.conf.in; nothing
            of /etc/apache2), -DFOREGROUND, on 127.0.0.1 and [::1].
            apache_mpm='event' (default, Debian's), 'prefork' or 'worker',
            two child processes either way. As root the children run as
            www-data (httpd refuses to serve as root), so the work
            directory, docroot and RLSHIM_CONFIG must be reachable by
            www-data: directories above them inside the temp dir get o+x,
            docroot files o+r; the shim's segment is then created by the
            first child that accepts (www-data, 0600). keepalive,
            pipelining, ipv6, workers (X-Worker: the child's pid, from
            mod_lua), access_log; echo and chunked_echo (/echo, mod_proxy
            to echo_port) when echo_port is given. POST /sms: 200 (mod_lua).
            apache_extra='...': lines appended to its configuration (e.g.
            `SendBufferSize 4096`).
  webfs     webfsd -F -d (Debian's webfs 1.21: one process, select loop; -F
            keeps it in the foreground, unforked), docroot, listens on [::]
            (dual stack). keepalive, pipelining, ipv6, access_log: from its
            debug lines on stderr (-d: per connection, the address, each
            request line it parsed and each status it answered; WebfsLog),
            not from its -L log, which writes the previous request's line
            again when a kept-alive connection ends, and a line for a
            connection that sent nothing: no bytes_in.
            No echo: webfs answers every POST 501 without reading its body
            (its CGI, -x, takes none), so POST /sms: 501.
  h2o       h2o 2.2.5 (Debian 12) in worker mode: one process, 2 event-loop
            threads (no master: `-m master` would fork the worker through
            start_server), fixtures/h2o.conf.in, on 127.0.0.1 and [::1]; as
            root `user: root` (it would switch to nobody). It also speaks
            HTTP/2 in cleartext (prior-knowledge preface and Upgrade: h2c),
            which the shim must refuse: feature h2c. keepalive, pipelining,
            ipv6, access_log (no bytes_in); echo and chunked_echo (/echo,
            proxy.reverse.url to echo_port) when echo_port is given. POST
            /sms: 200 (mruby.handler).
  nginx-proxy, apache-proxy
            the nginx (apache) kind with the shim as a reverse proxy: every
            path, /sms included, is proxied (nginx proxy_pass, apache
            ProxyPass / with disablereuse=On) to a backend that the Server
            starts itself WITHOUT the shim and stops with it: a
            build/legacy_server (`backend`, its log `backend.access_log()`),
            in the work directory's backend/ folder. The limits apply in
            the proxy: its reads are what the shim frames. Features as
            nginx's (apache's): keepalive, pipelining, ipv6, workers (two
            workers or children), access_log (the proxy's own), and always
            echo and chunked_echo (/echo: legacy_server echoes; echo_port is
            not used). GET /books and POST /sms: legacy_server's answers
            (200). The backend has no files: test_diff's /secret is a 404.

  php       php -S [::]:PORT -t DOCROOT (PHP's built-in server, docroot
            mode), PHP_CLI_SERVER_WORKERS=2: the first process forks two
            workers and goes on serving too, so three processes answer
            (worker_procs = 3), all on the one listening socket. Listens on
            [::] (dual stack). Every answer says Connection: close and the
            connection ends after it (no keep-alive in 8.2), and a first read
            that holds more than one request (a pipeline) is "Invalid request
            (Malformed HTTP request)": the connection is closed unanswered.
            echo and chunked_echo (/echo: docroot/echo/index.php,
            php://input), ipv6, workers
            (X-Worker from the scripts: docroot/t/index.php answers every
            /t/NAME, PATH_INFO the rest; static files carry none),
            access_log (stderr: "[pid] [date] [ip]:port [status]: METHOD
            TARGET"; no version, no bytes). POST /sms: 200 (a static file
            `sms`, served to any method). server.docroot is read per
            request: a .php file dropped in after start() is served (and
            its PATH_INFO forms, /x.php/more).
  php-router
            php -S [::]:PORT -t DOCROOT router.php (router.php in the work
            directory, fixtures/php_router.php): the router answers POST
            /sms, /echo and /t/NAME itself (X-Worker) and returns false for
            anything else, which php -S then serves from the docroot as in
            docroot mode (static files, .php scripts and their PATH_INFO
            forms). Features as php, echo at /echo. POST /sms: 200
            {"sent":true}.
  gunicorn  gunicorn 20 (Debian's, /usr/bin/gunicorn), 2 sync workers,
            --bind [::]:PORT (dual stack), serving fixtures/wsgi_app.py
            (RLSHIM_DOCROOT=docroot: static files, /echo, POST /sms, /t/NAME;
            X-Worker on every answer). A sync worker answers one request per
            connection (Connection: close; what else it read is dropped).
            echo and chunked_echo (/echo), ipv6, workers, access_log
            (access.log, --access-logformat '%(h)s "%(r)s" %(s)s %(p)s':
            client, request line, status, <pid>; a request it refuses as
            invalid has no access line: error.log, --log-level debug, says
            "Invalid request from ip=..."). POST /sms: 200.
            Known: gunicorn 20.1.0's chunked reader spins (100% CPU, no
            syscalls) in `while len(rest) < 2: rest += unreader.read()`
            when the body ends after a chunk's data, before its CRLF: the
            worker is lost until --timeout (30 s) kills it, if a client
            ends its body there (a half-close). The shim cuts a body at a
            bad byte as a reset (ECONNRESET), not an end of file, so a bad
            byte there does not do it (test_diff's chunked streams).
  gunicorn-gthread
            as gunicorn with -k gthread, 2 workers of 4 threads, at most 6
            connections each (--worker-connections: a burst reaches both
            workers, not one): adds keepalive (--keep-alive 2 s; at most 2
            connections kept per worker, Connection: close beyond). Not pipelining: a request that came
            in the same read as the one before it waits, unanswered, until
            the client sends more or half-closes (or the 2 s keep-alive
            ends the connection without it).

POST /sms: legacy and nginx answer 200 with {"sent":true}; lighttpd serves
a static file `sms` (200, same body); python and busybox have no handler
for POST on a static path and answer 501 (see SMS_STATUS).
"""

import os
import re
import shutil
import signal
import stat
import socket
import subprocess
import sys
import time
from pathlib import Path

KINDS = ('legacy', 'python', 'nginx', 'lighttpd', 'busybox', 'apache')
# Issue 26 (servers2): more real servers.
KINDS += ('webfs', 'h2o', 'nginx-proxy', 'apache-proxy')
# The proxy kinds are these kinds' configuration with a backend behind it.
PROXY_OF = {'nginx-proxy': 'nginx', 'apache-proxy': 'apache'}
# issue 26: PHP's built-in server and gunicorn
KINDS += ('php', 'php-router', 'gunicorn', 'gunicorn-gthread')

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = HERE / 'fixtures'
LEGACY_SERVER = REPO / 'build' / 'legacy_server'
# RL_SHIM overrides the shim under test (as in harness.py).
SHIM = Path(os.environ.get('RL_SHIM') or REPO / 'build' / 'librlshim.so')
PYTHON = '/usr/bin/python3'
NGINX = shutil.which('nginx') or '/usr/sbin/nginx'
LIGHTTPD = shutil.which('lighttpd') or '/usr/sbin/lighttpd'
BUSYBOX = shutil.which('busybox') or '/bin/busybox'
APACHE = shutil.which('apache2') or '/usr/sbin/apache2'
APACHE_MODULES = Path('/usr/lib/apache2/modules')
WEBFSD = shutil.which('webfsd') or '/usr/bin/webfsd'
H2O = shutil.which('h2o') or '/usr/bin/h2o'
APACHE_MPMS = ('event', 'prefork', 'worker')
# The user apache's children run as when it is started as root.
APACHE_USER = 'www-data'
PHP = shutil.which('php') or '/usr/bin/php'
GUNICORN = '/usr/bin/gunicorn'
PHP_KINDS = ('php', 'php-router')
GUNICORN_KINDS = ('gunicorn', 'gunicorn-gthread')

BOOKS = b'{"books":["SICP","TAOCP","K&R"]}'

# What each kind answers to POST /sms (the body is never looked at).
SMS_STATUS = {'legacy': 200, 'nginx': 200, 'python': 501, 'busybox': 501,
              'lighttpd': 200, 'apache': 200}
SMS_STATUS.update({'webfs': 501, 'h2o': 200, 'nginx-proxy': 200,
                   'apache-proxy': 200})
SMS_STATUS.update({'php': 200, 'php-router': 200, 'gunicorn': 200,
                   'gunicorn-gthread': 200})

_given_ports: set[int] = set()


def available(kind: str) -> bool:
    """Whether the program behind `kind` is installed (for skipping)."""
    prog = {'legacy': str(LEGACY_SERVER), 'python': PYTHON, 'nginx': NGINX,
            'lighttpd': LIGHTTPD, 'busybox': BUSYBOX, 'apache': APACHE,
            'webfs': WEBFSD, 'h2o': H2O, 'nginx-proxy': NGINX,
            'apache-proxy': APACHE, 'php': PHP, 'php-router': PHP,
            'gunicorn': GUNICORN, 'gunicorn-gthread': GUNICORN}[kind]
    if PROXY_OF.get(kind) and not os.access(LEGACY_SERVER, os.X_OK):
        return False
    if kind in ('apache', 'apache-proxy') and not (APACHE_MODULES / 'mod_lua.so').exists():
        return False
    return os.access(prog, os.X_OK)


def free_port() -> int:
    """A TCP port free on 127.0.0.1, ::1 and the dual-stack wildcard.

    Never returns the same port twice in one process, so two calls in a row
    (server and echo server) cannot collide before either has bound.
    """
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s4:
            s4.bind(('127.0.0.1', 0))
            port = s4.getsockname()[1]
        if port in _given_ports:
            continue
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
                s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                s6.bind(('::', port))
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
                s6.bind(('::1', port))
        except OSError:
            continue
        _given_ports.add(port)
        return port
    raise RuntimeError('no free TCP port found')


def instance_dir(path: str) -> tuple[str, int, str]:
    """A new server's own folder `path` (made here), a free port for it and
    the path of its rlshim.conf in that folder."""
    os.makedirs(path)
    return path, free_port(), os.path.join(path, 'rlshim.conf')


def unlink_segment(shm: str) -> None:
    """Remove the shim's segment /dev/shm/<shm> if it is there."""
    try:
        os.unlink(f'/dev/shm/{shm}')
    except FileNotFoundError:
        pass


def agent_log_dirs(uid: int | None = None, env=None) -> list[str]:
    """The directories the shim tries, in order, for the log of the agent it
    starts (src/core/logfile.c): /run/rlshim for root, $XDG_RUNTIME_DIR/rlshim,
    /tmp/rlshim-<uid>."""
    uid = os.geteuid() if uid is None else uid
    env = os.environ if env is None else env
    dirs = ['/run/rlshim'] if uid == 0 else []
    xdg = env.get('XDG_RUNTIME_DIR', '')
    if xdg.startswith('/'):
        dirs.append(os.path.join(xdg, 'rlshim'))
    return dirs + [f'/tmp/rlshim-{uid}']


def agent_log(shm: str, uid: int | None = None, env=None) -> str:
    """The log file of the agent the shim starts for segment `shm`: in the
    first of agent_log_dirs() that is a directory of `uid` (not a link) that
    neither group nor others can write, as the shim chooses it."""
    uid = os.geteuid() if uid is None else uid
    dirs = agent_log_dirs(uid, env)
    for d in dirs:
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            if d != dirs[-1] and not os.access(os.path.dirname(d), os.W_OK):
                continue
            return os.path.join(d, f'rlshimd-{shm}.log')  # made at the start
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and \
                not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return os.path.join(d, f'rlshimd-{shm}.log')
    return os.path.join(dirs[-1], f'rlshimd-{shm}.log')


def stop_with_segment(server: 'Server', shm: str) -> None:
    """Stop `server` and remove the segment its shim used."""
    server.stop()
    unlink_segment(shm)


def end_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM `proc` and reap it; SIGKILL when it is not gone in `timeout`
    seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _fold_ip(ip: str) -> str:
    """::ffff:a.b.c.d -> a.b.c.d; strips [] and a :port from busybox's form."""
    if ip.startswith('::ffff:') and '.' in ip:
        return ip[7:]
    return ip


def _split_request(req: str):
    """'GET /x HTTP/1.1' -> ('GET', '/x'); anything else -> (None, None)."""
    parts = req.split(' ')
    if len(parts) == 3 and parts[0] != '-':
        return parts[0], parts[1]
    return None, None


def _tail(path: Path, n: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ''
    return data[-n:].decode('utf-8', 'replace')


def _procs_with(field: int, value: int) -> list[int]:
    """pids of non-zombie processes whose /proc/PID/stat field `field`
    (counted after the comm: 1 ppid, 2 pgrp) is `value`."""
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat', 'rb') as f:
                stat = f.read().decode('ascii', 'replace')
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
        fields = stat[stat.rfind(')') + 2:].split()
        if len(fields) > field and int(fields[field]) == value and \
                fields[0] != 'Z':
            out.append(int(d))
    return out


def group_alive(pgid: int) -> list[int]:
    """pids of non-zombie processes in process group pgid."""
    return _procs_with(2, pgid)


def children_of(pid: int) -> list[int]:
    """pids of the non-zombie children of pid."""
    return _procs_with(1, pid)


def _listeners(port: int) -> list[tuple[str, str]] | None:
    """(address, socket inode) of every TCP listener on `port`, from
    /proc/net/tcp{,6}; None if those cannot be read."""
    out = []
    for name, fam in (('/proc/net/tcp', socket.AF_INET),
                      ('/proc/net/tcp6', socket.AF_INET6)):
        try:
            with open(name) as f:
                lines = f.readlines()[1:]
        except OSError:
            if fam == socket.AF_INET:
                return None
            continue
        for line in lines:
            fl = line.split()
            hexaddr, hexport = fl[1].rsplit(':', 1)
            if fl[3] != '0A' or int(hexport, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(hexaddr)  # 32-bit words in host order
            raw = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.append((socket.inet_ntop(fam, raw), fl[9]))
    return out


def _group_owns(pgid: int, inodes: set[str]) -> bool:
    want = {f'socket:[{i}]' for i in inodes}
    for pid in group_alive(pgid):
        try:
            for fd in os.listdir(f'/proc/{pid}/fd'):
                try:
                    if os.readlink(f'/proc/{pid}/fd/{fd}') in want:
                        return True
                except OSError:
                    pass
        except OSError:
            pass
    return False


NGINX_SMS = '''        location = /sms {
            return 200 '{"sent":true}';
        }
'''

# LuaMapHandler runs in place of a ProxyPass: none in apache-proxy.
APACHE_SMS = 'LuaMapHandler "^/sms$" "@WORKDIR@/rlshim.lua" sms'


def _nginx_proxy(location: str, port: int, extra: str = '') -> str:
    """An nginx `location` proxying to 127.0.0.1:port (the request URI
    as the client sent it), with room for the tests' bodies; `extra`: one
    more directive in it."""
    return (f'        location {location} {{\n'
            f'            proxy_pass http://127.0.0.1:{port};\n'
            '            client_max_body_size 4m;\n'
            '            client_body_buffer_size 4m;\n'
            + (f'            {extra}\n' if extra else '') +
            '        }\n')


def _apache_proxy(path: str, port: int) -> str:
    """apache ProxyPass of `path` (and below) to 127.0.0.1:port.

    disablereuse: a connection per request, as nginx's and lighttpd's
    proxies do; the backend (legacy_server) serves one connection at a
    time, and a backend connection a child kept alive would stall the other
    child's requests."""
    return (f'ProxyPass {path} http://127.0.0.1:{port}{path}'
            ' disablereuse=On\n'
            'LimitRequestBody 0\n')


class WebfsLog:
    """webfsd -d's stderr read line by line as access-log entries.

    Its lines are `NNN: text`, NNN the connection's descriptor: `connect
    from (ADDR)`, then per request `METHOD "PATH" VERSION` when it has
    parsed the head and `[error: ]STATUS, connection=...` when it answers,
    `done (N)` at the close. A status without a request line before it (a
    head it cannot parse: 400) is an entry with method and target None.
    feed() returns the entries a line starts; a status line fills in the
    entry it belongs to in place."""

    _LINE = re.compile(r'^(\d{3}): (.*)$')
    _CONNECT = re.compile(r'^connect from \((.*)\)$')
    _REQUEST = re.compile(r'^(\S+) "(.*)" (\S+)$')
    _STATUS = re.compile(r'^(?:error: )?(\d{3}), connection=')

    def __init__(self, pid: int | None):
        self.pid = pid
        self.ip: dict[str, str] = {}
        self.cur: dict[str, dict] = {}

    def feed(self, line: str) -> list[dict]:
        m = self._LINE.match(line)
        if not m:
            return []
        fd, text = m.groups()
        if (c := self._CONNECT.match(text)):
            self.ip[fd] = _fold_ip(c.group(1))
            self.cur.pop(fd, None)
            return []
        if text.startswith('done'):
            self.cur.pop(fd, None)
            return []
        if (r := self._REQUEST.match(text)):
            e = {'client': self.ip.get(fd), 'method': r.group(1),
                 'target': r.group(2), 'status': None, 'bytes_in': None,
                 'pid': self.pid}
            self.cur[fd] = e
            return [e]
        if (st := self._STATUS.match(text)):
            e = self.cur.get(fd)
            if e is not None and e['status'] is None:
                e['status'] = int(st.group(1))
                return []
            e = {'client': self.ip.get(fd), 'method': None, 'target': None,
                 'status': int(st.group(1)), 'bytes_in': None,
                 'pid': self.pid}
            self.cur[fd] = e
            return [e]
        return []


class Server:
    def __init__(self, kind: str, workdir: str, shim: str | None,
                 config: str | None, port: int,
                 echo_port: int | None = None,
                 python_protocol: str | None = None,
                 lighttpd_extra: str | None = None,
                 nginx_extra: str | None = None,
                 nginx_listen: str | None = None,
                 nginx_main: str | None = None,
                 apache_extra: str | None = None,
                 apache_mpm: str = 'event'):
        if kind not in KINDS:
            raise ValueError(f'unknown server kind {kind!r}; one of {KINDS}')
        self.kind = kind
        # nginx-proxy and apache-proxy are nginx and apache (their
        # configuration, log format and process model) with a backend.
        self.base = PROXY_OF.get(kind, kind)
        self.workdir = Path(workdir)
        self.shim = shim
        self.config = config
        self.port = port
        self.echo_port = echo_port
        # python only: 'HTTP/1.1' runs http.server with that protocol_version
        # (keep-alive, requests read one after another from one connection).
        self.python_protocol = python_protocol
        # lighttpd only: appended to the generated lighttpd.conf.
        self.lighttpd_extra = lighttpd_extra
        # nginx only: added to the server block of the generated nginx.conf.
        self.nginx_extra = nginx_extra
        self.nginx_listen = nginx_listen
        self.nginx_main = nginx_main
        # apache only: lines appended to the generated apache2.conf.
        self.apache_extra = apache_extra
        # apache only: which MPM module it loads.
        if apache_mpm not in APACHE_MPMS:
            raise ValueError(f'unknown apache_mpm {apache_mpm!r}; one of '
                             f'{APACHE_MPMS}')
        self.apache_mpm = apache_mpm
        self.proc: subprocess.Popen | None = None
        self._stopped = True
        self._files = []
        self.docroot = self.workdir / 'docroot'
        self.stdout_path = self.workdir / f'{kind}.stdout'
        self.stderr_path = self.workdir / f'{kind}.stderr'
        self.error_log_path: Path | None = None   # nginx, lighttpd, apache
        self.access_log_path: Path | None = None  # nginx, lighttpd, apache
        # nginx-proxy, apache-proxy: the legacy_server behind the proxy,
        # without the shim (started and stopped with this one).
        self.backend: Server | None = None
        if kind in PROXY_OF:
            self.backend = Server('legacy', str(self.workdir / 'backend'),
                                  None, None, free_port())

        f = {
            'legacy': {'echo', 'chunked_echo', 'keepalive', 'pipelining',
                       'ipv6', 'access_log'},
            'python': {'echo', 'ipv6', 'access_log'},
            'nginx': {'keepalive', 'pipelining', 'ipv6', 'workers',
                      'access_log'},
            'lighttpd': {'keepalive', 'pipelining', 'ipv6', 'access_log'},
            'busybox': {'echo', 'ipv6', 'access_log'},
            'apache': {'keepalive', 'pipelining', 'ipv6', 'workers',
                       'access_log'},
            # issue 26 (servers2)
            'webfs': {'keepalive', 'pipelining', 'ipv6', 'access_log'},
            'h2o': {'keepalive', 'pipelining', 'ipv6', 'access_log', 'h2c'},
            'nginx-proxy': {'keepalive', 'pipelining', 'ipv6', 'workers',
                            'access_log', 'echo', 'chunked_echo'},
            'apache-proxy': {'keepalive', 'pipelining', 'ipv6', 'workers',
                             'access_log', 'echo', 'chunked_echo'},
            # issue 26
            'php': {'echo', 'chunked_echo', 'ipv6', 'workers', 'access_log'},
            'php-router': {'echo', 'chunked_echo', 'ipv6', 'workers',
                           'access_log'},
            'gunicorn': {'echo', 'chunked_echo', 'ipv6', 'workers',
                         'access_log'},
            'gunicorn-gthread': {'echo', 'chunked_echo', 'keepalive', 'ipv6',
                                 'workers', 'access_log'},
        }[kind]
        if kind == 'h2o' and echo_port is not None:
            f |= {'echo', 'chunked_echo'}
        if kind in ('nginx', 'lighttpd', 'apache') and echo_port is not None:
            f |= {'echo', 'chunked_echo'}
        if kind == 'python' and python_protocol == 'HTTP/1.1':
            f |= {'keepalive', 'pipelining'}
        self.features: frozenset[str] = frozenset(f)
        self.echo_path: str | None = None
        if 'echo' in f:
            self.echo_path = {'legacy': '/echo', 'nginx': '/echo',
                              'lighttpd': '/echo', 'python': '/cgi-bin/echo',
                              'busybox': '/cgi-bin/echo',
                              'apache': '/echo', 'h2o': '/echo', 'nginx-proxy': '/echo',
                              'apache-proxy': '/echo', 'php': '/echo',
                              'php-router': '/echo', 'gunicorn': '/echo',
                              'gunicorn-gthread': '/echo'}[kind]
        # How many processes answer requests ('workers'): php -S with
        # PHP_CLI_SERVER_WORKERS=2 serves from its first process too.
        self.worker_procs = 3 if kind in PHP_KINDS else 2
        # Environment variables the kind's program is started with.
        self._env_extra: dict[str, str] = {}

    # -- setup --------------------------------------------------------------

    def _subst(self, template: str, **kw) -> str:
        text = (FIXTURES / template).read_text()
        for k, v in kw.items():
            text = text.replace(f'@{k}@', str(v))
        return text

    def _docroot(self, cgi: bool) -> None:
        self.docroot.mkdir(parents=True, exist_ok=True)
        (self.docroot / 'books').write_bytes(BOOKS)
        if cgi:
            (self.docroot / 'cgi-bin').mkdir(exist_ok=True)
            echo = self.docroot / 'cgi-bin' / 'echo'
            shutil.copyfile(FIXTURES / 'echo.cgi', echo)
            echo.chmod(0o755)

    def _prepare(self) -> tuple[list[str], Path]:
        """Write the kind's files; return (argv, cwd)."""
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        if self.kind == 'legacy':
            if not LEGACY_SERVER.exists():
                raise RuntimeError(f'{LEGACY_SERVER} missing: run make')
            return [str(LEGACY_SERVER), '-p', str(self.port)], w
        if self.kind == 'python':
            self._docroot(cgi=True)
            proto = [self.python_protocol] if self.python_protocol else []
            return [PYTHON, str(FIXTURES / 'pyhttp.py'),
                    str(self.port)] + proto, self.docroot
        if self.kind == 'busybox':
            self._docroot(cgi=True)
            return [BUSYBOX, 'httpd', '-f', '-vv', '-p',
                    f'[::]:{self.port}', '-h', str(self.docroot)], self.docroot
        if self.base == 'nginx':
            self._docroot(cgi=False)
            for d in ('client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'):
                (w / 'tmp' / d).mkdir(parents=True, exist_ok=True)
            echo = ''
            sms = NGINX_SMS
            if self.backend is not None:
                # nginx-proxy: every path to the backend, /sms too. A
                # client's half-close does not abort the proxied request
                # (nginx would answer nothing, 499, or the answer, as the
                # timing falls: test_diff half-closes most streams).
                echo = _nginx_proxy('/', self.backend.port,
                                    'proxy_ignore_client_abort on;')
                sms = ''
            elif self.echo_port is not None:
                echo = _nginx_proxy('/echo', self.echo_port)
            echo += self.nginx_extra or ''
            user = 'user root root;' if os.geteuid() == 0 else ''
            user += '\n' + self.nginx_main if self.nginx_main else ''
            conf = w / 'nginx.conf'
            conf.write_text(self._subst('nginx.conf.in', WORKDIR=w,
                                        DOCROOT=self.docroot, PORT=self.port,
                                        USER=user, ECHO=echo, SMS=sms,
                                        LISTEN=f' {self.nginx_listen}'
                                        if self.nginx_listen else ''))
            self.error_log_path = w / 'error.log'
            self.access_log_path = w / 'access.log'
            return [NGINX, '-p', str(w), '-c', str(conf),
                    '-e', str(self.error_log_path)], w
        if self.kind == 'lighttpd':
            self._docroot(cgi=False)
            (self.docroot / 'sms').write_bytes(b'{"sent":true}')
            (w / 'tmp').mkdir(exist_ok=True)
            echo = ''
            if self.echo_port is not None:
                echo = ('$HTTP["url"] =~ "^/echo" {\n'
                        '  proxy.server = ( "" => (( "host" => "127.0.0.1", '
                        f'"port" => {self.echo_port} )) )\n'
                        '}\n')
            conf = w / 'lighttpd.conf'
            conf.write_text(self._subst('lighttpd.conf.in', WORKDIR=w,
                                        DOCROOT=self.docroot, PORT=self.port,
                                        ECHO=echo)
                            + (self.lighttpd_extra or ''))
            self.error_log_path = w / 'error.log'
            self.access_log_path = w / 'access.log'
            return [LIGHTTPD, '-D', '-f', str(conf)], w
        if self.base == 'apache':
            return self._prepare_apache()
        if self.kind == 'webfs':
            self._docroot(cgi=False)
            (w / 'mime.types').write_text('')
            # -F: in the foreground, unforked (it would daemonize); -d: the
            # debug lines access_log() reads; -j: no directory listings; -m: an empty types file (every file
            # application/octet-stream, as nginx's default_type).
            return [WEBFSD, '-F', '-d', '-p', str(self.port), '-r',
                    str(self.docroot), '-j', '-n', 'localhost',
                    '-m', str(w / 'mime.types')], w
        if self.kind == 'h2o':
            return self._prepare_h2o()
        if self.kind in PHP_KINDS:
            return self._prepare_php()
        if self.kind in GUNICORN_KINDS:
            return self._prepare_gunicorn()
        raise AssertionError(self.kind)

    def _prepare_h2o(self) -> tuple[list[str], Path]:
        w = self.workdir
        self._docroot(cgi=False)
        echo = ''
        if self.echo_port is not None:
            # keepalive 0: a connection per request, as the other
            # proxies' (see _apache_proxy): h2o would keep its upstream
            # connection to the one-connection-at-a-time echo server open
            # for 2 s, stalling every other client of it.
            echo = ('      /echo:\n'
                    '        proxy.reverse.url: '
                    f'"http://127.0.0.1:{self.echo_port}/echo"\n'
                    '        proxy.timeout.keepalive: 0\n')
        # As root h2o switches to nobody unless told otherwise (nginx's
        # fixture runs its workers as root too).
        user = 'user: root' if os.geteuid() == 0 else ''
        conf = w / 'h2o.conf'
        conf.write_text(self._subst('h2o.conf.in', WORKDIR=w,
                                    DOCROOT=self.docroot, PORT=self.port,
                                    USER=user, ECHO=echo))
        self.error_log_path = w / 'error.log'
        self.access_log_path = w / 'access.log'
        # worker mode (the default): this process serves, with its threads.
        return [H2O, '-m', 'worker', '-c', str(conf)], w

    def _prepare_php(self) -> tuple[list[str], Path]:
        w = self.workdir
        self._docroot(cgi=False)
        (self.docroot / 'sms').write_bytes(b'{"sent":true}')
        (self.docroot / 't').mkdir(exist_ok=True)
        shutil.copyfile(FIXTURES / 'php_t_index.php',
                        self.docroot / 't' / 'index.php')
        argv = [PHP, '-d', 'display_errors=0', '-S', f'[::]:{self.port}',
                '-t', str(self.docroot)]
        if self.kind == 'php':
            # /echo names the directory: php -S runs its index.php
            (self.docroot / 'echo').mkdir(exist_ok=True)
            shutil.copyfile(FIXTURES / 'php_echo.php',
                            self.docroot / 'echo' / 'index.php')
        else:
            shutil.copyfile(FIXTURES / 'php_router.php', w / 'router.php')
            argv.append(str(w / 'router.php'))
        self._env_extra = {'PHP_CLI_SERVER_WORKERS': '2'}
        return argv, w

    def _prepare_gunicorn(self) -> tuple[list[str], Path]:
        w = self.workdir
        self._docroot(cgi=False)
        self.access_log_path = w / 'access.log'
        self.error_log_path = w / 'error.log'
        argv = [GUNICORN, '--bind', f'[::]:{self.port}', '--workers', '2',
                '--pythonpath', str(FIXTURES), '--chdir', str(w),
                '--access-logfile', str(self.access_log_path),
                '--access-logformat', '%(h)s "%(r)s" %(s)s %(p)s',
                '--error-logfile', str(self.error_log_path),
                '--log-level', 'debug', '--graceful-timeout', '2',
                '--worker-tmp-dir', str(w)]
        if self.kind == 'gunicorn-gthread':
            # --worker-connections 6: a worker holding six connections
            # stops accepting, so that a burst of them reaches both workers
            # (otherwise one worker can take them all); six less the four
            # threads leaves two for keep-alive.
            argv += ['--worker-class', 'gthread', '--threads', '4',
                     '--worker-connections', '6', '--keep-alive', '2']
        argv.append('wsgi_app:app')
        self._env_extra = {'RLSHIM_DOCROOT': str(self.docroot)}
        return argv, w

    def _prepare_apache(self) -> tuple[list[str], Path]:
        w = self.workdir
        self._docroot(cgi=False)
        (w / 'run').mkdir(exist_ok=True)
        shutil.copyfile(FIXTURES / 'apache.lua', w / 'rlshim.lua')
        echo = ''
        sms = APACHE_SMS
        if self.backend is not None:
            # apache-proxy: every path to the backend, /sms too.
            echo = _apache_proxy('/', self.backend.port)
            sms = ''
        elif self.echo_port is not None:
            echo = _apache_proxy('/echo', self.echo_port)
        # Two child processes, whatever the load: the workers scenario
        # wants both to answer, and no third one to appear. event and
        # worker: otherwise Debian's mpm_event.conf values.
        mpm = {
            'event': 'StartServers 2\nServerLimit 2\nThreadsPerChild 25\n'
                     'ThreadLimit 64\nMaxRequestWorkers 50\n'
                     'MinSpareThreads 25\nMaxSpareThreads 75\n'
                     'MaxConnectionsPerChild 0\n',
            'worker': 'StartServers 2\nServerLimit 2\nThreadsPerChild 25\n'
                      'ThreadLimit 64\nMaxRequestWorkers 50\n'
                      'MinSpareThreads 25\nMaxSpareThreads 75\n'
                      'MaxConnectionsPerChild 0\n',
            'prefork': 'StartServers 2\nServerLimit 2\nMinSpareServers 2\n'
                       'MaxSpareServers 2\nMaxRequestWorkers 2\n'
                       'MaxConnectionsPerChild 0\n',
        }[self.apache_mpm]
        ncpu = os.cpu_count() or 1
        if self.apache_mpm == 'prefork' and ncpu >= 2 and \
                ncpu // (ncpu // 2) == 2:
            # prefork serialises accept() across its children with a mutex,
            # and the child that just answered takes the next connection
            # too: one-at-a-time clients would all meet the same child.
            # Two SO_REUSEPORT buckets (a child each) let the kernel spread
            # connections over both, as nginx's reuseport does.
            mpm += f'ListenCoresBucketsRatio {ncpu // 2}\n'
        user = ''
        if os.geteuid() == 0:
            # httpd will not serve as root (its children setuid to User;
            # "User root" is refused unless built with BIG_SECURITY_HOLE).
            user = f'User {APACHE_USER}\nGroup {APACHE_USER}'
            self._apache_reachable()
        conf = w / 'apache2.conf'
        # SMS first: it holds a WORKDIR placeholder itself.
        conf.write_text(self._subst('apache2.conf.in', SMS=sms, WORKDIR=w,
                                    DOCROOT=self.docroot, PORT=self.port,
                                    USER=user, MPM=self.apache_mpm,
                                    MPMCONF=mpm, ECHO=echo)
                        + (self.apache_extra or ''))
        self.error_log_path = w / 'error.log'
        self.access_log_path = w / 'access.log'
        # The master opens the logs (as root) before it forks; the children
        # write through those descriptors, and their stderr, so the shim's
        # lines too, goes to error.log (as with nginx).
        return [APACHE, '-d', str(w), '-f', str(conf), '-DFOREGROUND'], w

    def _apache_reachable(self) -> None:
        """Let apache's children (APACHE_USER) reach what they read at
        request time: the docroot's files, rlshim.lua in the work directory
        and the shim's RLSHIM_CONFIG (read at the child's first accept and
        looked at for reloads). Directories above them inside the temp dir
        (the tests' 0700 mkdtemp dirs) get o+x, no more; anything outside it
        that is not reachable is an error, not changed."""
        import stat
        import tempfile
        tmp = Path(tempfile.gettempdir()).resolve()
        need = [self.docroot, self.workdir / 'rlshim.lua']
        if self.config:
            need.append(Path(self.config))
        for target in need:
            target = target.resolve()
            chain = list(reversed(target.parents))
            if target.is_dir():
                chain.append(target)
            for d in chain:
                if d == Path('/'):
                    continue
                st = d.stat()
                if st.st_mode & stat.S_IXOTH:
                    continue
                if tmp not in d.parents:
                    raise RuntimeError(
                        f'apache: its children run as {APACHE_USER} and '
                        f'cannot traverse {d} (mode '
                        f'{stat.S_IMODE(st.st_mode):04o}): use a work '
                        f'directory under {tmp}')
                d.chmod(stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
        for root, dirs, files in os.walk(self.docroot):
            for n in dirs:
                p = Path(root) / n
                p.chmod(stat.S_IMODE(p.stat().st_mode) | stat.S_IXOTH
                        | stat.S_IROTH)
            for n in files:
                p = Path(root) / n
                p.chmod(stat.S_IMODE(p.stat().st_mode) | stat.S_IROTH)
        for p in need[1:]:
            if p.exists():
                p.chmod(stat.S_IMODE(p.stat().st_mode) | stat.S_IROTH)

    # -- lifecycle ----------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 10.0) -> None:
        """Launch and wait until the port accepts connections.

        Readiness is read from /proc/net/tcp{,6}: a LISTEN socket on the
        port (127.0.0.1, and ::1 when 'ipv6' is claimed) held by this
        server's process group. No probe connection is made (one would
        spend budget of a `match = accept` rule); a bare connect is only
        the fallback when /proc cannot be read.

        A stopped Server may be started again (same port and files; its logs
        are appended to, so access_log() then holds both runs).
        """
        if not self._stopped:
            raise RuntimeError(f'{self.kind} server already started')
        if self.backend is not None:
            self.backend.start(timeout)
        argv, cwd = self._prepare()
        env = dict(os.environ)
        env.pop('LD_PRELOAD', None)
        env.pop('RLSHIM_CONFIG', None)
        if self.shim:
            env['LD_PRELOAD'] = str(self.shim)
        if self.config:
            env['RLSHIM_CONFIG'] = str(self.config)
        env['PYTHONUNBUFFERED'] = '1'
        env.update(self._env_extra)
        env['PATH'] = env.get('PATH', '') + ':/usr/sbin:/usr/bin:/sbin:/bin'
        out = open(self.stdout_path, 'ab')
        err = open(self.stderr_path, 'ab')
        self._files = [out, err]
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=err, start_new_session=True)
        self._stopped = False
        addrs = [(socket.AF_INET, '127.0.0.1')]
        if 'ipv6' in self.features:
            addrs.append((socket.AF_INET6, '::1'))
        deadline = time.monotonic() + timeout
        pending = list(addrs)
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.stop()
                raise RuntimeError(f'{self.kind} server exited with status '
                                   f'{rc} before listening on port '
                                   f'{self.port}:\n{self._log_tail()}')
            ls = _listeners(self.port)
            if ls is not None:
                # Ready when our own process group has a listening socket
                # for each address (a [::] wildcard counts for 127.0.0.1:
                # legacy, python and busybox bind it dual-stack). The
                # kernel queues connections from listen() on, so a connect
                # would succeed; none is made, so a "match = accept" rule
                # of the shim never counts a probe.
                mine = {a for a, ino in ls
                        if _group_owns(self.proc.pid, {ino})}
                need = {'127.0.0.1': {'127.0.0.1', '0.0.0.0', '::'},
                        '::1': {'::1', '::'}}
                pending = [(f, h) for f, h in pending
                           if not (mine & need[h])]
                what = (f'not listening on {pending[0][1]}' if pending
                        else '')
                if ls and not mine:
                    what = 'port held by another process'
            elif pending:
                # No /proc: fall back to a bare connect + close (sends
                # nothing, but a "match = accept" rule counts it).
                fam, host = pending[0]
                what = f'not listening on {host}'
                try:
                    with socket.socket(fam, socket.SOCK_STREAM) as s:
                        s.settimeout(0.5)
                        s.connect((host, self.port))
                    pending.pop(0)
                    continue
                except OSError:
                    pass
            if not pending:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f'{self.kind} server: {what} port '
                                   f'{self.port} after {timeout}s:\n'
                                   f'{self._log_tail()}')
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM the process group, up to 5 s, then SIGKILL. Idempotent."""
        if self.backend is not None:
            self.backend.stop()
        if self.proc is None or self._stopped:
            return
        self._stopped = True
        pgid = self.proc.pid  # start_new_session: the leader's pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self.proc.poll()
            if self.proc.returncode is not None and not group_alive(pgid):
                break
            time.sleep(0.02)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        t = time.monotonic() + 2.0
        while group_alive(pgid) and time.monotonic() < t:
            time.sleep(0.02)
        for f in self._files:
            f.close()
        self._files = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass

    # -- logs ---------------------------------------------------------------

    def _log_tail(self) -> str:
        parts = []
        for p in (self.stderr_path, self.error_log_path, self.stdout_path):
            if p is not None:
                t = _tail(p)
                if t.strip():
                    parts.append(f'--- {p.name} ---\n{t}')
        return '\n'.join(parts) or '(no output)'

    def stderr_text(self) -> str:
        """Everything the server and the shim wrote to stderr / error logs.

        nginx redirects its stderr (so the shim's lines from the workers)
        into error.log; lighttpd's own messages go to error.log while the
        shim's go to stderr. apache's children write their stderr, so the
        shim's lines, to error.log, as nginx's do. Both files are included.
        """
        text = ''
        for p in (self.stderr_path, self.error_log_path):
            if p is not None:
                try:
                    text += p.read_text(errors='replace')
                except OSError:
                    pass
        return text

    def _access_source(self) -> str:
        p = {'legacy': self.stdout_path, 'python': self.stderr_path,
             'busybox': self.stderr_path,
             'webfs': self.stderr_path,
             'php': self.stderr_path, 'php-router': self.stderr_path,
             }.get(self.kind, self.access_log_path)
        try:
            return p.read_text(errors='replace')
        except OSError:
            return ''

    def access_log(self, min_entries: int = 0,
                   timeout: float = 3.0) -> list[dict]:
        """The server's own access log, parsed, oldest first.

        Each entry: client (ip, ::ffff: folded), method, target, status
        (int, or None when not logged), bytes_in, pid.
          bytes_in: legacy = request body bytes; nginx = $request_length,
            lighttpd and apache = %I (whole request: line, headers and
            body);
            python, busybox = None (not logged).
          php, php-router, gunicorn* = None (not logged).
          pid: nginx = the worker's $pid, apache = the child's %P, php = the
            [pid] php -S starts its lines with, gunicorn = %(p)s; legacy,
            python, lighttpd = the one server process; busybox = None (a
            child per connection, unlogged).
          busybox logs no method (None) and no status for CGI requests (None).
        Servers write their line after the response, so this waits until the
        log has at least min_entries entries and has not grown for 100 ms (at
        most `timeout` seconds).
        """
        deadline = time.monotonic() + timeout
        prev = None
        while True:
            text = self._access_source()
            entries = self._parse(text)
            if (text == prev and len(entries) >= min_entries) \
                    or time.monotonic() > deadline:
                return entries
            prev = text
            time.sleep(0.1)

    _RE = {
        'legacy': re.compile(r'^ACCESS (\S+) "(.*)" (\d+) (\d+)$'),
        'python': re.compile(r'^(\S+) - - \[[^\]]*\] "(.*)" (\d{3}) \S+$'),
        'nginx': re.compile(r'^(\S+) "(.*)" (\d{3}) (\d+) (\d+)$'),
        'lighttpd': re.compile(r'^(\S+) "(.*)" (\d{3}) (\d+)$'),
        'apache': re.compile(r'^(\S+) "(.*)" (\d{3}) (\d+) (\d+)$'),
        # issue 26 (servers2): h2o's '%h "%r" %s %b'.
        'h2o': re.compile(r'^(\S+) "(.*)" (\d{3}) \S+$'),
    }
    _BB = re.compile(r'^\[?([0-9A-Fa-f:.]+?)\]?:(\d+): (url|response):(.*)$')

    def _parse(self, text: str) -> list[dict]:
        out = []
        if self.kind in PHP_KINDS + GUNICORN_KINDS:
            last = {}
            for line in text.splitlines():
                e = log_entry(self.kind, line, last)
                if e is not None:
                    out.append(e)
            return out
        if self.kind == 'busybox':
            open_ = {}
            for line in text.splitlines():
                m = self._BB.match(line)
                if not m:
                    continue
                ip, cport, what, val = m.groups()
                key = (ip, cport)
                if what == 'url':
                    e = {'client': _fold_ip(ip), 'method': None,
                         'target': val, 'status': None, 'bytes_in': None,
                         'pid': None}
                    out.append(e)
                    open_[key] = e
                else:
                    e = open_.pop(key, None)
                    try:
                        status = int(val)
                    except ValueError:
                        status = None
                    if e is None:   # an error answered before the url
                        out.append({'client': _fold_ip(ip), 'method': None,
                                    'target': None, 'status': status,
                                    'bytes_in': None, 'pid': None})
                    else:
                        e['status'] = status
            return out
        if self.kind == 'webfs':
            log = WebfsLog(self.pid)
            for line in text.splitlines():
                out += log.feed(line)
            return out
        rx = self._RE[self.base]
        one_pid = self.pid if self.kind in ('legacy', 'python', 'lighttpd',
                                            'webfs', 'h2o') else None
        for line in text.splitlines():
            m = rx.match(line)
            if not m:
                continue
            g = m.groups()
            method, target = _split_request(g[1])
            e = {'client': _fold_ip(g[0]), 'method': method, 'target': target,
                 'status': int(g[2]), 'bytes_in': None, 'pid': one_pid}
            if self.base in ('legacy', 'nginx', 'lighttpd', 'apache'):
                e['bytes_in'] = int(g[3])
            if self.base in ('nginx', 'apache'):
                e['pid'] = int(g[4])
            out.append(e)
        return out


# issue 26: the access-log lines of php -S (its stderr) and of gunicorn
# (access.log with the format _prepare_gunicorn gives it), and the lines that
# say it refused a request it read, unanswered or with its own 400.
_RE_PHP = re.compile(r'^\[(\d+)\] \[[^\]]*\] \[?([0-9A-Fa-f:.]+?)\]?:(\d+) '
                     r'\[(\d{3})\]: (\S+) (\S*)(?: - .*)?$')
_RE_GUNICORN = re.compile(r'^(\S+) "(.*)" (\d{3}) <(\d+)>$')
_RE_PHP_INVALID = re.compile(r'^\[(\d+)\] \[[^\]]*\] \[?([0-9A-Fa-f:.]+?)\]?:\d+ '
                             r'Invalid request \((.*)\)$')
_RE_GUNICORN_INVALID = re.compile(r'^\[[^\]]*\] \[(\d+)\] \[DEBUG\] Invalid '
                                  r'request from ip=(\S+): (.*)$')


def log_entry(kind: str, line: str, last: dict | None = None) -> dict | None:
    """One access-log line of a php or gunicorn kind as an access_log()
    entry (plus 'request', the logged request line), or None.

    php -S 8.2 logs a 501 (a method it does not know) twice, the second
    time with another errno after the " - ": with `last` ({pid: the line's
    connection and request}, kept by the caller across lines) the second is
    None. php -S answers one request per connection, so a line repeating
    its process's last connection is that request again."""
    if kind in PHP_KINDS:
        m = _RE_PHP.match(line)
        if not m:
            return None
        pid, ip, port, status, method, target = m.groups()
        if last is not None:
            key = (ip, port, status, method, target)
            if last.get(pid) == key:
                return None
            last[pid] = key
        return {'client': _fold_ip(ip), 'method': method, 'target': target,
                'status': int(status), 'bytes_in': None, 'pid': int(pid),
                'request': f'{method} {target}'}
    m = _RE_GUNICORN.match(line)
    if not m:
        return None
    ip, req, status, pid = m.groups()
    method, target = _split_request(req)
    return {'client': _fold_ip(ip), 'method': method, 'target': target,
            'status': int(status), 'bytes_in': None, 'pid': int(pid),
            'request': req}


def invalid_entry(kind: str, line: str) -> dict | None:
    """A line of php -S's stderr or gunicorn's error.log (debug) saying it
    refused a request it read as invalid (php: closed unanswered; gunicorn:
    its own 400): {'client', 'pid', 'why'}, or None."""
    rx = _RE_PHP_INVALID if kind in PHP_KINDS else _RE_GUNICORN_INVALID
    m = rx.match(line)
    if not m:
        return None
    pid, ip, why = m.groups()
    return {'client': _fold_ip(ip), 'pid': int(pid), 'why': why}


# ---------------------------------------------------------------------------
# self-check: python3 tests/integration/servers.py [KIND...]
# ---------------------------------------------------------------------------

def _read_response(f):
    """(status, headers dict lower-case, body bytes) from a binary file."""
    line = f.readline()
    if not line:
        raise ConnectionError('connection closed before a response')
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b'\r\n', b'\n', b''):
            break
        k, _, v = h.decode('latin-1').partition(':')
        headers[k.strip().lower()] = v.strip()
    if headers.get('transfer-encoding', '').lower() == 'chunked':
        body = b''
        while True:
            n = int(f.readline().split(b';')[0], 16)
            if n == 0:
                while f.readline() not in (b'\r\n', b'\n', b''):
                    pass
                break
            body += f.read(n)
            f.readline()
    elif 'content-length' in headers:
        body = f.read(int(headers['content-length']))
    else:
        body = f.read()
    return status, headers, body


def _request(host, port, method, path, body=None, chunked=False,
             keep=False):
    with socket.create_connection((host, port), timeout=10) as s:
        hdr = f'{method} {path} HTTP/1.1\r\nHost: test\r\n'
        if not keep:
            hdr += 'Connection: close\r\n'
        data = b''
        if body is not None:
            if chunked:
                hdr += 'Transfer-Encoding: chunked\r\n'
                step = 7000
                for i in range(0, len(body), step):
                    c = body[i:i + step]
                    data += b'%x\r\n' % len(c) + c + b'\r\n'
                data += b'0\r\n\r\n'
            else:
                hdr += f'Content-Length: {len(body)}\r\n'
                data = body
        s.sendall(hdr.encode() + b'\r\n' + data)
        return _read_response(s.makefile('rb'))


def _selfcheck_one(kind, shim, echo_port, root):
    import tempfile
    work = tempfile.mkdtemp(prefix=f'rlshim-fx-{kind}-', dir=root)
    port = free_port()
    config = None
    if shim:
        config = os.path.join(work, 'rlshim.conf')
        with open(config, 'w') as f:
            f.write(f'[global]\nports = {port}\nshm = rlshim-fixture-test\n'
                    '[limit:api]\nmatch = *\nrate = 1000/m\n')
    srv = Server(kind, work, shim, config, port, echo_port)
    notes = []
    t0 = time.monotonic()
    srv.start()
    try:
        st, _, body = _request('127.0.0.1', port, 'GET', '/books')
        assert st == 200 and body.strip() == BOOKS, (st, body[:200])
        notes.append('get')
        if 'ipv6' in srv.features:
            st, _, body = _request('::1', port, 'GET', '/books')
            assert st == 200 and body.strip() == BOOKS, (st, body[:200])
            notes.append('ipv6')
        payload = os.urandom(100 * 1024)
        if 'echo' in srv.features:
            st, _, body = _request('127.0.0.1', port, 'POST', srv.echo_path,
                                   payload)
            assert st == 200 and body == payload, (st, len(body))
            notes.append('echo')
        if 'chunked_echo' in srv.features:
            st, _, body = _request('127.0.0.1', port, 'POST', srv.echo_path,
                                   payload, chunked=True)
            assert st == 200 and body == payload, (st, len(body))
            notes.append('chunked')
        st, _, _ = _request('127.0.0.1', port, 'POST', '/sms', b'to=1')
        notes.append(f'sms={st}')
        if 'keepalive' in srv.features:
            with socket.create_connection(('127.0.0.1', port), 10) as s:
                f = s.makefile('rb')
                for _ in range(3):
                    s.sendall(b'GET /books HTTP/1.1\r\nHost: t\r\n\r\n')
                    st, h, body = _read_response(f)
                    assert st == 200 and body.strip() == BOOKS, (st, h)
            notes.append('keepalive')
        if 'pipelining' in srv.features:
            with socket.create_connection(('127.0.0.1', port), 10) as s:
                f = s.makefile('rb')
                s.sendall(b'GET /books HTTP/1.1\r\nHost: t\r\n\r\n'
                          b'GET /books HTTP/1.1\r\nHost: t\r\n'
                          b'Connection: close\r\n\r\n')
                for _ in range(2):
                    st, h, body = _read_response(f)
                    assert st == 200 and body.strip() == BOOKS, (st, h)
            notes.append('pipelining')
        pids = set()
        if 'workers' in srv.features:
            # php's static files carry no X-Worker; its /t/ script does
            wpath = '/t/w' if kind in PHP_KINDS else '/books'
            if kind == 'gunicorn-gthread':
                # one gthread worker can take every connection that comes
                # one at a time: hold ten open at once, idle (a worker
                # accepts six at most, --worker-connections), then ask on
                # each
                conns = [socket.create_connection(('127.0.0.1', port), 10)
                         for _ in range(10)]
                time.sleep(0.3)
                for c in conns:
                    c.sendall(b'GET /t/w HTTP/1.1\r\nHost: t\r\n'
                              b'Connection: close\r\n\r\n')
                for c in conns:
                    with c:
                        _, h, _ = _read_response(c.makefile('rb'))
                        pids.add(int(h.get('x-worker')))
            for _ in range(40):
                _, h, _ = _request('127.0.0.1', port, 'GET', wpath)
                pids.add(int(h.get('x-worker')))
            assert 2 <= len(pids) <= srv.worker_procs, pids
            notes.append(f'workers={len(pids)}')
        log = srv.access_log(min_entries=1)
        assert log, 'empty access log'
        gets = [e for e in log if e['target'] == '/books']
        assert gets and gets[0]['client'] == '127.0.0.1', log[:3]
        assert gets[0]['method'] in ('GET', None), gets[0]
        if 'ipv6' in srv.features:
            assert gets[1]['client'] == '::1', gets[1]
        if 'echo' in srv.features:
            e = [e for e in log if e['target'] == srv.echo_path][0]
            assert e['bytes_in'] is None or e['bytes_in'] >= len(payload), e
        if pids and kind in PHP_KINDS:
            assert pids <= {e['pid'] for e in log}, (pids, log[-3:])
        elif pids:
            assert {e['pid'] for e in log} == pids, (pids, log[-3:])
        notes.append(f'log={len(log)}')
        if shim:
            assert 'msg="limiting"' in srv.stderr_text(), srv.stderr_text()
            notes.append('shim-limiting')
    finally:
        srv.stop()
        left = group_alive(srv.pid)
        if left:
            notes.append(f'LEFT RUNNING: {left}')
    shutil.rmtree(work, ignore_errors=True)
    return f'{time.monotonic() - t0:.1f}s ' + ' '.join(notes), srv


def _selfcheck(kinds):
    import tempfile
    root = tempfile.mkdtemp(prefix='rlshim-fixtures-')
    echo_port = free_port()
    echo = Server('legacy', os.path.join(root, 'echo'), None, None,
                  echo_port)
    echo.start()
    failed = 0
    try:
        for kind in kinds:
            for shim in (None, str(SHIM)):
                label = f'{kind:8} {"shim" if shim else "bare"}'
                try:
                    msg, srv = _selfcheck_one(kind, shim, echo_port, root)
                    print(f'ok   {label} {msg}', flush=True)
                    if not shim:
                        print(f'     {kind:8} features: '
                              f'{" ".join(sorted(srv.features))}; '
                              f'echo_path {srv.echo_path}', flush=True)
                except Exception as e:  # noqa: BLE001
                    failed += 1
                    print(f'FAIL {label} {type(e).__name__}: {e}',
                          flush=True)
                finally:
                    try:
                        os.unlink('/dev/shm/rlshim-fixture-test')
                    except FileNotFoundError:
                        pass
    finally:
        echo.stop()
    if failed:
        print(f'work dirs of failed runs kept in {root}')
    else:
        shutil.rmtree(root, ignore_errors=True)
    return failed


if __name__ == '__main__':
    sys.exit(1 if _selfcheck(sys.argv[1:] or KINDS) else 0)
