"""One workflow run per directory: a second run is refused, and the lock never outlives its holder, even
one killed with SIGKILL (Snakemake's own lock file would then refuse every later run)."""

import signal
import subprocess
import sys

import pytest

from fdabench.jobs import runlock

HOLD = (
    "import sys, time; from fdabench.jobs.runlock import hold_run_lock; "
    "hold_run_lock(sys.argv[1]); print('held', flush=True); time.sleep(60)"
)


@pytest.fixture(autouse=True)
def _not_held(monkeypatch):
    monkeypatch.setattr(runlock, "_held", None)
    yield
    if runlock._held is not None:
        runlock._held.close()  # releases the lock this test took


def test_a_second_run_is_refused_until_the_first_is_killed(tmp_path, monkeypatch):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(runlock.RunLockedError, match=rf"another snakemake run \(process {holder.pid}\)"):
            runlock.hold_run_lock(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    runlock.hold_run_lock(tmp_path)  # the kernel released it with its holder: no --unlock needed
    assert (tmp_path / runlock.LOCK_FILE).read_text().strip().isdigit()
    runlock.hold_run_lock(tmp_path)  # again in the holding process: a no-op
