"""The 7B bench's step measurement (``analysis/bench_7b.py``): what it reports of a step that shares the
machine. (The bench itself takes two hours; ``ansforge bench --only 7b`` runs it.)"""

from __future__ import annotations

import subprocess
import sys

from ansforge.analysis.bench_7b import measure


def test_a_step_that_shares_the_machine_says_so():
    """A step that sleeps while another process spins: its own CPU time is small, and the CPU seconds
    the rest of the machine used meanwhile (``/proc/stat``) show the other process, so that the report
    cannot call such a run one with nothing else running."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        m = measure([sys.executable, "-c", "import time; time.sleep(1.5)"])
    finally:
        spinner.kill()
        spinner.wait()
    assert m.wall >= 1.5 and m.cpu < 0.5, m
    assert m.other_cpu > 0.5, m
