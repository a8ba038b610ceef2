"""A pytest plugin for the chapter runs (``-p nbval_kernels``): kernels start one at a time, and
one that never answered is started again.

The chapter runs start kernels in two workers at once. jupyter_client gives each kernel five
TCP ports by binding port 0 and letting go, so two kernels started in the same instant can be
handed one port: the second then dies before it answers, or (seen once in a fresh clone, in
chapter 11) stays alive and never answers, and nbval reports every cell of that chapter as an
error, though none of them ran. So a worker holds a lock file (in the temporary folder, shared
by every run on the machine) from the moment it asks for ports until its kernel has answered,
and a kernel that died or stayed silent before it ran anything is shut down and started again,
at most three times in all; one that starts and then fails fails as before.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import nbval.kernel

try:
    import fcntl
except ImportError:  # pragma: no cover - not a POSIX system: no lock, the retries remain
    fcntl = None

_START = nbval.kernel.start_new_kernel
ATTEMPTS = 3
#: jupyter_client's messages for a kernel that never replied to kernel_info (nbval shuts it down).
NEVER_ANSWERED = ("died before replying", "didn't respond in")
LOCK = Path(tempfile.gettempdir()) / "posenc-nbval-kernel-start.lock"


@contextlib.contextmanager
def one_start_at_a_time():
    """Hold the machine's kernel-start lock (no-op where fcntl is missing)."""
    if fcntl is None:
        yield
        return
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start_new_kernel(*args, **kwargs):
    """nbval's kernel start, under the lock, again when the kernel never replied to ``kernel_info``."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with one_start_at_a_time():
                return _START(*args, **kwargs)
        except RuntimeError as error:
            if not any(words in str(error) for words in NEVER_ANSWERED) or attempt == ATTEMPTS:
                raise


nbval.kernel.start_new_kernel = start_new_kernel
