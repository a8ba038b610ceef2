"""Running many independent training jobs: one at a time or in worker processes, with a progress bar.

Shared by the synthetic experiments (:mod:`posenc.experiments.extrapolation`)
and the real-text one (:mod:`posenc.experiments.text`). A job is a tuple of
arguments; ``run(config, *job)`` returns its result. Results reach ``record``
as they arrive; the caller orders them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed

__all__ = ["progress_bar", "run_jobs"]


def progress_bar(total: int, enabled: bool, unit: str = "run"):
    """A tqdm bar on stderr, or a stand-in that does nothing when tqdm is missing or ``enabled`` is false."""
    if enabled:
        with contextlib.suppress(ImportError):
            from tqdm.auto import tqdm

            return tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)
    return _Silent()


class _Silent:
    """A progress bar that shows nothing."""

    update = set_postfix_str = close = staticmethod(lambda *args, **kwargs: None)


def run_jobs(run: Callable, config, order: list[tuple], record: Callable[[tuple, object], None], jobs: int) -> None:
    """``record(job, run(config, *job))`` for every job of ``order``: in this process, or in ``jobs`` workers.

    ``run`` must be a module-level function (workers find it by its
    qualified name). The first job that raises stops the rest: jobs not
    started are cancelled, running ones finish and are recorded, and the
    error is raised. Workers are spawned, never forked from a process that
    holds torch threads.
    """
    if jobs == 1:
        for job in order:
            record(job, run(config, *job))
        return
    context = multiprocessing.get_context("spawn")
    _run_pool(ProcessPoolExecutor(max_workers=jobs, mp_context=context), run, config, order, record)


def _run_pool(pool: Executor, run: Callable, config, order: list[tuple], record: Callable) -> None:
    """Run every job on ``pool`` (shut down on return), recording each result as it arrives.

    A failure cancels queued jobs, records running ones that succeed, and raises; Ctrl-C waits for none.
    """
    futures = {pool.submit(run, config, *job): job for job in order}
    recorded: set[tuple] = set()
    try:
        for future in as_completed(futures):
            result = future.result()
            recorded.add(futures[future])
            record(futures[future], result)
    except Exception:
        pool.shutdown(wait=True, cancel_futures=True)
        with contextlib.suppress(Exception):  # the first error is the one raised
            for future, job in futures.items():
                if job not in recorded and not future.cancelled() and future.exception() is None:
                    recorded.add(job)
                    record(job, future.result())  # finished while the pool stopped: work kept
        raise
    except BaseException:  # KeyboardInterrupt: the workers were interrupted too
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
