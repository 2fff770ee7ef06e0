"""Progress for long-running work: a tqdm bar on a terminal, nothing otherwise.

Every layer may import this module (it sits in ``model/`` so that the import direction
analysis → sim → hdl → model holds). Output goes to standard error, so a verb's report on standard
output stays clean whatever is shown. Progress is shown only when standard error is a terminal and
nobody asked for quiet (:func:`set_quiet`, which the CLI calls for ``--json`` and ``--no-progress``);
piped, redirected or under test it is silent.

Three shapes of progress:

* :func:`bar`: a known number of steps (matrices, tensors, weights).
* :func:`activity`: one step of unknown length (a Verilator build); a bar that shows the elapsed
  time, ticking from a background thread, so the user sees that something is happening.
* :func:`step`: one line saying what is being done next.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["set_quiet", "enabled", "bar", "activity", "step"]

_quiet = False


def set_quiet(quiet: bool = True) -> None:
    """Silence (or allow) all progress output of this process, e.g. for ``--json``."""
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    """Whether progress is shown: standard error is a terminal and :func:`set_quiet` was not called."""
    try:
        return not _quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):      # replaced or closed stderr
        return False


@contextmanager
def bar(total: int | None, desc: str, unit: str = "it") -> Iterator[Callable[[int], None]]:
    """A progress bar of ``total`` steps (``None``: a counter with a rate); yields ``update(n=1)``.
    A no-op when not :func:`enabled`."""
    if not enabled():
        yield lambda n=1: None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit=f" {unit}", unit_scale=(total or 0) >= 10_000, file=sys.stderr,
              leave=False, dynamic_ncols=True) as t:
        yield t.update


@contextmanager
def activity(desc: str, interval: float = 0.5) -> Iterator[Callable[[str], None]]:
    """Show ``desc`` with the elapsed time for the duration of the block (a step of unknown length).

    Yields ``note(text)``, which shows ``text`` after the elapsed time (what the step is at now)."""
    if not enabled():
        yield lambda text: None
        return
    from tqdm import tqdm

    stop = threading.Event()
    t = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}{postfix}", file=sys.stderr, leave=False)

    def tick() -> None:
        while not stop.wait(interval):
            t.refresh()

    ticker = threading.Thread(target=tick, name="ansforge-progress", daemon=True)
    ticker.start()
    try:
        yield lambda text: t.set_postfix_str(text, refresh=False)
    finally:
        stop.set()
        ticker.join()
        t.close()


def step(message: str) -> None:
    """One line on standard error saying what comes next (only when :func:`enabled`)."""
    if enabled():
        from tqdm import tqdm

        tqdm.write(f"» {message}", file=sys.stderr)
