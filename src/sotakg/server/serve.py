"""``sotakg serve``: the store, read-only, over the SPARQL 1.1 Protocol, with the Oxigraph server.

sotakg does not grow a query engine of its own: it runs ``oxigraph serve-read-only`` (the ``oxigraph``
package on PyPI, a dependency of sotakg) as a child process on the store's current
generation, which answers queries at ``/query`` and offers a query page at ``/``. The server runs in
a network of its own where the system allows it (a user and network namespace: ``_OWN_NETWORK``), so
no other process can reach its port and it can reach nothing; elsewhere it listens on a free
loopback port, never shown, and a warning says so. Users reach it through ``guard.GuardServer`` on
``--host``/``--port``, which refuses writes (403), SPARQL Update, SERVICE, LOAD, FROM, over-deep
nesting and over-large queries before the server sees them, caps request and answer sizes
(``--max-request-bytes``, ``--max-result-bytes``) and runs at most ``--max-concurrent`` queries at
once. ``Engine`` keeps the server running: restarted when it dies, or when a query runs past
``--timeout`` (which is how the query is stopped), with a larger thread stack (``RUST_MIN_STACK``).
The generation is held (``store.hold_generation``)
while it is served, so a ``sotakg build`` meanwhile makes a new generation beside it and leaves the
served one in place; the server keeps serving the build it started with until it is restarted.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ..errors import EndpointError, ServeError, UsageProblem
from ..query.remote import DEFAULT_MAX_ANSWER, HttpAnswer, http_request, is_loopback
from ..query.sparql import ENGINE_STACK_BYTES, MAX_DEPTH
from .guard import DEFAULT_MAX_REQUEST, DEFAULT_MAX_RESULT, GuardServer, GuardSettings, running_guard
from .wire import EngineConnection

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7878
#: Seconds a query may run on the server (``--timeout``; the server takes whole seconds).
DEFAULT_SERVER_TIMEOUT = 30
#: Seconds the server has to start answering.
STARTUP_SECONDS = 20.0
#: Seconds the server has to stop after SIGTERM before it is killed.
STOP_SECONDS = 10.0
#: The environment variable naming an oxigraph binary to use instead of the installed one.
ENV_BINARY = "SOTAKG_OXIGRAPH"
#: sotakg depends on the ``oxigraph`` package: it is missing only where it was removed or broken.
INSTALL_HINT = "pip install oxigraph"
READY_PROBE = "/query?query=ASK%7B%7D"


# ------------------------------------------------------------------------------------------ the binary


def find_oxigraph(environ: Mapping[str, str] | None = None) -> str:
    """The ``oxigraph`` server binary: ``$SOTAKG_OXIGRAPH``, else the one installed beside this Python
    (the ``oxigraph`` package's console script), else one on PATH. ServeError naming the install
    command when there is none."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_BINARY)
    if chosen:
        if shutil.which(chosen) is None:
            raise ServeError(f"{ENV_BINARY} names {chosen}, which is not an executable file")
        return chosen
    candidates = [Path(sysconfig.get_path("scripts")) / "oxigraph", Path(sys.executable).parent / "oxigraph"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("oxigraph")
    if found:
        return found
    raise ServeError(
        f"the Oxigraph server is not installed (sotakg depends on the oxigraph package); install it with: "
        f"{INSTALL_HINT}, or point {ENV_BINARY} at an oxigraph binary"
    )


# ------------------------------------------------------------------------------------------ addresses


def bind_address(host: str, port: int) -> str:
    """``host:port`` as the server's --bind takes it (IPv6 addresses in brackets)."""
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


def connect_host(host: str) -> str:
    """Where to reach a server bound to ``host`` from this machine (a wildcard means loopback)."""
    bare = host.strip("[]")
    if bare in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bare == "::":
        return "::1"
    return bare


def base_url(host: str, port: int) -> str:
    """The server's root URL as seen from this machine."""
    target = connect_host(host)
    return f"http://{bind_address(target, port)}"


def bind_warning(host: str, port: int) -> str | None:
    """A warning when the server would be reachable from other machines (it has no authentication)."""
    if is_loopback(host):
        return None
    where = "every network interface" if connect_host(host) != host.strip("[]") else host
    return (
        f"warning: listening on {where} (port {port}) lets anyone who can reach this machine query the graph; "
        f"the server has no authentication. Leave out --host to serve on 127.0.0.1 only."
    )


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nothing listens on now (the system's choice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host.strip("[]"), 0))
        return int(probe.getsockname()[1])


def check_port_free(host: str, port: int) -> None:
    """ServeError when ``host:port`` cannot be bound (in use, or not an address of this machine)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server does (Rust sets SO_REUSEADDR), so a recently closed port is not taken for busy.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bare, port))
        except socket.gaierror as error:
            raise UsageProblem(f"--host {host}: {error.strerror}") from None
        except OSError as error:
            import errno

            if error.errno == errno.EADDRINUSE:
                raise ServeError(
                    f"port {port} on {host} is in use (another server?); choose another with --port"
                ) from None
            if error.errno == errno.EACCES:
                raise ServeError(f"port {port} needs administrator rights; choose one above 1023 with --port") from None
            raise ServeError(f"cannot listen on {bind_address(host, port)}: {error.strerror}") from None


# ------------------------------------------------------------------------------------------ the store


@dataclass(frozen=True)
class ServedStore:
    """The generation being served: its directory, its Oxigraph database and its triple count."""

    generation: Path
    triples: int

    @property
    def database(self) -> Path:
        from ..graph.store import DATABASE

        return self.generation / DATABASE


def hold_current_generation(data_dir: Path, store_path: Path) -> ServedStore:
    """Build the store if stale, then hold its current generation for this process's lifetime.

    The generation is read and held under the build lock: a build deletes the generation it replaces
    only if nobody holds it, and it decides that under the same lock, so it cannot slip in between.
    """
    from ..graph.open import BUILD_WAIT_SECONDS, ensure_fresh
    from ..graph.store import StoreLayout, build_lock, hold_generation, read_manifest
    from ..records.sources import display_path

    layout = StoreLayout(store_path)
    ensure_fresh(data_dir, store_path)
    with build_lock(layout, wait_seconds=BUILD_WAIT_SECONDS):
        generation = layout.current_generation()
        if generation is None:
            raise ServeError(f"no store at {display_path(store_path)}; run 'sotakg build' first")
        generation = generation.resolve()
        hold_generation(generation)
    return ServedStore(generation, int(read_manifest(generation).get("triples", 0)))


# ------------------------------------------------------------------------------------------ the server


def child_setup() -> Callable[[], None]:
    """A preexec function for the server process: SIGINT and SIGTERM back to their defaults (a
    signal ignored here, as after a committed build, would stay ignored in the child and it could not
    be stopped), and, on Linux, SIGTERM to the child when sotakg dies, even by SIGKILL, so a server is
    never left behind. (Linux sends that when the thread that started the child ends: start servers
    from a thread that lives as long as they should.)"""
    prctl = None
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if prctl is not None:
            prctl(pr_set_pdeathsig, signal.SIGTERM)

    return preexec


#: Run with ``sys.executable -I -S -c`` in place of the server when it is ``isolated``: a user and
#: network namespace of its own (no interface but its own loopback, brought up here), the server
#: started in it, and then, for each byte the guard sends on the control socket (argv[1]), a TCP
#: connection to the server made inside that network and handed over (SCM_RIGHTS). Only the guard
#: reaches the server so: no other process of the machine can connect to its port, and the server
#: itself can connect to nothing outside (a SERVICE or LOAD that got past the check goes nowhere).
#: Exits 125 when the system allows no such namespace (the caller then runs the server plainly).
_OWN_NETWORK = r"""
import ctypes, fcntl, os, resource, signal, socket, struct, sys, threading
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash of the server leaves no core file behind
control = socket.socket(fileno=int(sys.argv[1]))
port, command = int(sys.argv[2]), sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
try:
    if libc.unshare(0x10000000 | 0x40000000) != 0:  # CLONE_NEWUSER | CLONE_NEWNET
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (gid, gid))):
        with open("/proc/self/" + name, "w") as handle:
            handle.write(text)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # SIOCGIFFLAGS, SIOCSIFFLAGS: lo up
        flags = struct.unpack("16sH14s", fcntl.ioctl(probe, 0x8913, struct.pack("16sH14s", b"lo", 0, b"")))[1]
        fcntl.ioctl(probe, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))
except OSError as error:  # none allowed here, or allowed but held back (AppArmor's unprivileged_userns)
    sys.stderr.write("sotakg: no network of its own for the Oxigraph server: %s\n" % (error.strerror or error))
    sys.exit(125)
me = os.getpid()
child = os.fork()
if child == 0:
    control.close()
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the server goes when this process goes
    if os.getppid() != me:
        os._exit(1)
    os.execv(command[0], command)
for number in (signal.SIGTERM, signal.SIGINT):
    signal.signal(number, lambda number, frame: os.kill(child, number))
def hand_over():
    while True:
        if not control.recv(16):  # the guard is gone
            os.kill(child, signal.SIGKILL)
            return
        try:
            connection = socket.create_connection(("127.0.0.1", port), 5)
        except OSError as error:
            control.send(str(error).encode()[:400] or b"no connection")
            continue
        connection.setblocking(True)  # handed over as a plain socket, not in the timeout's non-blocking mode
        socket.send_fds(control, [b"ok"], [connection.fileno()])
        connection.close()
threading.Thread(target=hand_over, daemon=True).start()
status = os.waitpid(child, 0)[1]  # on the main thread, which alone may set a signal's handler
if os.WIFSIGNALED(status):  # die of the same signal, so that the guard can say which
    try:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
        pass
    os.kill(me, os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
"""
#: The exit status of ``_OWN_NETWORK`` when the system allows no namespace of its own.
NO_OWN_NETWORK = 125
#: What is said when the server cannot have a network of its own and runs on loopback instead.
NO_OWN_NETWORK_WARNING = (
    "warning: this system gives the Oxigraph server no network of its own (user namespaces), so its "
    "private port on 127.0.0.1 is open to every local user, past the guard; serve on a machine of your "
    "own, or allow unprivileged user namespaces"
)
#: The port the server listens on inside a network of its own (nothing else is there).
OWN_NETWORK_PORT = 7878


def engine_port(isolated: bool) -> int:
    """The port for a server: the fixed one in a network of its own, else a free loopback one."""
    return OWN_NETWORK_PORT if isolated else free_port()


def own_network_possible() -> bool:
    """Whether the server can be given a network of its own here: Linux (user namespaces)."""
    return sys.platform.startswith("linux") and Path("/proc/self/ns/net").exists()


class OxigraphServer:
    """``oxigraph serve-read-only`` on a database, as a child process.

    ``log`` receives the server's output (None: this process's standard output and error).
    ``isolated``: in a network of its own (``_OWN_NETWORK``), reached only through ``connect``.
    Use as a context manager, or call ``start``, ``wait_ready`` and ``stop``.
    """

    def __init__(
        self,
        database: Path,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        timeout: int | None = DEFAULT_SERVER_TIMEOUT,
        binary: str | None = None,
        log: IO[bytes] | None = None,
        isolated: bool = False,
    ):
        self.database = database
        self.host = host
        self.port = port
        self.timeout = timeout
        self.binary = binary or find_oxigraph()
        self.log = log
        self.isolated = isolated
        self.process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._control_lock = threading.Lock()

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def command(self) -> list[str]:
        command = [self.binary, "serve-read-only", "--location", str(self.database)]
        command += ["--bind", bind_address(self.host, self.port)]
        if self.timeout is not None:
            command += ["--timeout-s", str(self.timeout)]
        return command

    def start(self) -> None:
        """Start the server process (in its own session: a Ctrl-C reaches sotakg, which forwards it)."""
        environment = dict(os.environ)
        environment.setdefault("RUST_MIN_STACK", str(ENGINE_STACK_BYTES))
        command = self.command()
        kept: tuple[int, ...] = ()
        theirs = None
        if self.isolated:
            self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            command = [sys.executable, "-I", "-S", "-c", _OWN_NETWORK, str(theirs.fileno()), str(self.port), *command]
            kept = (theirs.fileno(),)
        try:
            self.process = subprocess.Popen(
                command,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                start_new_session=True,
                preexec_fn=child_setup(),
                pass_fds=kept,
            )
        except OSError as error:
            raise ServeError(f"cannot start {self.binary}: {error.strerror or error}") from None
        finally:
            if theirs is not None:
                theirs.close()

    def refused_own_network(self) -> bool:
        """Whether this ``isolated`` server stopped because the system allows it no network of its own."""
        return self.isolated and self.process is not None and self.process.poll() == NO_OWN_NETWORK

    def connect(self, seconds: float) -> socket.socket:
        """A TCP connection to the server: to its port, or for an ``isolated`` one, made inside its
        network and handed over. OSError when there is none to be had (the server is not up, or gone)."""
        if self._control is None:
            return socket.create_connection((connect_host(self.host), self.port), seconds)
        with self._control_lock:
            self._control.settimeout(seconds)
            self._control.send(b"c")
            message, handed, _flags, _address = socket.recv_fds(self._control, 512, 1)
        if not handed:
            said = message.decode("utf-8", "replace") or "the server's network is gone"
            raise ConnectionRefusedError(f"cannot reach the Oxigraph server: {said}")
        return socket.socket(fileno=handed[0])

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, seconds: float = STARTUP_SECONDS, stop: Callable[[], bool] = lambda: False) -> None:
        """Return once the server answers a query; ServeError if it exits or stays silent for ``seconds``.
        ``stop`` ends the wait early (returning) when it becomes true."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stop():
            if not self.running():
                code = self.process.returncode if self.process is not None else None
                raise ServeError(f"the Oxigraph server stopped while starting (exit code {code}){self._log_tail()}")
            if self._answers_probe():
                return
            time.sleep(0.05)
        if not stop():
            raise ServeError(f"the Oxigraph server did not answer within {seconds:g} s{self._log_tail()}")

    def _answers_probe(self) -> bool:
        try:
            connection = EngineConnection("", 0, 1.0, self.connect(1.0))
        except OSError:
            return False
        try:
            return connection.request("GET", READY_PROBE, [("Host", "127.0.0.1")], None).status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()

    def _log_tail(self) -> str:
        if self.log is None or not hasattr(self.log, "seek"):
            return ""
        self.log.flush()
        self.log.seek(0)
        text = self.log.read()[-2000:].decode("utf-8", "replace").strip()
        return f":\n{text}" if text else ""

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the server if it runs."""
        if self.running() and self.process is not None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def wait(self) -> int:
        """Wait for the server to exit; its exit status."""
        assert self.process is not None
        return self.process.wait()

    def stop(self) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after STOP_SECONDS) and reap it."""
        if self._control is not None:
            self._control.close()  # an isolated server's holder stops it then, whatever else happens
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def __enter__(self) -> OxigraphServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


MB = 1024 * 1024
#: Less than this, and an idle engine would be restarted over and over.
MIN_ENGINE_MEMORY = 128 * MB
#: The engine's memory is read every this many rounds of its watcher (of 50 ms).
MEMORY_CHECK_ROUNDS = 2


def default_engine_memory() -> int:
    """The default of ``--max-memory``: half the machine's memory (4 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 4 * 1024 * MB


def child_pids(pid: int, threads: bool = True) -> list[int]:
    """The children of process ``pid`` (Linux's /proc; none elsewhere): of each of its threads, or
    with ``threads`` False of its main thread only (the one that starts an engine). A thread that
    ends while they are read is passed over."""
    tasks: list[Path] = [Path(f"/proc/{pid}/task/{pid}")]
    if threads:
        with contextlib.suppress(OSError):
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
    children: list[int] = []
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            children += [int(child) for child in (task / "children").read_text().split()]
    return children


def resident_bytes(pid: int) -> int:
    """The memory resident in process ``pid`` and its descendants (Linux's /proc; 0 elsewhere): an
    engine in a network of its own is the child of its holder's main thread. Read at a cost that does
    not grow with the engine's threads (only main threads' children are listed)."""
    total, pending, seen = 0, [pid], set()
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        pending += child_pids(current, threads=False)
    return total


class Engine:
    """The Oxigraph server behind the guard, kept running (``guard.EngineLink``).

    A watcher thread restarts it within a second when it dies (a crash, or ``stop_runaway`` killing
    it because a query ran past its time: the server cannot cancel a running query, so the process
    that holds one is the unit that stops), and logs one line saying why. Each start is a new
    generation on a new loopback port; until it answers, ``address`` returns None and the guard
    answers 503 with Retry-After.
    """

    def __init__(
        self,
        database: Path,
        timeout: int,
        binary: str,
        log: Callable[[str], object],
        isolated: bool | None = None,
        max_memory: int | None = None,
    ):
        self.database, self.timeout, self.binary, self.log = database, timeout, binary, log
        #: Bytes of memory the engine may hold (``--max-memory``); past them it is restarted.
        self.max_memory = max_memory if max_memory is not None else default_engine_memory()
        #: In a network of its own (``OxigraphServer.isolated``): by default where the system allows it.
        self.isolated = own_network_possible() if isolated is None else isolated
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._server: OxigraphServer | None = None
        self._output: IO[bytes] | None = None
        self._generation = 0
        self._reason: str | None = None
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        """Start the first server and wait until it answers (ServeError if it cannot start)."""
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="sotakg-engine-watch", daemon=True)
        self._watcher.start()

    def _spawn(self) -> None:
        output = tempfile.TemporaryFile()  # the server's own lines (its private address) stay out of sight
        # No --timeout-s: the server keeps a thread alive for the whole timeout of every query it
        # answered (thousands a second under load, each with a RUST_MIN_STACK stack) until it cannot
        # spawn one and aborts. The guard enforces --timeout itself, by restarting this process.
        server = OxigraphServer(
            self.database, DEFAULT_HOST, engine_port(self.isolated), None, self.binary, output, self.isolated
        )
        server.start()
        try:
            server.wait_ready(stop=self._stopping.is_set)
        except ServeError:
            server.stop()
            output.close()
            if server.refused_own_network():
                self.isolated = False
                self.log(NO_OWN_NETWORK_WARNING)
                return self._spawn()
            raise
        with self._lock:
            self._server, self._output = server, output
            self._generation += 1
        self._ready.set()

    def address(self, wait: float) -> tuple[str, int, int] | None:
        if not self._ready.wait(wait):
            return None
        with self._lock:
            server = self._server
            if server is None or not server.running():
                return None
            return DEFAULT_HOST, server.port, self._generation

    def connect(self, generation: int, seconds: float) -> socket.socket:
        """A connection to the engine of ``generation`` (``OxigraphServer.connect``); OSError when it
        is gone or replaced."""
        with self._lock:
            server = self._server if generation == self._generation else None
        if server is None:
            raise ConnectionRefusedError("the Oxigraph server was restarted")
        return server.connect(seconds)

    def stop_runaway(self, generation: int, reason: str) -> None:
        with self._lock:
            if generation != self._generation or self._server is None:
                return  # already restarted
            self._reason = reason
            self._ready.clear()
            self._server.signal(signal.SIGKILL)

    def has_stopped(self, generation: int, wait: float) -> bool:
        with self._lock:
            if generation != self._generation or self._server is None:
                return True
            process = self._server.process
        if process is None:
            return True
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _watch(self) -> None:
        # Linux stops a child (PR_SET_PDEATHSIG) when the thread that started it ends: this thread
        # starts the replacements and lives as long as the engine.
        rounds = 0
        while not self._stopping.wait(0.05):
            with self._lock:
                server = self._server
            rounds += 1
            if server is not None and server.running() and rounds % MEMORY_CHECK_ROUNDS == 0:
                self._check_memory(server)
            if server is None or server.running():
                continue
            self._ready.clear()
            code = server.wait()
            why = self._reason or (
                f"it was killed by {signal.Signals(-code).name}" if code < 0 else f"it exited with code {code}"
            )
            self.log(f"sotakg serve: the Oxigraph server stopped ({why}); restarting it")
            self._reason = None
            if self._output is not None:
                self._output.close()
            try:
                self._spawn()
            except ServeError as error:
                self.log(f"sotakg serve: could not restart the Oxigraph server: {error}")
                time.sleep(0.5)

    def _check_memory(self, server: OxigraphServer) -> None:
        """Restart the engine when it holds more than ``max_memory``: a query's intermediate results
        (an ORDER BY over a product of patterns grows by hundreds of MB a second) would otherwise take
        the machine's memory until the kernel kills a process of its choosing, the guard's perhaps."""
        process = server.process
        if process is None:
            return
        used = resident_bytes(process.pid)
        if used <= self.max_memory:
            return
        with self._lock:
            if self._server is not server:
                return
            self._reason = self._reason or (
                f"it held {used // MB} MB, over --max-memory ({self.max_memory // MB} MB): a query's "
                f"intermediate results; the queries it was answering got 503"
            )
            self._ready.clear()
            server.signal(signal.SIGKILL)

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()
        if self._output is not None:
            self._output.close()


# ------------------------------------------------------------------------------------------ commands


def reachable_urls(host: str, port: int) -> list[str]:
    """The URLs the guard answers at: ``host`` itself, or for a wildcard (``0.0.0.0``, ``::``) every
    address of this machine's network interfaces of that family, loopback first."""
    bare = host.strip("[]")
    if bare not in ("0.0.0.0", "::", ""):
        return [f"http://{bind_address(bare, port)}"]
    family = socket.AF_INET6 if bare == "::" else socket.AF_INET
    found = [connect_host(bare)]
    for address in interface_addresses(family):
        if address not in found:
            found.append(address)
    return [f"http://{bind_address(address, port)}" for address in found]


def interface_addresses(family: int) -> list[str]:
    """The addresses of this machine's interfaces (Linux: the kernel's tables; elsewhere: none)."""
    addresses: list[str] = []
    if family == socket.AF_INET6:
        try:
            lines = Path("/proc/net/if_inet6").read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            raw = line.split()[0]
            addresses.append(socket.inet_ntop(socket.AF_INET6, bytes.fromhex(raw)))
        return addresses
    try:
        import fcntl
        import struct

        names = [name for _, name in socket.if_nameindex()]
    except (ImportError, OSError):
        return []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for name in names:
            try:
                packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            addresses.append(socket.inet_ntoa(packed[20:24]))
    return addresses


def serve_banner(
    store_path: Path,
    served: ServedStore,
    url: str | list[str],
    timeout: int,
    max_request_bytes: int = DEFAULT_MAX_REQUEST,
    max_result_bytes: int = DEFAULT_MAX_RESULT,
) -> str:
    """What ``sotakg serve`` prints once the server answers: the guard's addresses, never the engine's."""
    from ..records.schema import display_path

    urls = [url] if isinstance(url, str) else url
    where = "".join(f"  query page:       {one}/\n  SPARQL endpoint:  {one}/query\n" for one in urls)
    return (
        f"Serving {display_path(store_path)} ({served.triples} triples) read-only with the Oxigraph server.\n"
        f"{where}"
        f"Queries stop after {timeout} s; updates and Graph Store writes are refused (403).\n"
        f"SERVICE, LOAD, FROM and nesting deeper than {MAX_DEPTH} are refused (400); requests over "
        f"{max_request_bytes} bytes are refused (413) and answers are cut at {max_result_bytes} bytes.\n"
        f"It serves this build: after 'sotakg build', stop it and start it again to serve the new data.\n"
        f"Press Ctrl-C to stop.\n"
    )


#: Seconds the engine of ``serve --get`` lets a query run past ``--timeout`` before it stops the query
#: itself: the guard stops it first. An engine that stops a query it is answering writes its error
#: into the answer and ends it as if whole (N-Triples, CSV and TSV have no closing mark to tell).
ENGINE_BACKSTOP_SECONDS = 10


def guard_settings(
    upstream: OxigraphServer,
    seconds: float,
    max_request_bytes: int = DEFAULT_MAX_REQUEST,
    max_result_bytes: int = DEFAULT_MAX_RESULT,
) -> GuardSettings:
    """What the guard in front of ``upstream`` lets through; a query gets ``seconds`` (``--timeout``)."""
    return GuardSettings(
        connect_host(upstream.host),
        upstream.port,
        max_request_bytes=max_request_bytes,
        max_result_bytes=max_result_bytes,
        upstream_seconds=seconds,
        connect=lambda _generation, connect_seconds: upstream.connect(connect_seconds),
    )


def serve(
    data_dir: Path,
    store_path: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    timeout: int = DEFAULT_SERVER_TIMEOUT,
    echo: Callable[[str], Any] = print,
    warn: Callable[[str], Any] = print,
    max_request_bytes: int = DEFAULT_MAX_REQUEST,
    max_result_bytes: int = DEFAULT_MAX_RESULT,
    max_concurrent: int | None = None,
    max_memory: int | None = None,
) -> int:
    """Serve the store until SIGINT or SIGTERM; 0 when stopped so. ``max_memory``: bytes the engine
    may hold before it is restarted (default: half the machine's memory).

    The Oxigraph server listens on a free loopback port, kept running by ``Engine`` (restarted when it
    dies or holds a query past ``timeout``); the guard (``guard.GuardServer``) listens on ``host:port``,
    screens every request and runs at most ``max_concurrent`` queries at once (default: the number of
    cores). ``echo`` receives the banner once the server answers, ``warn`` the warning for a
    non-loopback host and the engine's restarts. ServeError when the server cannot start.
    """
    if max_memory is not None and max_memory < MIN_ENGINE_MEMORY:
        raise UsageProblem(
            f"--max-memory {max_memory} bytes is less than the engine needs to start "
            f"({MIN_ENGINE_MEMORY // MB} MB or more, such as 2G)"
        )
    served = hold_current_generation(data_dir, store_path)
    binary = find_oxigraph()
    check_port_free(host, port)
    warning = bind_warning(host, port)
    if warning:
        warn(warning)
    engine = Engine(served.database, timeout, binary, warn, max_memory=max_memory)
    settings = GuardSettings(
        DEFAULT_HOST,
        0,
        max_request_bytes=max_request_bytes,
        max_result_bytes=max_result_bytes,
        upstream_seconds=float(timeout),
        log=warn,
        max_concurrent=max_concurrent or os.cpu_count() or 1,
        engine=engine,
        connect=engine.connect,
    )
    proxy = GuardServer(host, port, settings)
    proxy_thread: threading.Thread | None = None
    stop_requested: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        stop_requested.append(signum)

    previous = _install({signal.SIGINT: forward, signal.SIGTERM: forward})
    try:
        try:
            engine.start()
        except ServeError:
            if stop_requested:
                return 0
            raise
        proxy_thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        proxy_thread.start()
        if not stop_requested:
            echo(
                serve_banner(
                    store_path, served, reachable_urls(host, port), timeout, max_request_bytes, max_result_bytes
                )
            )
        while not stop_requested:
            time.sleep(0.1)
    finally:
        engine.stop()
        if proxy_thread is not None:
            proxy.shutdown()
            proxy_thread.join(5)
        proxy.server_close()
        _install(previous)
    return 0


def _install(handlers: Mapping[int, Any]) -> dict[int, Any]:
    """Install signal handlers (in the main thread only); the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}


def get_once(
    data_dir: Path,
    store_path: Path,
    path: str,
    timeout: int = DEFAULT_SERVER_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_ANSWER,
    max_request_bytes: int = DEFAULT_MAX_REQUEST,
    max_result_bytes: int = DEFAULT_MAX_RESULT,
    warn: Callable[[str], Any] = lambda line: print(line, file=sys.stderr),
) -> HttpAnswer:
    """Start the server and its guard on free loopback ports, GET ``path`` through the guard, stop
    them: the answer (a refused query comes back as the guard's 400 or 403). ``warn`` receives the
    warning when the server cannot have a network of its own.

    For scripts and CI (``sotakg serve --get PATH``). UsageProblem when ``path`` does not start with
    ``/``; ServeError when the server does not start or does not answer, or the answer is cut short
    (as at ``max_result_bytes``).
    """
    if not path.startswith("/"):
        raise UsageProblem(f"--get takes a path starting with /, such as /query?query=ASK%7B%7D, not {path!r}")
    served = hold_current_generation(data_dir, store_path)
    binary = find_oxigraph()
    problem: ServeError | None = None
    isolated = own_network_possible()
    for _attempt in range(3):  # another process may take the free port before the server binds it
        with tempfile.TemporaryFile() as log:
            port = engine_port(isolated)
            backstop = timeout + ENGINE_BACKSTOP_SECONDS
            with OxigraphServer(served.database, DEFAULT_HOST, port, backstop, binary, log, isolated) as server:
                try:
                    server.wait_ready()
                except ServeError as error:
                    problem = error
                    if server.refused_own_network():
                        isolated = False
                        warn(NO_OWN_NETWORK_WARNING)
                    continue
                settings = guard_settings(server, timeout, max_request_bytes, max_result_bytes)
                with running_guard(DEFAULT_HOST, 0, settings) as proxy:
                    url = base_url(DEFAULT_HOST, proxy.port)
                    try:
                        # The guard stops a query at ``timeout`` (a 504, or an answer visibly cut short).
                        return http_request("GET", url + path, timeout=timeout + 5, max_bytes=max_bytes)
                    except EndpointError as error:
                        raise ServeError(f"GET {path}: {error}") from None
    assert problem is not None
    raise problem
