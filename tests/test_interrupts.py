"""Ctrl-C reaches the work a flow runs in its task threads: DuckDB statements (staging a table, a SQL
step) and the dumps' scans end at once instead of holding the command until they finish
(``flows/lib/infra/interrupts.py``). Real DuckDB statements, a real signal."""

import signal
import threading
import time

import pytest
import zstandard

from flows.lib.infra import interrupts
from flows.lib.infra.cli import command_parser, interruptible
from flows.lib.infra.sql_runner import run_sql_file
from flows.lib.mimic.staging import connect, stage_table
from tests.demo import DEMO, requires_demo

SLOW = "SELECT count(*) AS n FROM range(100000000000) t(x) WHERE hash(x) % 7 = 3"  # minutes on any machine


@pytest.fixture(autouse=True)
def not_interrupted():
    interrupts.reset()
    yield
    interrupts.reset()


def in_thread(fn) -> tuple[threading.Thread, dict]:
    """``fn()`` in a daemon thread; the dict gets its result or its exception."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 (the test reads it)
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def slow_sql_file(tmp_path):
    path = tmp_path / "marts" / "mart_slow.sql"
    path.parent.mkdir()
    path.write_text(SLOW)
    return path


def wait_until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def test_a_sql_step_ends_at_once_when_the_command_is_interrupted(tmp_path):
    path = slow_sql_file(tmp_path)
    con = connect(threads=1)
    thread, out = in_thread(lambda: run_sql_file(con, path))
    time.sleep(0.3)
    assert thread.is_alive()  # the statement runs for minutes
    started = time.monotonic()
    interrupts.stop_all()
    thread.join(10)
    assert not thread.is_alive(), "the statement went on after the interrupt"
    assert time.monotonic() - started < 10
    assert isinstance(out.get("error"), interrupts.Interrupted)
    assert str(out["error"]) == f"{path}: interrupted"
    assert out["error"].__context__ is None  # DuckDB's error, and the frames it keeps, are not kept with it


def test_a_statement_that_would_start_after_the_interrupt_does_not_start(tmp_path):
    interrupts.stop_all()
    with pytest.raises(interrupts.Interrupted, match="before it started"):
        connect()


@requires_demo
def test_a_table_being_staged_stops_and_leaves_nothing(tmp_path):
    """CHARTEVENTS of the demo, one DuckDB thread: the interrupt lands while the parquet is being
    written; nothing of it stays (no parquet, no temporary file, no staging record)."""
    out_dir = tmp_path / "staged"
    con = connect(threads=1)
    thread, out = in_thread(lambda: stage_table(DEMO, "CHARTEVENTS", out_dir, con=con))
    wait_until(lambda: any(out_dir.glob(".CHARTEVENTS.parquet.tmp-*")) or not thread.is_alive(),
               "the parquet being written")
    interrupts.stop_all()
    thread.join(30)
    assert not thread.is_alive()
    assert "result" not in out, "the table was staged whole: the interrupt came too late to test anything"
    assert isinstance(out["error"], interrupts.Interrupted) and str(out["error"]) == "staging CHARTEVENTS: interrupted"
    assert out["error"].__context__ is None
    assert sorted(p.name for p in out_dir.iterdir()) == []


def test_a_dump_scan_stops_between_its_pieces(tmp_path):
    from flows.lib.reddit.pushshift import iter_line_batches

    dump = tmp_path / "RC_2015-01.zst"
    dump.write_bytes(zstandard.ZstdCompressor().compress(b'{"id": "a"}\n' * 1000))
    assert sum(map(len, iter_line_batches(dump, progress=False))) == 1000
    interrupts.stop_all()
    with pytest.raises(interrupts.Interrupted, match="^reading RC_2015-01.zst: interrupted$"):
        next(iter(iter_line_batches(dump, progress=False)))


def test_ctrl_c_in_a_command_interrupts_the_statements_of_its_task_threads(tmp_path, capsys):
    """What a terminal's Ctrl-C does in a command (``cli.interruptible``): the statement running in
    another thread ends with ``Interrupted`` at once, the command exits with status 130, and Python's
    own SIGINT handler is back afterwards."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    path = slow_sql_file(tmp_path)
    ap = command_parser("python -m flows.example", "An example.")
    with pytest.raises(SystemExit) as exit_info, interruptible(ap):
        con = connect(threads=1)
        thread, out = in_thread(lambda: run_sql_file(con, path))
        time.sleep(0.3)
        assert thread.is_alive()
        started = time.monotonic()
        signal.raise_signal(signal.SIGINT)
    assert exit_info.value.code == 130
    thread.join(10)
    assert not thread.is_alive(), "the statement went on after Ctrl-C"
    assert time.monotonic() - started < 10
    assert isinstance(out.get("error"), interrupts.Interrupted)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "python -m flows.example: interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not interrupts.requested()  # work after the command (in the same process) runs as usual
