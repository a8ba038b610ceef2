"""Shared test configuration: Triton's interpreter without a GPU; hypothesis derandomized so CI is reproducible."""

import os

import torch
from hypothesis import HealthCheck, settings

if not torch.cuda.is_available():
    # No GPU: Triton's interpreter runs the RoPE kernels on CPU tensors. Set before any test imports
    # posenc.triton_rope's kernels (their module decorates them on first use); importing torch does not
    # import Triton, and the CUDA check needs torch.
    os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
torch.set_num_threads(1)
