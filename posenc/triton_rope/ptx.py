"""What the compiler makes of the kernels: PTX for an NVIDIA GPU, built without one (chapter 12)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import torch

from .._checks import check_choice
from ..layout import ROPE_LAYOUTS
from . import TRITON_DTYPES, interpreter_mode, triton_available
from .launch import NUM_WARPS, SPLIT_QK, TABLE_WARPS, block_heads, block_pairs

# Global loads and stores by width: ld.global.v4.b32, st.global.b16, ld.global.nc.b32, ...
_MEMORY_INSTRUCTION = re.compile(r"\b((?:ld|st)\.global(?:\.nc)?(?:\.v[24])?\.b(?:16|32|64))\b")
# Pointer arguments that are not q, k or x: their element types.
_POINTER_TYPES = {"pos_ptr": "i64", "f_hi_ptr": "fp32", "f_lo_ptr": "fp32", "cos_ptr": "fp32", "sin_ptr": "fp32"}
# Integer arguments left without the divisibility-by-16 hint (the rest are strides and half).
_ANY_INTEGER = {"seq_len", "q_heads", "k_heads", "heads", "offset", "spb", "sps"}
_ELEMENT_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def ptx_summary(
    *,
    layout: str = "half",
    from_table: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    head_dim: int = 128,
    q_heads: int = 32,
    kv_heads: int = 8,
    arch: int = 90,
) -> dict[str, int]:
    """Compile a kernel for an NVIDIA GPU without one, and count its global-memory instructions.

    Compilation to PTX needs no device: this shows what the compiler makes of
    the kernel on a machine without a GPU. Arguments are specialised as for a
    contiguous launch (pointers 16-byte aligned, strides multiples of 16,
    channel stride 1), as Triton's JIT does for real tensors of these shapes,
    with positions given as an offset. Under ``TRITON_INTERPRET=1`` (where the
    kernel is interpreted, not compiled) the work is done in a fresh Python
    process without it.

    Args:
        layout: ``"half"`` or ``"interleaved"``.
        from_table: The table kernel (``q`` alone, cos and sin read from
            float32 tables) instead of the angles kernel (``q`` and ``k``).
        dtype: Element type of ``q`` and ``k``.
        head_dim: Channels per head (a multiple of 16 for the specialisation).
        q_heads: Query heads.
        kv_heads: Key heads.
        arch: Compute capability times ten (90 for the H100 and H200).

    Returns:
        Counts of PTX global loads and stores by width, e.g.
        ``{"ld.global.v4.b32": 10, ...}``.

    Raises:
        ValueError: Without Triton, or for an unknown layout or dtype.
    """
    if not triton_available():
        raise ValueError("ptx_summary compiles the kernel with Triton, which is not installed")
    check_choice("layout", layout, ROPE_LAYOUTS)
    if dtype not in TRITON_DTYPES:
        raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype}")
    options = {
        "layout": layout,
        "from_table": from_table,
        "head_dim": head_dim,
        "q_heads": q_heads,
        "kv_heads": kv_heads,
        "arch": arch,
    }
    if interpreter_mode():
        return _in_compiling_process(dtype=str(dtype).removeprefix("torch."), **options)
    ptx = _compile(dtype=dtype, **options)
    return dict(sorted(Counter(_MEMORY_INSTRUCTION.findall(ptx)).items()))


def _in_compiling_process(**options) -> dict[str, int]:
    """:func:`ptx_summary` run in a fresh Python process without ``TRITON_INTERPRET``."""
    code = (
        "import json, sys, torch\n"
        "from posenc.triton_rope import ptx_summary\n"
        "options = json.loads(sys.argv[1])\n"
        "options['dtype'] = getattr(torch, options['dtype'])\n"
        "print(json.dumps(ptx_summary(**options)))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(options)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compile(
    *, layout: str, from_table: bool, dtype: torch.dtype, head_dim: int, q_heads: int, kv_heads: int, arch: int
) -> str:
    """PTX of one kernel, specialised as the JIT would for contiguous tensors of these shapes."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from . import kernel

    block_p = block_pairs(head_dim)
    common = {"INTERLEAVED": layout == "interleaved", "BACKWARD": False, "BLOCK_P": block_p}
    if from_table:
        fn = kernel._rope_table_kernel
        constexprs = {**common, "BLOCK_H": block_heads(q_heads, block_p), "sxd": 1, "sod": 1, "std": 1}
    else:
        fn = kernel._rope_angles_kernel
        constexprs = {
            **common,
            "pos_ptr": None,
            "BLOCK_HQ": block_heads(q_heads, block_p),
            "BLOCK_HK": block_heads(kv_heads, block_p),
            "SPLIT_QK": SPLIT_QK,
            "sqd": 1,
            "soqd": 1,
            "skd": 1,
            "sokd": 1,
        }
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name] = "*" + _POINTER_TYPES.get(name, _ELEMENT_TYPES[dtype])
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "scale":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name not in _ANY_INTEGER:
                attrs[(i,)] = [["tt.divisibility", 16]]  # half and the strides: multiples of 16
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    warps = TABLE_WARPS if from_table else NUM_WARPS  # as the launches choose
    options = {"enable_fp_fusion": True, "num_warps": warps}
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    return compiled.asm["ptx"]
