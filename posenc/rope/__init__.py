"""Rotary position embedding (RoPE), one subpackage: the formulas, their scalings, and the module.

Its modules import one another's public names only, downwards:

* :mod:`posenc.rope.ops`: the two elementary operations, cos and sin from the angles and the
  rotation by them, for arguments already checked;
* :mod:`posenc.rope.cpu`: the same rotation on CPU tensors, in blocks that stay in cache;
* :mod:`posenc.rope.longrope` and :mod:`posenc.rope.scaling`: the long-context scalings, one
  entry per ``rope_type`` (:data:`posenc.rope.scaling.ROPE_SCALINGS`);
* :mod:`posenc.rope.rotary`: the functions, :func:`~posenc.apply_rope`,
  :func:`~posenc.rope_cos_sin`, :func:`~posenc.rope_inv_freq` and the weight permutation;
* :mod:`posenc.rope.state`: ``transformers``' dynamic-NTK length state;
* :mod:`posenc.rope.embedding`: :class:`~posenc.RotaryEmbedding`, the module;
* :mod:`posenc.rope.nd` (axial RoPE and M-RoPE) and :mod:`posenc.rope.xpos` (xPos).

The fused GPU kernels are :mod:`posenc.triton_rope`, loaded only where a CUDA tensor asks
for them. The names a reader uses are exported by ``posenc`` itself.
"""
