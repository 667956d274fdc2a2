"""Energy of regions of a Python program, measured by `wattio measure`.

`wattio measure -- python3 app.py` hands the program a Unix socket in the environment variable
WATTIO_REGION_SOCKET. A region opened on it is measured as `measure` measures a command: the
machine's energy over the region (`energy_j`, labelled with how it was obtained) and this
process's CPU-time share of it (`attributed_j`). The protocol is one line each way:
`BEGIN <name>` -> `OK <id>`, `END <id>` -> one JSON object.
"""

import functools
import json
import os
import socket
import threading
import warnings

__all__ = ["region", "Region", "RegionError"]

SOCKET_ENV = "WATTIO_REGION_SOCKET"
# How long a reply may take: a region's start and end each read the meter once.
_TIMEOUT_S = 10.0


class RegionError(RuntimeError):
    """Kept for callers that catch it; the client itself never raises it: a measurement that
    fails warns and leaves the region's figures None, and the program runs on."""


class _Connection:
    """One connection per thread (and per process, re-made after a fork): each thread's
    regions count against that connection's bounds only."""

    def __init__(self):
        self._local = threading.local()
        self._warned = False

    def _warn(self, message):
        if not self._warned:
            self._warned = True
            warnings.warn("wattio.region: " + message, stacklevel=4)

    def request(self, line):
        """The reply to `line`, or None (warned once) when there is none to have."""
        path = os.environ.get(SOCKET_ENV)
        if not path:
            self._warn("not run under `wattio measure` (no %s): regions measure nothing" % SOCKET_ENV)
            return None
        local = self._local
        try:
            if getattr(local, "pid", None) != os.getpid():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(_TIMEOUT_S)
                s.connect(path)
                local.sock, local.file, local.pid = s, s.makefile("rb"), os.getpid()
            local.sock.sendall(line.encode("utf-8") + b"\n")
            reply = local.file.readline().decode("utf-8").rstrip("\n")
        except OSError as e:
            local.pid = None
            self._warn("the wattio socket %s failed (%s): this region measures nothing" % (path, e))
            return None
        if not reply:
            local.pid = None
            self._warn("wattio closed the region socket (over its connection bound, or the run ended)")
            return None
        if reply.startswith("ERR "):
            self._warn("wattio refused %r: %s" % (line, reply[4:]))
            return None
        return reply


_connection = _Connection()
_stack = threading.local()


class Region:
    """A named region of code; a context manager, and a decorator (one region per call).

    After it closes: `energy_j` (the machine's energy over the region), `energy_label`,
    `attributed_j` (this process's CPU-time share of it), `attributed_label`, `cpu_s`,
    `window_s`; all None outside `wattio measure`.
    """

    def __init__(self, name):
        name = str(name)
        if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise ValueError("a region name is non-empty text without control characters")
        self.name = name
        self._id = None
        self.path = None
        self.energy_j = self.energy_label = None
        self.attributed_j = self.attributed_label = None
        self.cpu_s = self.window_s = None

    def __enter__(self):
        parents = getattr(_stack, "names", [])
        self.path = "/".join(parents + [self.name])
        reply = _connection.request("BEGIN " + self.path)
        if reply is not None and reply.startswith("OK "):
            self._id = reply[3:]
        _stack.names = parents + [self.name]
        return self

    def __exit__(self, *exc):
        _stack.names = _stack.names[:-1]
        if self._id is not None:
            reply = _connection.request("END " + self._id)
            self._id = None
            try:
                figure = json.loads(reply) if reply else {}
            except ValueError:
                figure = {}
            for key in ("energy_j", "energy_label", "attributed_j", "attributed_label",
                        "cpu_s", "window_s"):
                setattr(self, key, figure.get(key))
        # Never swallows the program's own exception.
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with Region(self.name):
                return func(*args, **kwargs)

        return wrapper


def region(name):
    """`with wattio.region("parse"):` or `@wattio.region("parse")`."""
    return Region(name)
