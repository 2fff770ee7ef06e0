"""Run independent per-tensor tasks on a local process pool, in-process, or on a Dask cluster.

Every task is a top-level function and picklable arguments (a checkpoint *path*, never an open file),
so the same task list runs unchanged on ``concurrent.futures.ProcessPoolExecutor`` and on
``distributed.Client``. Results come back in submission order whatever the completion order.

A Dask cluster is named by the address of its scheduler (``tcp://host:8786``) or ``local``:
:func:`dask_client` starts a :class:`distributed.LocalCluster` of worker processes for the block
(one thread each, no dashboard, quiet logs, its scratch space in a temporary folder) and closes it
after, on an error or Ctrl-C too; a scheduler that does not answer within :data:`CONNECT_TIMEOUT`
seconds is a :class:`~ansforge.model.errors.ConfigError` naming the address. The workers read the
checkpoint by its path, so on a real cluster they must see the same file system (a shared folder),
at the same absolute path. Dask is the ``dask`` extra (``pip install 'ansforge[dask]'``), imported
only when a cluster is asked for.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..model.errors import ConfigError

__all__ = ["Task", "run_tasks", "default_jobs", "dask_client", "ordered_results", "CONNECT_TIMEOUT", "LOCAL"]

#: Seconds to wait for a Dask scheduler's answer before saying it cannot be reached.
CONNECT_TIMEOUT = 5.0
#: The ``--dask`` value that starts a local cluster instead of connecting to a scheduler.
LOCAL = "local"
_INSTALL = "pip install 'ansforge[dask]'"


@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(*args)``; ``weight`` sizes its step of the progress bar."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    weight: int = 1


def default_jobs() -> int:
    """Worker processes used when none are asked for: one per available CPU."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _distributed():
    """The ``distributed`` package, or one line saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ConfigError(f"--dask needs Dask's distributed package, which is not installed: {_INSTALL}") from None
    return distributed


@contextmanager
def _quiet_logs() -> Iterator[None]:
    """Dask's own loggers at ERROR for the block: its INFO/WARNING chatter (workers starting and
    stopping, connections closed at shutdown) is nothing a user of ``--dask`` acts on."""
    loggers = [logging.getLogger(name) for name in ("distributed", "bokeh", "tornado")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _probe(address: str, timeout: float) -> None:
    """Ask ``address`` for its identity, so that an address where no scheduler answers is one line,
    within ``timeout`` seconds, and not a client left retrying (or a traceback)."""
    from distributed.core import rpc

    async def identity():
        async with rpc(address, timeout=timeout) as r:
            return await asyncio.wait_for(r.identity(), timeout)

    where = f"--dask {address}"
    try:
        ident = asyncio.run(identity())
    except ValueError as exc:
        raise ConfigError(f"{where}: not a scheduler address ({exc}); give tcp://HOST:PORT or local") from None
    except (OSError, asyncio.TimeoutError) as exc:
        why = f" ({exc})" if str(exc) and "Timed out" not in str(exc) else ""
        raise ConfigError(f"{where}: no Dask scheduler answered within {timeout:g} s{why}") from None
    except Exception:  # something answered, but not in Dask's protocol
        raise ConfigError(f"{where}: what answered there is not a Dask scheduler") from None
    if not isinstance(ident, dict) or ident.get("type") != "Scheduler":
        kind = ident.get("type") if isinstance(ident, dict) else None
        raise ConfigError(f"{where}: not a Dask scheduler" + (f" (a {kind})" if kind else "")
                          + "; give the scheduler's address, as `dask scheduler` prints it")


@contextmanager
def _no_interrupt() -> Iterator[None]:
    """SIGINT ignored while the block starts a cluster: its processes inherit that, so a terminal's
    Ctrl-C, sent to the whole process group, reaches this process only, which closes the cluster
    (the workers print no tracebacks of their own). A Ctrl-C during the start itself is not taken."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def dask_client(address: str, workers: int | None = None, *, timeout: float | None = None):
    """A ``distributed.Client`` for the block: connected to the scheduler at ``address``, or, for
    ``address == "local"``, to a :class:`distributed.LocalCluster` of ``workers`` worker processes
    (default :func:`default_jobs`) of one thread each, without a dashboard, its scratch space in a
    temporary folder; the cluster is closed and the folder removed when the block ends, however it
    ends (an error, Ctrl-C). ``timeout``: seconds to wait for a scheduler (default
    :data:`CONNECT_TIMEOUT`)."""
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"--workers must be at least 1, not {workers!r}")
    if address != LOCAL and workers is not None:
        raise ConfigError("--workers sets the size of a local cluster (--dask local); a scheduler at "
                          f"{address} has its own workers")
    distributed = _distributed()
    with _quiet_logs():
        if address != LOCAL:
            _probe(address, timeout)
            client = distributed.Client(address, timeout=timeout, set_as_default=False)
            try:
                yield client
            finally:
                client.close()
            return
        import dask

        scratch = tempfile.mkdtemp(prefix="ansforge-dask-")
        cluster = client = None
        try:
            # The scheduler's scratch space in the folder too (it takes no local_directory).
            with dask.config.set({"temporary-directory": scratch}), _no_interrupt():
                cluster = distributed.LocalCluster(
                    n_workers=workers or default_jobs(), threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.ERROR, local_directory=scratch)
                client = distributed.Client(cluster, set_as_default=False)
            yield client
        finally:
            try:
                if client is not None:
                    client.close()
                if cluster is not None:
                    cluster.close()
            finally:
                shutil.rmtree(scratch, ignore_errors=True)


def ordered_results(client, fn: Callable[..., Any], arglists: Sequence[tuple]) -> Iterator[Any]:
    """``fn(*args)`` for each of ``arglists`` as tasks on ``client``'s cluster, yielded in order, each as
    soon as it and those before it are done; the first task that fails ends the run (its error is
    raised, the others are cancelled)."""
    from distributed import as_completed as dask_completed

    futures = [client.submit(fn, *args, pure=False) for args in arglists]
    index = {f.key: i for i, f in enumerate(futures)}
    done: dict[int, Any] = {}
    nxt = 0
    try:
        for fut in dask_completed(futures, loop=client.loop):
            i = index[fut.key]
            done[i] = fut.result()
            futures[i] = None       # the worker may drop it
            fut.release()
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1
    finally:
        live = [f for f in futures if f is not None]
        if live and client.status == "running":
            client.cancel(live)


def run_tasks(
    tasks: Sequence[Task],
    *,
    jobs: int | None = None,
    dask: Any = None,
    progress: bool | None = None,
    desc: str = "tensors",
) -> list[Any]:
    """Run ``tasks`` and return their results in order.

    Parameters
    ----------
    jobs
        Local worker processes; ``None`` uses :func:`default_jobs`, ``1`` runs in this process.
    dask
        Address of a Dask scheduler (``tcp://host:8786``), ``"local"`` (:func:`dask_client`), or a
        ``distributed.Client`` already connected; the tasks run on that cluster instead.
    progress
        Show a progress bar on stderr; ``None`` shows it only when stderr is a terminal.
    """
    from tqdm.auto import tqdm

    if jobs is not None and jobs < 1:
        raise ConfigError(f"--threads must be at least 1, not {jobs}")
    if isinstance(dask, str):
        with dask_client(dask) as client:
            return run_tasks(tasks, dask=client, progress=progress, desc=desc)
    total = sum(t.weight for t in tasks)
    bar = tqdm(total=total, desc=desc, unit="w", unit_scale=True, disable=None if progress is None else not progress,
               leave=False)
    results: list[Any] = [None] * len(tasks)
    try:
        if dask is not None:
            from distributed import as_completed as dask_completed

            futures = {dask.submit(t.fn, *t.args, pure=False): i for i, t in enumerate(tasks)}
            try:
                for fut in dask_completed(list(futures), loop=dask.loop):
                    i = futures[fut]
                    results[i] = fut.result()
                    bar.update(tasks[i].weight)
            finally:
                dask.cancel(list(futures))
        elif (jobs or default_jobs()) == 1 or len(tasks) <= 1:
            for i, t in enumerate(tasks):
                results[i] = t.fn(*t.args)
                bar.update(t.weight)
        else:
            ctx = multiprocessing.get_context("fork")
            pool = ProcessPoolExecutor(max_workers=jobs or default_jobs(), mp_context=ctx)
            try:
                futures = {pool.submit(t.fn, *t.args): i for i, t in enumerate(tasks)}
                for fut in as_completed(futures):
                    i = futures[fut]
                    results[i] = fut.result()
                    bar.update(tasks[i].weight)
            except BaseException:
                # The first failure (a corrupt tensor) ends the run now, not after every other task. The
                # worker list is taken before shutdown, which sets it to None: reading it afterwards
                # turned every worker error into an AttributeError.
                procs = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in procs:
                    proc.terminate()
                raise
            pool.shutdown(wait=True)
    finally:
        bar.close()
    return results
