"""Record chapter 12's GPU timings in one command: check the kernel on the GPU, then time everything.

Usage (from the repository root, on a machine with an NVIDIA H100 or H200):

    python scripts/gpu_record.py [--out DIR] [--budget-s S]
    python scripts/gpu_record.py --dry-run        # here, without a GPU: Triton's interpreter

It needs no network and no install: ``posenc`` is imported from this checkout, and the
wheels in ``.whl/`` (``make gpu-wheels`` downloads Liger-Kernel's there) are unpacked into a
private folder first. Any torch 2.x with CUDA and the Triton it brings will do; the versions
used are written into the result. The steps, each one stopping the run when it fails:

1. the environment: Python, torch, Triton, CUDA, the device, Liger-Kernel;
2. the fused Triton kernel against posenc's torch path and a float64 reference, on the device:
   both layouts, float32/float16/bfloat16, grouped-query heads, partial tables, offsets and
   position tensors, in place, and the backward pass;
3. ``python -m posenc.benchmark``: naive, posenc's eager paths, transformers' eager code (when
   transformers is installed), ``torch.compile``, posenc's kernel, Liger-Kernel's RoPE and the
   copy that is the ceiling, on bfloat16 LLaMA-like shapes (batch 1 and 4, sequences 512 to
   16384, decoding one token), each checked against float64 before it is timed. It writes
   ``gpu_rope_<device>.json`` into ``--out`` (default ``posenc_book/data/``, where chapter 12
   reads it), replacing a file of the same device.

The whole run must end within ``--budget-s`` seconds (default 480): the benchmark gets what
the first two steps left. ``--dry-run`` runs the same steps on CPU tensors through Triton's
interpreter, with the quick shapes, and writes into a temporary folder (never into the book's
data): the check that the command works before a GPU is spent on it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".whl"


def unpack_wheels(into: Path) -> list[str]:
    """Install the carried wheels into ``into`` without the network; return their file names."""
    wheels = sorted(glob.glob(str(WHEELS / "*.whl")))
    if wheels:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        subprocess.run([*pip, "--target", str(into), *wheels], check=True)
    return [Path(w).name for w in wheels]


def environment(device: str) -> dict:
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("triton", "liger_kernel", "transformers"):
        try:
            module = __import__(name)
            info[name] = getattr(module, "__version__", "installed")
        except ImportError:
            info[name] = None
    if device == "cuda":
        info["device"] = torch.cuda.get_device_name()
    return info


#: The kernel check's cases: (batch, query heads, key/value heads, sequence, head_dim, layout, offset, dtype).
CASES = (
    (2, 8, 2, 37, 64, "half", 0, "bfloat16"),
    (1, 4, 4, 128, 128, "half", 5, "float16"),
    (3, 6, 3, 17, 32, "interleaved", 0, "float32"),
    (1, 32, 8, 1, 128, "half", 4095, "bfloat16"),
    (2, 4, 1, 64, 80, "interleaved", 11, "bfloat16"),
)


def kernel_check(device: str, cases=CASES) -> list[str]:
    """The Triton kernel against the torch path (and float64): return one line per failed case."""
    import torch

    from posenc import RotaryEmbedding, rope_inv_freq
    from posenc.benchmark import relative_error, rope_reference

    failures = []
    tolerance = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
    gen = torch.Generator().manual_seed(0)
    for batch, hq, hk, seq, dim, layout, offset, dtype in cases:
        label = f"b{batch} h{hq}/{hk} s{seq} d{dim} {layout} offset {offset} {dtype}"
        dtype = getattr(torch, dtype)
        q = torch.randn(batch, hq, seq, dim, generator=gen).to(device, dtype)
        k = torch.randn(batch, hk, seq, dim, generator=gen).to(device, dtype)
        fused = RotaryEmbedding(dim, layout=layout, backend="triton").to(device)
        eager = RotaryEmbedding(dim, layout=layout, backend="torch").to(device)
        positions = torch.arange(offset, offset + seq, device=device)
        for name, (fq, fk) in {
            "offset": fused(q, k, offset=offset),
            "positions": fused(q, k, positions=positions),
            "in place": fused(q.clone(), k.clone(), offset=offset, inplace=True),
        }.items():
            inv_freq, _ = rope_inv_freq(dim)
            rq, rk = (rope_reference(x, inv_freq, positions, layout=layout) for x in (q, k))
            tq, tk = eager(q, k, offset=offset)
            for got, ref, want in ((fq, rq, tq), (fk, rk, tk)):
                err = relative_error([got], [ref])
                if not err <= tolerance[dtype] or not torch.allclose(got.float(), want.float(), atol=0, rtol=0.02):
                    failures.append(f"{label} ({name}): relative error {err:.2e}, limit {tolerance[dtype]:.0e}")
        # the backward pass: the kernel's gradient is the inverse rotation of the incoming one
        qg = q.float().requires_grad_()
        kg = k.float().requires_grad_()
        gq, gk = torch.randn_like(qg), torch.randn_like(kg)
        out_q, out_k = fused(qg, kg, offset=offset)
        torch.autograd.backward((out_q, out_k), (gq, gk))
        qe, ke = q.float().requires_grad_(), k.float().requires_grad_()
        ref_q, ref_k = eager(qe, ke, offset=offset)
        torch.autograd.backward((ref_q, ref_k), (gq, gk))
        for got, want in ((qg.grad, qe.grad), (kg.grad, ke.grad)):
            if not torch.allclose(got, want, atol=1e-5, rtol=1e-5):
                failures.append(f"{label} (backward): largest difference {(got - want).abs().max().item():.2e}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_record.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for the JSON (default posenc_book/data/)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="seconds for the whole run (default 480)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: CPU tensors in Triton's interpreter")
    args = parser.parse_args(argv)
    start = time.monotonic()

    site = Path(tempfile.mkdtemp(prefix="posenc-gpu-record-"))
    carried = unpack_wheels(site)
    paths = [str(ROOT), str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    sys.path[:0] = [str(ROOT), str(site)]
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported

    import torch

    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run this on a machine with an NVIDIA GPU, or use --dry-run", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp()) if args.dry_run else ROOT / "posenc_book" / "data")
    info = environment(device)
    print(f"[1/3] environment: {json.dumps(info)}; wheels unpacked: {carried or 'none'}", flush=True)

    failures = kernel_check(device)
    print(f"[2/3] kernel check on {device}: {len(failures)} failure(s) ({time.monotonic() - start:.0f} s)", flush=True)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1

    left = args.budget_s - (time.monotonic() - start)
    command = [sys.executable, "-m", "posenc.benchmark", "--out", f"{out}/", "--force", "--device", device]
    command += ["--quick", "--impl", "naive", "posenc_apply", "posenc_triton", "liger"] if args.dry_run else []
    print(f"[3/3] {' '.join(command[1:])} (at most {left:.0f} s)", flush=True)
    try:
        done = subprocess.run(command, timeout=max(left, 1.0), check=False)
    except subprocess.TimeoutExpired:
        print(f"the benchmark did not finish within the budget of {args.budget_s:.0f} s: nothing written")
        return 1
    written = sorted(out.glob("*_rope_*.json"), key=lambda p: p.stat().st_mtime)
    if done.returncode != 0 or not written:
        return done.returncode or 1
    print(f"written: {written[-1]} ({time.monotonic() - start:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
