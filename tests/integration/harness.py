# SPDX-License-Identifier: MIT
"""harness.py - what the integration tests share: a cmocka-style runner (so
tests/run.sh counts them like the unit tests), raw HTTP clients that can split,
pipeline and drip bytes, and a parser for the responses that come back.

Everything here is the client's view: tests assert on the bytes a client
receives and on the server's own access log, never on the shim's internals.
"""
import errno
import os
import re
import shutil
import subprocess
import tempfile
import socket
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# RL_SHIM=/path/to/librlshim.so runs the suites against another build of the
# shim (a baseline worktree, say); the default is this tree's.
SHIM = os.environ.get('RL_SHIM') or os.path.join(REPO, 'build', 'librlshim.so')


# ---- the runner --------------------------------------------------------------

class Skip(Exception):
    """A test that cannot run here; the reason is printed. Never used for
    something CI is expected to run: see require_root()."""


def require_root(what):
    if os.geteuid() != 0:
        if os.environ.get('CI'):
            raise AssertionError(f'{what} needs root, and CI runs as root')
        raise Skip(f'{what} needs root')


def run(group, tests):
    """tests: list of (name, callable). Prints cmocka's format."""
    print(f'[==========] Running {len(tests)} test(s).', flush=True)
    failed = []
    skipped = 0
    for name, fn in tests:
        print(f'[ RUN      ] {name}', flush=True)
        t0 = time.monotonic()
        try:
            fn()
        except Skip as e:
            skipped += 1
            print(f'[  SKIPPED ] {name}: {e}', flush=True)
            continue
        except Exception:
            failed.append(name)
            for line in traceback.format_exc().rstrip().splitlines():
                print(f'[  ERROR   ] --- {line}')
            print(f'[  FAILED  ] {name}', flush=True)
            continue
        print(f'[       OK ] {name} ({time.monotonic() - t0:.2f} s)', flush=True)
    print(f'[==========] {group}: {len(tests)} test(s) run.')
    print(f'[  PASSED  ] {len(tests) - len(failed) - skipped} test(s).')
    if skipped:
        print(f'[  SKIPPED ] {skipped} test(s).')
    if failed:
        print(f'[  FAILED  ] {len(failed)} test(s), listed below:')
        for name in failed:
            print(f'[  FAILED  ] {name}')
    sys.stdout.flush()
    return 1 if failed else 0


# ---- clients -------------------------------------------------------------------

def connect(port, family=socket.AF_INET, timeout=10.0):
    host = '127.0.0.1' if family == socket.AF_INET else '::1'
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def recv_all(s, limit=1 << 24):
    """Read until the server closes (or the timeout). Returns the bytes."""
    out = bytearray()
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    return bytes(out)


def exchange(port, chunks, family=socket.AF_INET, gap=0.0, shut=False,
             timeout=10.0):
    """Send `chunks` (bytes, or a list of bytes sent separately with `gap`
    seconds between them), then read until the server closes. With `shut`,
    half-close after sending."""
    if isinstance(chunks, (bytes, bytearray)):
        chunks = [chunks]
    try:
        s = connect(port, family, timeout)
    except ConnectionResetError:
        return b''  # refused at accept, before connect() even returned
    try:
        for i, c in enumerate(chunks):
            if i and gap:
                time.sleep(gap)
            s.sendall(c)
        if shut:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError as e:
                # The server reset the connection already (Python's
                # http.server on TLS bytes): what it sent is what counts.
                if e.errno != errno.ENOTCONN:
                    raise
        return recv_all(s)
    except (BrokenPipeError, ConnectionResetError):
        return recv_all(s)
    finally:
        s.close()


def refused(port, family=socket.AF_INET):
    """True if a connection gets nothing back for a request: closed at
    accept, without reading."""
    return exchange(port, request('GET', '/books'), family) == b''


def request(method, path, headers=None, body=b'', version='HTTP/1.1',
            close=True):
    h = {'Host': 'test'}
    if close and version == 'HTTP/1.1':
        h['Connection'] = 'close'
    if body and 'Transfer-Encoding' not in (headers or {}):
        h['Content-Length'] = str(len(body))
    h.update(headers or {})
    head = f'{method} {path} {version}\r\n' + ''.join(
        f'{k}: {v}\r\n' for k, v in h.items()) + '\r\n'
    return head.encode() + body


def chunked(data, size=4096):
    out = bytearray()
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += f'{len(piece):x}\r\n'.encode() + piece + b'\r\n'
    return bytes(out + b'0\r\n\r\n')


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case name -> value (last one wins)
        self.body = body

    def __repr__(self):
        return f'<{self.version} {self.status} {self.reason} {len(self.body)}B>'


def parse_responses(data, methods=None, first_only=False):
    """Split a byte stream into responses. `methods` gives each request's
    method (HEAD responses have no body). A response without a length runs
    to the end. With `first_only`, whatever follows the first response is
    ignored (some servers send a body after a HEAD)."""
    out = []
    pos = 0
    i = 0
    while pos < len(data) and not (first_only and out):
        end = data.find(b'\r\n\r\n', pos)
        if end < 0:
            raise AssertionError(f'incomplete response head: {data[pos:pos+200]!r}')
        lines = data[pos:end].decode('latin-1').split('\r\n')
        version, status, *reason = lines[0].split(' ', 2)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(':')
            headers[k.strip().lower()] = v.strip()
        pos = end + 4
        method = methods[i] if methods and i < len(methods) else 'GET'
        status = int(status)
        if method == 'HEAD' or status in (204, 304) or 100 <= status < 200:
            body = b''
        elif 'content-length' in headers:
            n = int(headers['content-length'])
            body = data[pos:pos + n]
            pos += n
        elif headers.get('transfer-encoding', '').lower() == 'chunked':
            body = bytearray()
            while True:
                le = data.find(b'\r\n', pos)
                size = int(data[pos:le].split(b';')[0], 16)
                pos = le + 2
                if size == 0:
                    pos = data.find(b'\r\n\r\n', pos - 2) + 4
                    break
                body += data[pos:pos + size]
                pos += size + 2
            body = bytes(body)
        else:
            body = data[pos:]
            pos = len(data)
        out.append(Response(version, status, reason[0] if reason else '',
                            headers, body))
        i += 1
    return out


def statuses(responses):
    return [r.status for r in responses]


def wait_for(pred, timeout=5.0, step=0.05):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def check_example(ctl, path, timeout=10):
    """`ctl check` of an example configuration, as an operator would run
    it: a jwt_secret it names is the operator's own, so it is made (mode
    0600) beside a copy of the file first. The CompletedProcess."""
    with open(path) as f:
        text = f.read()
    secrets = set(re.findall(r'^jwt_secret\s*=\s*(\S+)', text, re.M))
    d = None
    if secrets:
        d = tempfile.mkdtemp(prefix='rlshim-example-')
        path = shutil.copy(path, d)
        for k in secrets:
            with open(os.path.join(d, k), 'w') as f:
                f.write('an-example-secret-of-32-bytes-or-more\n')
            os.chmod(os.path.join(d, k), 0o600)
    try:
        return subprocess.run([ctl, 'check', path], capture_output=True,
                              text=True, timeout=timeout)
    finally:
        if d:
            shutil.rmtree(d, ignore_errors=True)


# ---- a TLS client whose records fall where the caller cuts ---------------------

class TLSConn:
    """A TLS client over a connected TCP socket `sock`, driven through
    memory BIOs (ssl.SSLObject), with the socket calls the tests use
    (sendall, recv, shutdown, settimeout, setsockopt, close):

      - each sendall() is one SSL_write of its own: its own records (one
        per 16 KiB), so the server's SSL_read returns the pieces where the
        caller cut the plaintext, as its read() does on a plain socket;
      - shutdown(SHUT_WR) is the TLS half-close: a close_notify, then the
        TCP half-close, and the answers are still read and decrypted after
        it (ssl.SSLSocket.shutdown drops the session, so that a stream
        half-closed after its last send could not read its answers);
      - recv() returns b'' at the end (the server's close_notify, or its
        TCP end without one: `clean` says which); a TLS alert or bytes that
        are not TLS (a server answering in plaintext) raise
        ConnectionResetError, which clients take for a reset, the bytes
        decrypted before it kept.

    The handshake is done in the constructor (socket.timeout, OSError and
    ssl.SSLError as they come)."""

    def __init__(self, sock, ctx, server_hostname='localhost'):
        import ssl
        self._ssl = ssl
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self._in, self._out,
                                server_hostname=server_hostname)
        self.eof = False     # the TCP end read
        self.clean = None    # True: the server's close_notify came first
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ConnectionResetError('the server ended the '
                                               'connection in the handshake')
        self._flush()

    def _flush(self):
        data = self._out.read()
        if data:
            self.sock.sendall(data)

    def _fill(self):
        b = self.sock.recv(65536)
        if not b:
            self._in.write_eof()
            self.eof = True
            return False
        self._in.write(b)
        return True

    def selected_alpn_protocol(self):
        return self.obj.selected_alpn_protocol()

    def version(self):
        return self.obj.version()

    def sendall(self, data):
        ssl = self._ssl
        view = memoryview(bytes(data))
        try:
            while view:
                n = self.obj.write(view)
                view = view[n:]
        except ssl.SSLError as e:
            raise ConnectionResetError(f'TLS: {e}') from None
        self._flush()

    send = sendall

    def recv(self, n=65536):
        ssl = self._ssl
        while True:
            try:
                b = self.obj.read(n)
                if not b:       # close_notify
                    self.clean = True
                return b
            except ssl.SSLWantReadError:
                if self.eof:
                    self.clean = bool(self.clean)
                    return b''
                self._fill()
            except ssl.SSLZeroReturnError:
                self.clean = True
                return b''
            except ssl.SSLEOFError:     # the TCP end, no close_notify
                self.clean = bool(self.clean)
                return b''
            except ssl.SSLError as e:
                raise ConnectionResetError(f'TLS: {e}') from None
            finally:
                try:
                    self._flush()   # what reading wrote (a KeyUpdate's answer)
                except OSError:
                    pass

    def shutdown(self, how):
        ssl = self._ssl
        if how != socket.SHUT_RD:
            try:
                self.obj.unwrap()
            except ssl.SSLError:    # SSLWantReadError: its answer to come
                pass
            self._flush()
        self.sock.shutdown(how)

    def settimeout(self, t):
        self.sock.settimeout(t)

    def setsockopt(self, *a):
        self.sock.setsockopt(*a)

    def close(self):
        self.sock.close()


def tls_context(cafile, alpn=None):
    """A client context trusting `cafile` (the test's certificate), with
    the ALPN protocols `alpn` offered if given."""
    import ssl
    ctx = ssl.create_default_context(cafile=cafile)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx
