"""Loaded by the offline tests' child processes: records every attempt to reach a non-loopback
address (through Python's audit events), so a test can prove no command tried to."""

import os
import sys

_LOG = os.environ.get("SOTAKG_NETWORK_LOG")
_LOOPBACK = ("127.", "::1", "localhost", "0.0.0.0")


def _audit(event, args):
    if event not in ("socket.connect", "socket.getaddrinfo", "socket.sendto", "urllib.Request"):
        return
    target = args[1] if event == "socket.connect" else args[0]
    host = target[0] if isinstance(target, tuple) else str(target)
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if event == "urllib.Request":
        host = str(host)
    if not str(host).startswith(_LOOPBACK) and "://127." not in str(host) and "://localhost" not in str(host):
        with open(_LOG, "a") as log:
            log.write(f"{event} {host!r} from {' '.join(sys.argv)}\n")


if _LOG:
    sys.addaudithook(_audit)
