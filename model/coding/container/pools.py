"""The thread and process pools the container's coders run on.

Threads suit the compiled kernels and NumPy, which release the GIL (:func:`thread_map`); building a
tensor's tables is Python, which holds it, so whole tensors are coded in processes
(:func:`process_map`, :func:`process_tasks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ...errors import AnsforgeError


def thread_map(fn: Callable, items: Sequence, threads: int) -> list:
    """``[fn(x) for x in items]``, on ``threads`` threads when more than one (NumPy and the compiled
    kernels release the GIL for the bulk of the work)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def process_map(fn: Callable, jobs: Sequence, processes: int) -> list:
    """``[fn(x) for x in jobs]`` on ``processes`` forked processes (for work that holds the GIL); in this
    process where fork is not available."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    if processes <= 1 or len(jobs) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(x) for x in jobs]
    with ProcessPoolExecutor(max_workers=min(processes, len(jobs)), mp_context=multiprocessing.get_context("fork")) \
            as pool:
        return list(pool.map(fn, jobs, chunksize=max(1, len(jobs) // (4 * processes))))


def process_tasks(processes: int, sizes: dict[str, int]) -> Callable:
    """A ``tasks`` function for :func:`~.write.compress_checkpoint` that codes whole tensors
    (:func:`~.write.compress_tensor`) on ``processes`` processes, results in order.

    Threads cannot share this work: building a tensor's tables (``CodeTable`` search, tuned spreads) is
    Python, which holds the GIL, and it is most of a tensor's coding time. The processes are forked (no
    progress bar's redraw is ever half done in a fork: ``ansforge.model.progress``), from a fork server
    or spawned where fork is not available.
    Tensors (``sizes``: weights by name) are handed out ahead of the one awaited up to ``2 * processes``
    times the largest tensor's weights (at least ``2 * processes`` tensors), so that the other processes
    keep working while one codes a large tensor, and memory holds a bounded number of tensors and their
    words, whatever the model's size."""

    def run(fn, jobs):
        import multiprocessing
        from collections import deque
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        methods = multiprocessing.get_all_start_methods()
        method = next(m for m in ("fork", "forkserver", "spawn") if m in methods)
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([fn.__module__])   # the coder's module, imported once
        weights = [max(1, sizes[job[2]]) for job in jobs]          # job: (path, model, name, task)
        budget = 2 * processes * max(weights)
        pool = ProcessPoolExecutor(max_workers=min(processes, len(jobs)), mp_context=context)
        try:
            pending: deque = deque()
            ahead = handed = 0                              # weights in flight; tensors handed out
            for _ in jobs:
                while handed < len(jobs) and (len(pending) < 2 * processes or ahead + weights[handed] <= budget):
                    pending.append((weights[handed], jobs[handed][2], pool.submit(fn, *jobs[handed])))
                    ahead += weights[handed]
                    handed += 1
                size, name, future = pending.popleft()
                ahead -= size
                try:
                    done = future.result()
                except BrokenProcessPool:
                    raise AnsforgeError(f"a coding process was killed (e.g. out of memory) before tensor "
                                        f"{name!r} was coded; with --threads "
                                        f"{processes} up to {processes} tensors are in memory at once, --threads 1 "
                                        "holds one") from None
                yield done
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return run
