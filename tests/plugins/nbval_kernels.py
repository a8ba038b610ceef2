"""A pytest plugin for the chapter runs (``-p nbval_kernels``): a kernel that dies before it answers is started again.

The chapter runs start kernels in two workers at once. jupyter_client gives each kernel five
TCP ports by binding port 0 and letting go, so two kernels started in the same instant can be
handed one port, and the second dies before it answers: nbval then reports every cell of that
chapter as an error, though none of them ran. A kernel that died before it ran anything is
started again, at most three times in all; one that starts and then fails fails as before.
"""

from __future__ import annotations

import nbval.kernel

_START = nbval.kernel.start_new_kernel
ATTEMPTS = 3


def start_new_kernel(*args, **kwargs):
    """nbval's kernel start, again when the kernel died before replying to ``kernel_info``."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _START(*args, **kwargs)
        except RuntimeError as error:
            if "died before replying" not in str(error) or attempt == ATTEMPTS:
                raise


nbval.kernel.start_new_kernel = start_new_kernel
