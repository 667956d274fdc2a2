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
    """wattio refused a request (the message says why) or the socket broke."""


class _Connection:
    """One connection per process (re-made after a fork), shared by its threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sock = None
        self._file = None
        self._pid = None
        self._warned = False

    def request(self, line):
        path = os.environ.get(SOCKET_ENV)
        if not path:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    "wattio.region: not run under `wattio measure` (no %s): regions measure nothing"
                    % SOCKET_ENV,
                    stacklevel=4,
                )
            return None
        with self._lock:
            if self._sock is None or self._pid != os.getpid():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(_TIMEOUT_S)
                try:
                    s.connect(path)
                except OSError as e:
                    s.close()
                    raise RegionError("cannot reach wattio at %s: %s" % (path, e)) from e
                self._sock, self._file, self._pid = s, s.makefile("rb"), os.getpid()
            try:
                self._sock.sendall(line.encode("utf-8") + b"\n")
                reply = self._file.readline().decode("utf-8").rstrip("\n")
            except OSError as e:
                self._sock = None
                raise RegionError("the wattio socket broke: %s" % e) from e
        if not reply:
            self._sock = None
            raise RegionError("wattio closed the region socket (the measured run ended?)")
        if reply.startswith("ERR "):
            raise RegionError("wattio refused %r: %s" % (line, reply[4:]))
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
        if reply is not None:
            self._id = reply.split(" ", 1)[1]
        _stack.names = parents + [self.name]
        return self

    def __exit__(self, *exc):
        _stack.names = _stack.names[:-1]
        if self._id is not None:
            reply = _connection.request("END " + self._id)
            self._id = None
            figure = json.loads(reply)
            for key in ("energy_j", "energy_label", "attributed_j", "attributed_label",
                        "cpu_s", "window_s"):
                setattr(self, key, figure[key])
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
