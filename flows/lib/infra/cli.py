"""One convention for every command line: ``--version``, ``--log-level``, help on every option.

    >>> ap = command_parser("python -m flows.example", "An example.")
    >>> args = ap.parse_args(["--log-level", "WARNING"])
    >>> args.log_level
    'WARNING'

Paths given on the command line are checked before any flow (or temporary Prefect server)
starts, so a typo costs an immediate usage error, not a traceback:

    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
    ...     require_path(ap, "--data", "/no/such/folder", "dir")
    >>> err.getvalue().splitlines()[-1]
    'python -m flows.example: error: --data /no/such/folder: no such folder'
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def package_version() -> str:
    """The installed distribution's version (``cet``), or 'unknown' when run from an uninstalled copy."""
    try:
        return version("cet")
    except PackageNotFoundError:
        return "unknown"


def command_parser(prog: str, description: str, **kwargs) -> argparse.ArgumentParser:
    """An ArgumentParser with the shared options. Options given before a subcommand."""
    ap = argparse.ArgumentParser(prog=prog, description=description, **kwargs)
    ap.add_argument("--version", action="version", version=f"%(prog)s (cet {package_version()})")
    ap.add_argument("--log-level", type=log_level, choices=LEVELS, default=default_log_level(),
                    help="log level of CET's own loggers (flows, cet_model) (default: $CET_LOG_LEVEL or INFO)")
    return ap


def default_log_level(environ=None, env_file: str = ".env") -> str:
    """``CET_LOG_LEVEL`` (:func:`configured_log_level`), else INFO. Checked when the command line
    is parsed: a bad value is a usage error naming the setting.

    >>> default_log_level({"CET_LOG_LEVEL": "debug"}), default_log_level({}, env_file="/no/such/.env")
    ('debug', 'INFO')
    """
    return configured_log_level(environ, env_file) or "INFO"


def configured_log_level(environ=None, env_file: str = ".env") -> str | None:
    """``CET_LOG_LEVEL`` from the environment, else from ``.env`` (as every setting), else None."""
    environ = os.environ if environ is None else environ
    if "CET_LOG_LEVEL" in environ:
        return environ["CET_LOG_LEVEL"]
    if os.path.isfile(env_file):
        from dotenv import dotenv_values

        return dotenv_values(env_file).get("CET_LOG_LEVEL") or None
    return None


def log_level(value: str) -> str:
    """A level name, any case, as ``LEVELS`` spells it.

    >>> log_level("warning")
    'WARNING'
    >>> log_level("verbose")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'verbose' (from --log-level, or else CET_LOG_LEVEL in the environment or .env):
    expected one of DEBUG, INFO, WARNING, ERROR
    """
    if value.upper() not in LEVELS:
        raise argparse.ArgumentTypeError(f"{value!r} (from --log-level, or else CET_LOG_LEVEL in the environment or "
                                         f".env): expected one of {', '.join(LEVELS)}")
    return value.upper()


def apply_log_level(args: argparse.Namespace) -> None:
    """Set CET's loggers to the level the command line asked for."""
    for name in ("flows", "cet_model", "cet_experiments"):
        logging.getLogger(name).setLevel(args.log_level)


TERMINAL_FORMAT = "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"  # as Prefect's console


def log_to_terminal() -> None:
    """For a command that loads no Prefect (``flows.train versions``, ``explain``): CET's log lines
    and Python's warnings to stderr, in the layout of Prefect's console. Without a handler only
    warnings would reach the terminal (Python's last resort), and a long command's progress none."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(TERMINAL_FORMAT, "%H:%M:%S"))
    for name in ("flows", "cet_model", "cet_experiments", "py.warnings"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)


@contextmanager
def interruptible(ap: argparse.ArgumentParser):
    """Ctrl-C in a command: ``<command>: interrupted`` and exit status 130 (a shell's for SIGINT)
    instead of a traceback; ``kill`` (SIGTERM) and a hangup likewise, with ``terminated`` and 143,
    ``hung up`` and 129, where they are at their default (``nohup`` leaves a hangup ignored). The fits'
    worker processes leave Ctrl-C to the command, which stops them; what was being written is left
    under its temporary name or removed, as on any error. Ctrl-C also interrupts the DuckDB
    statements and dump scans running in a flow's task threads (``interrupts.on_interrupt``), which
    the flow would otherwise wait for. A download that cannot succeed (``download.DownloadError``,
    after its retries) and a source found unreadable while it is built (``errors.InputError``: a
    table, a dump, a MIMIC file) end the command the same way: one line, ``<command>: <URL>: <why>``
    or ``<command>: <file>: <what is wrong where>``, and exit status 1 instead of a traceback (which
    ``--log-level DEBUG`` logs first)."""
    import signal
    import threading

    from flows.lib.infra import interrupts

    install = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    # kill (SIGTERM, as schedulers stop a job) and a hangup stop the command as Ctrl-C does, where
    # nothing else handles them: its workers stopped, nothing half-written kept; status 143 or 129
    others = [sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is signal.SIG_DFL] \
        if install else []
    if install:
        interrupts.reset()
        for sig in (signal.SIGINT, *others):
            signal.signal(sig, interrupts.on_interrupt)
    stopped, failed, stop = False, None, ("interrupted", 130)
    try:
        yield
    except KeyboardInterrupt:
        stopped = True  # SystemExit is raised below, not here: the interrupt's frames (and the
        #                 connections they hold) are freed before the exit, not kept as its context
    except Exception as exc:
        failed = failure_line(exc)
        if failed is None:
            raise
        logging.getLogger("flows").debug("%s", failed, exc_info=exc)
    finally:
        if install:  # the interruption was this command's: later work in the process runs as usual
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for sig in others:
                signal.signal(sig, signal.SIG_DFL)
            stop = interrupts.stopped_by()
            interrupts.reset()
    if stopped:
        try:
            print(f"{ap.prog}: {stop[0]}", file=sys.stderr)
        except OSError:  # a hangup: the terminal may be gone
            pass
        raise SystemExit(stop[1])
    if failed is not None:
        print(f"{ap.prog}: {failed}", file=sys.stderr)
        raise SystemExit(1)


def failure_line(exc: BaseException) -> str | None:
    """The message of the ``DownloadError`` or ``InputError`` that ``exc`` is or groups (a flow's
    failed task may come back inside an exception group), or None: any other error keeps its
    traceback. Without the download module loaded no download ran, so nothing is imported to ask."""
    from flows.lib.infra.errors import InputError

    download = sys.modules.get("flows.lib.infra.download")
    known = (InputError,) if download is None else (InputError, download.DownloadError)
    stack = [exc]
    while stack:
        e = stack.pop()
        if isinstance(e, known):
            return str(e)
        stack.extend(getattr(e, "exceptions", None) or ())
    return None


def run_here(ap: argparse.ArgumentParser, args: argparse.Namespace, work) -> None:
    """A command's ``work()`` in this process, without Prefect (no server is configured to record a
    flow run): its log on the terminal at the command's level, Ctrl-C as ``interruptible``; prints
    what it returns (the folder it wrote) and exits 0."""
    log_to_terminal()
    apply_log_level(args)
    with interruptible(ap):
        print(work())
    raise SystemExit(0)


@contextmanager
def flow_command(ap: argparse.ArgumentParser):
    """Around a command's flow run: with no Prefect server configured, Prefect's temporary server
    started in a process group of its own (``temporary_server.start``), so that Ctrl-C stops the
    command at once, which records its runs and then stops the server; Ctrl-C as ``interruptible``."""
    from flows.lib.infra import temporary_server

    with interruptible(ap):
        temporary_server.start()
        yield


def without_server() -> bool:
    """Whether a command runs its work in its own process, without Prefect: whenever no Prefect
    server is configured to record a flow run (``PREFECT_API_URL`` is set nowhere Prefect reads it:
    ``settings.configured_api_url``). A temporary server, started for the command, would keep no
    record once it ends."""
    from flows.lib.infra.settings import configured_api_url

    return configured_api_url() is None


def require_path(ap: argparse.ArgumentParser, flag: str, value: str | None, kind: str,
                 contains: tuple[str, ...] = ()) -> None:
    """Exit with a usage error when ``value`` (given as ``flag``) is not an existing ``kind``
    ("dir" or "file"), or is a folder without the files in ``contains``. ``None`` (the option left
    out) and URLs pass: defaults and remote sources are resolved later."""
    if value is None or "://" in value:
        return
    path = Path(value)
    if kind == "dir" and not path.is_dir():
        ap.error(f"{flag} {value}: " + ("not a folder" if path.exists() else "no such folder"))
    if kind == "file" and not path.is_file():
        ap.error(f"{flag} {value}: " + ("not a file" if path.exists() else "no such file"))
    missing = [name for name in contains if not (path / name).is_file()]
    if missing:
        ap.error(f"{flag} {value}: missing {', '.join(missing)}; not a dataset folder")


def api_outage(exc: BaseException) -> bool:
    """True when ``exc``, or an exception it groups or wraps, says the Prefect API could not be
    reached: a transport error, a 5xx answer, or Prefect's poller giving up after them; for its
    events websocket, a refused or dropped connection, no valid HTTP answer (a server still
    starting) or a 5xx answer."""
    import httpx  # here: a command's options are parsed before the network stack loads
    from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus

    stack, seen = [exc], set()
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, httpx.TransportError | ConnectionClosed | InvalidMessage | ConnectionRefusedError
                      | ConnectionResetError):
            return True
        if isinstance(e, httpx.HTTPStatusError) and e.response.status_code >= 500:
            return True
        if isinstance(e, InvalidStatus) and e.response.status_code >= 500:
            return True
        if isinstance(e, RuntimeError) and "exceeded error threshold" in str(e):
            return True
        stack.extend(getattr(e, "exceptions", None) or ())
        stack.extend((e.__cause__, e.__context__))
    return False


def run_build(ap: argparse.ArgumentParser, flow, params, out: str, what: str = "dataset", here=None) -> int:
    """Run a build ``flow`` from its command line ``ap`` (``flow_command``) and print the folder it
    wrote. When the Prefect API goes away during the run (``api_outage``) after ``out`` was written
    and stamped, say so and exit 0: the folder is complete, only the run's last state is not on the
    server. Any other error, or an outage before the stamp, propagates. With no Prefect server
    configured (``without_server``) and ``here`` given, ``here()`` builds in this process instead
    and no temporary server is started for it."""
    from flows.lib.infra.stage_cache import STAMP

    if here is not None and without_server():
        with interruptible(ap):
            print(here())
        return 0
    started = time.time()
    try:
        with flow_command(ap):
            print(flow(params))
        return 0
    except Exception as exc:
        stamp = Path(out) / STAMP
        if not api_outage(exc) or not stamp.is_file() or stamp.stat().st_mtime < started - 1:
            raise
        print(out)
        print(f"warning: the Prefect API went away during the run ({type(exc).__name__}), after the {what} was "
              f"written: {out} is complete and stamped; the flow run's last state is not recorded on the server",
              file=sys.stderr)
        return 0


def duration_text(seconds: float) -> str:
    """``seconds`` as a person reads a wait.

    >>> duration_text(42), duration_text(754), duration_text(7384)
    ('42 s', '12 min 34 s', '2 h 3 min')
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def time_left(done: int, total: int, elapsed: float, left: float, what: str, after: str = "") -> str:
    """A progress line: ``done`` of ``total`` ``what`` took ``elapsed`` seconds, about ``left`` to go
    (once all are done, just the time they took).

    >>> time_left(1, 10, 30.0, 270.0, "runs")[:43]
    '1 of 10 runs in 30 s; about 4 min 30 s left'
    >>> time_left(10, 10, 300.0, 0.0, "runs")
    '10 of 10 runs in 5 min 0 s'
    """
    if done >= total:
        return f"{done} of {total} {what} in {duration_text(elapsed)}"
    finish = time.strftime("%H:%M", time.localtime(time.time() + left))
    return (f"{done} of {total} {what} in {duration_text(elapsed)}; about {duration_text(left)} left{after} "
            f"(near {finish})")
