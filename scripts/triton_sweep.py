"""Time the fused RoPE kernel's launch choices on a GPU, to choose the defaults in ``launch.py``.

Usage (repository root, a machine with an NVIDIA GPU; ``--dry-run`` here, in Triton's interpreter):

    python scripts/triton_sweep.py [--out DIR] [--dry-run]

The angles kernel (:func:`posenc.triton_rope.rope_qk_triton`) can take a token's queries and
keys in one program or in two (``split_qk``), with 1 to 8 warps and tiles of 1024 or 2048
elements. Each choice is first checked to give the same bits as the defaults, then timed as
chapter 12's benchmark times (CUDA events, median, L2 overwritten between calls) on bfloat16
LLaMA-like shapes (32 query heads, 8 key heads, head size 128, ``[b, h, s, d]`` views of
``[b, s, h, d]`` memory), beside the table kernel (``apply_rope(..., backend="triton")`` on q
and k, 1, 2 or 4 warps) and the copy ceiling measured in the same run. Prints a table and writes
``triton_sweep_<device>.json`` into ``--out`` (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HEADS_Q, HEADS_K, DIM = 32, 8, 128  # LLaMA-like: grouped-query heads of 128 channels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/triton_sweep.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for the JSON (default: a temporary folder)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: CPU tensors in Triton's interpreter")
    args = parser.parse_args(argv)
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"

    import torch

    from posenc import rope_inv_freq
    from posenc.benchmark.timing import cache_bytes, measure_copy
    from posenc.triton_rope import launch

    device = torch.device("cpu" if args.dry_run else "cuda")
    shapes = [(1, 4)] if args.dry_run else [(1, 1), (4, 512), (1, 4096), (4, 4096), (1, 16384), (4, 16384)]
    choices = list(itertools.product((False, True), (1, 2, 4, 8), (1024, 2048)))
    if args.dry_run:
        choices = choices[::5]
    inv_freq, _ = rope_inv_freq(DIM, dtype=torch.float64)
    freqs = tuple(t.to(device) for t in launch.split_frequencies(inv_freq))
    copy = measure_copy(device, 2**26 if args.dry_run else None, run_s=0.05 if args.dry_run else 0.3)
    flush = None if args.dry_run else torch.empty(2 * cache_bytes(device) // 4, dtype=torch.float32, device=device)
    name = "interpreter" if args.dry_run else torch.cuda.get_device_name(device)
    print(f"{name} · torch {torch.__version__} · copy ceiling {copy['gbps']:.1f} GB/s")

    rows = []
    for batch, seq in shapes:
        if not sweep_shape(
            rows, batch, seq, choices=choices, freqs=freqs, copy=copy, flush=flush, dry_run=args.dry_run
        ):
            return 1
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"triton_sweep_{name.lower().replace(' ', '_')}.json"
    path.write_text(json.dumps({"device": name, "torch": torch.__version__, "copy": copy, "rows": rows}, indent=1))
    print(f"written: {path}")
    return 0


def sweep_shape(rows, batch, seq, *, choices, freqs, copy, flush, dry_run) -> bool:
    """Check, then time, every choice at one shape; append the rows. False if a choice changes the result."""
    import torch

    from posenc import apply_rope, rope_cos_sin
    from posenc.benchmark.timing import time_cuda
    from posenc.triton_rope import launch

    device = freqs[0].device
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(batch, seq, HEADS_Q, DIM, generator=gen, device=device).to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(batch, seq, HEADS_K, DIM, generator=gen, device=device).to(torch.bfloat16).transpose(1, 2)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    nbytes = 2 * (q.numel() + k.numel()) * q.element_size()
    common = {"positions": None, "offset": 0, "scale": 1.0, "interleaved": False}
    want_q, want_k = torch.empty_like(q), torch.empty_like(k)
    launch._launch_angles(q, want_q, k, want_k, freqs, **common)

    def record(label, fn):
        if dry_run:
            fn()
            ms = float("nan")
        else:
            ms = time_cuda(fn, [()], flush=flush, warmup_s=0.05, run_s=0.2, host=False).median_ms
        gbps = nbytes / (ms * 1e-3) / 1e9
        rows.append(
            {
                "batch": batch,
                "seq_len": seq,
                "choice": label,
                "ms": ms,
                "gbps": gbps,
                "copy_fraction": gbps / copy["gbps"],
            }
        )
        print(f"b={batch} s={seq:<6} {label:<34} {1e3 * ms:9.1f} us  {100 * gbps / copy['gbps']:5.1f}% of copy")

    for split, warps, tile in choices:
        opts = {"split_qk": split, "num_warps": warps, "tile": tile}

        def angles(opts=opts):
            launch._launch_angles(q, qo, k, ko, freqs, **common, **opts)

        angles()
        if not (torch.equal(qo, want_q) and torch.equal(ko, want_k)):
            print(f"FAILED: {opts} differs from the defaults at b={batch} s={seq}")
            return False
        record(f"split={split} warps={warps} tile={tile}", angles)
    cos, sin = (t.to(device=device, dtype=torch.bfloat16) for t in rope_cos_sin(torch.arange(seq), DIM))

    def tables():
        apply_rope(q, cos, sin, backend="triton")
        apply_rope(k, cos, sin, backend="triton")

    default_warps = launch.TABLE_WARPS
    try:
        for warps in (1, 2, 4):
            launch.TABLE_WARPS = warps
            record(f"table kernel (q, k) warps={warps}", tables)
    finally:
        launch.TABLE_WARPS = default_warps
    return True


if __name__ == "__main__":
    sys.exit(main())
