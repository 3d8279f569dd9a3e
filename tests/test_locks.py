"""One writer per output: a second run waits for the first or refuses, naming it."""

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from flows.lib.infra.locks import OutputLocked, holder, lock_path, output_lock

HOLD = """
import sys, time
from flows.lib.infra.locks import output_lock
with output_lock(sys.argv[1], 0, "test holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold(out, seconds: float) -> subprocess.Popen:
    """Another process holding ``out``'s lock for ``seconds``; returns once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "mimic"
    proc = hold(out, 30)
    try:
        with pytest.raises(OutputLocked, match=rf"mimic: another run is writing it \(pid {proc.pid} .*test holder"
                                               rf".*lock .*\.mimic\.lock\); waited 0 s.*CET_LOCK_WAIT"):
            with output_lock(out, wait_s=0):
                pytest.fail("entered a held lock")
    finally:
        proc.kill()
        proc.wait()


def test_a_second_writer_waits_for_the_first(tmp_path, caplog):
    out = tmp_path / "mimic"
    proc = hold(out, 1.5)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="flows.locks"), output_lock(out, wait_s=60, poll_s=0.05):
        waited = time.monotonic() - t0
        assert holder(out)["pid"] == os.getpid()
    proc.wait()
    assert 0.5 < waited < 30
    assert "another run is writing it" in caplog.text and str(proc.pid) in caplog.text


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "mimic"
    proc = hold(out, 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lock_path(out).exists()  # the file stays; the kernel dropped the lock with its holder
    with output_lock(out, wait_s=0):
        pass
