"""Progress for long-running work: a tqdm bar on a terminal, nothing otherwise.

Every layer may import this module (it sits in ``model/`` so that the import direction
analysis → sim → hdl → model holds). Output goes to standard error, so a verb's report on standard
output stays clean whatever is shown. Progress is shown only when standard error is a terminal and
nobody asked for quiet (:func:`set_quiet`, which the CLI calls for ``--json``, ``--quiet`` and
``--no-progress``); piped, redirected or under test it is silent: not one byte.

Three shapes of progress, each showing the elapsed time, redrawn every second from a background
thread so that the time moves even while the work between two updates is long:

* :func:`bar`: a known number of steps (matrices, tensors, weights), advanced by the work done.
* :func:`activity`: one step of unknown length (a Verilator build, a yosys run): what is being done and
  the elapsed time.
* :func:`step`: one line saying what is being done next.

No colour is ever written (no ``colour=`` to tqdm, no SGR sequence), so ``NO_COLOR`` has nothing to
turn off; :func:`colour_allowed` is what a future coloured output must consult.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["set_quiet", "enabled", "colour_allowed", "bar", "Bar", "activity", "step"]

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


def colour_allowed() -> bool:
    """Whether coloured output would be allowed: progress is shown and ``NO_COLOR`` is unset or empty
    (https://no-color.org). ansforge writes no colour today."""
    return enabled() and not os.environ.get("NO_COLOR")


#: Seconds between two redraws of a bar or an activity by its background thread.
TICK_SECONDS = 1.0

#: Held while a ticker thread redraws a bar, and across every ``fork`` of this process: a process forked
#: for work (``compress --threads``) never starts with a redraw half done, whose locks (tqdm's, stderr's)
#: it would inherit held.
_DRAWING = threading.Lock()
os.register_at_fork(before=_DRAWING.acquire, after_in_parent=_DRAWING.release, after_in_child=_DRAWING.release)


class Bar:
    """What :func:`bar` yields: ``bar(n=1)`` advances it by ``n`` steps done, ``bar.note(text)`` shows
    ``text`` after the counts (what is running now). Both are no-ops off a terminal."""

    def __init__(self, t=None) -> None:
        self._t = t

    def __call__(self, n: int = 1) -> None:
        if self._t is not None and n:
            self._t.update(n)
            self._drawn_if_done()

    def note(self, text: str) -> None:
        if self._t is not None:
            self._t.set_postfix_str(text, refresh=False)

    def to(self, done: int, total: int | None = None) -> None:
        """Set the bar to ``done`` steps of ``total`` (a total learnt or revised as the work goes)."""
        if self._t is not None:
            if total is not None and total != self._t.total:
                self._t.total = total
            self._t.update(done - self._t.n)
            self._drawn_if_done()

    def _drawn_if_done(self) -> None:
        # tqdm skips a redraw within mininterval of the last one: a bar that completes just after a
        # redraw would close showing, say, 98 %, as if the work had stopped short
        t = self._t
        if t.total is not None and t.n >= t.total:
            t.refresh()


@contextmanager
def _ticking(t, interval: float) -> Iterator[None]:
    """Redraw ``t`` every ``interval`` seconds from a daemon thread for the duration of the block."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(interval):
            with _DRAWING:
                t.refresh()

    ticker = threading.Thread(target=tick, name="ansforge-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


@contextmanager
def bar(total: int | None, desc: str, unit: str = "it", interval: float = TICK_SECONDS,
        scale: bool | None = None) -> Iterator[Bar]:
    """A progress bar of ``total`` steps (``None``: a counter with a rate) with the elapsed time, redrawn
    every ``interval`` seconds; yields a :class:`Bar` (``bar(n=1)``, ``.to(done, total)``, ``.note(text)``).
    ``scale``: counts as 1.2M rather than 1234567 (default: when ``total`` is 10,000 or more). A no-op
    when not :func:`enabled`."""
    if not enabled():
        yield Bar()
        return
    from tqdm import tqdm

    tqdm.monitor_interval = 0       # no monitor thread of tqdm's: ours redraws (and guards forks)
    with tqdm(total=total, desc=desc, unit=f" {unit}", unit_scale=(total or 0) >= 10_000 if scale is None else scale,
              file=sys.stderr,
              leave=False, dynamic_ncols=True, mininterval=0.2) as t:
        with _ticking(t, interval):
            yield Bar(t)


@contextmanager
def activity(desc: str, interval: float = 0.5, report: bool = False) -> Iterator[Callable[[str], None]]:
    """Show ``desc`` with the elapsed time for the duration of the block (a step of unknown length).

    Yields ``note(text)``, which shows ``text`` after the elapsed time (what the step is at now). With
    ``report``, a step that ends without an exception leaves a line ``» desc: done in 12.3 s``."""
    if not enabled():
        yield lambda text: None
        return
    import time

    from tqdm import tqdm

    tqdm.monitor_interval = 0
    t0 = time.monotonic()
    t = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}{postfix}", file=sys.stderr, leave=False)
    try:
        with _ticking(t, interval):
            yield lambda text: t.set_postfix_str(text, refresh=False)
    finally:
        t.close()
    if report:
        tqdm.write(f"» {desc}: done in {time.monotonic() - t0:.1f} s", file=sys.stderr)


def step(message: str) -> None:
    """One line on standard error saying what comes next (only when :func:`enabled`)."""
    if enabled():
        from tqdm import tqdm

        tqdm.write(f"» {message}", file=sys.stderr)
