"""Helpers of the book *Positional Encodings, Checked* that are not part of the library.

``posenc`` is the library: it needs only torch. ``posenc_book`` holds what only the book
uses: the recorded data the chapters read (the experiments of chapter 11, the bad-input
catalogue of chapter 10, the claims ledger (``13_claims``) and GPU timings for chapter 12),
the figure style, the figures of the benchmark and the experiments, the explorable
figures, the ledger's rendering and the editions' words. The data ships inside the
package, so a chapter finds it from any working directory, on Colab and on Binder, not
only from a checkout.
"""

from __future__ import annotations

from .data import bad_input_namespace, data_path, recorded

__all__ = ["bad_input_namespace", "data_path", "recorded"]
