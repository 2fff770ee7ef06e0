"""Run independent per-tensor tasks on a local process pool, in-process, or on a Dask cluster.

Every task is a top-level function and picklable arguments (a checkpoint *path*, never an open file),
so the same task list runs unchanged on ``concurrent.futures.ProcessPoolExecutor`` and on
``distributed.Client``. Results come back in submission order whatever the completion order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from ..model.errors import ConfigError

__all__ = ["Task", "run_tasks", "default_jobs"]


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


def run_tasks(
    tasks: Sequence[Task],
    *,
    jobs: int | None = None,
    dask: str | None = None,
    progress: bool | None = None,
    desc: str = "tensors",
) -> list[Any]:
    """Run ``tasks`` and return their results in order.

    Parameters
    ----------
    jobs
        Local worker processes; ``None`` uses :func:`default_jobs`, ``1`` runs in this process.
    dask
        Address of a Dask scheduler (``tcp://host:8786``); the tasks run on that cluster instead.
    progress
        Show a progress bar on stderr; ``None`` shows it only when stderr is a terminal.
    """
    from tqdm.auto import tqdm

    if jobs is not None and jobs < 1:
        raise ConfigError(f"--threads must be at least 1, not {jobs}")
    total = sum(t.weight for t in tasks)
    bar = tqdm(total=total, desc=desc, unit="w", unit_scale=True, disable=None if progress is None else not progress,
               leave=False)
    results: list[Any] = [None] * len(tasks)
    try:
        if dask is not None:
            from distributed import Client
            from distributed import as_completed as dask_completed

            with Client(dask) as client:
                futures = {client.submit(t.fn, *t.args, pure=False): i for i, t in enumerate(tasks)}
                for fut in dask_completed(list(futures)):
                    i = futures[fut]
                    results[i] = fut.result()
                    bar.update(tasks[i].weight)
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
