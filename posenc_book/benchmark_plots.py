"""The figures of chapter 12: RoPE timings read off a result of ``posenc.benchmark``.

Book-only (matplotlib). Every figure takes one result dict, from
:func:`posenc.benchmark.run_benchmark` or :func:`posenc.benchmark.load_results`, and
draws only the records that passed their check and were timed.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from posenc.benchmark import ROPE_IMPL_NAMES, ok_records, result_label

__all__ = ["plot_copy_fraction", "plot_decode", "plot_results", "plot_rope_times"]


def _impl_order(records: list[dict]) -> list[str]:
    """Implementation names present in ``records``: the known ones in table order, then any others."""
    present = list(dict.fromkeys(r["impl"] for r in records))
    return [n for n in ROPE_IMPL_NAMES if n in present] + [n for n in present if n not in ROPE_IMPL_NAMES]


def _value(records: list[dict], impl: str, batch: int, key: str, scale: float = 1.0) -> float:
    """``record[key] * scale`` of ``impl`` at ``batch``; 0 where there is no record (or the value is None)."""
    found = next((r for r in records if r["impl"] == impl and r["batch"] == batch), None)
    return (found[key] or 0.0) * scale if found else 0.0


def _bar_ticks(ax, names: list[str], width: float, groups: int) -> None:
    """One tick per implementation, centred on its group of bars."""
    ax.set_yticks([i + width * (groups - 1) / 2 for i in range(len(names))], names)


def plot_rope_times(result: dict, ax=None, *, batch: int = 1):
    """Median time of each RoPE implementation against sequence length, with the copy-bandwidth floor.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or
            :func:`~posenc.benchmark.load_results`.
        ax: Matplotlib axes (default: a new figure).
        batch: Which batch size to draw.

    Returns:
        The axes it drew on.
    """
    ax = ax if ax is not None else plt.subplots()[1]
    records = ok_records(result, "rope", phase="prefill", batch=batch)
    for name in _impl_order(records):
        rows = sorted((r for r in records if r["impl"] == name), key=lambda r: r["seq_len"])
        ax.loglog([r["seq_len"] for r in rows], [r["ms"] * 1e3 for r in rows], "o-", label=rows[0]["label"])
    if records:
        lengths = sorted({r["seq_len"] for r in records})
        by_len = {r["seq_len"]: r["bytes"] for r in records}
        floor = [by_len[s] / (result["copy"]["gbps"] * 1e9) * 1e6 for s in lengths]  # bytes / (bytes/s), in µs
        ax.loglog(lengths, floor, "k--", lw=1, label="bytes / copy bandwidth (floor)")
    ax.set(
        xlabel="sequence length",
        ylabel="median time per call (µs)",
        title=f"RoPE on q and k, batch {batch}, {result['dtype']}",
    )
    ax.legend(fontsize=8)
    return ax


def plot_copy_fraction(result: dict, ax=None):
    """Achieved bandwidth of each RoPE implementation as a fraction of the copy, at the longest sequences.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or
            :func:`~posenc.benchmark.load_results`.
        ax: Matplotlib axes (default: a new figure).

    Returns:
        The axes it drew on, with one bar per implementation and batch size, and the 85% target.
    """
    ax = ax if ax is not None else plt.subplots()[1]
    records = ok_records(result, "rope", phase="prefill")
    if records:
        longest = max(r["seq_len"] for r in records)
        records = [r for r in records if r["seq_len"] == longest]
        batches = sorted({r["batch"] for r in records})
        names = _impl_order(records)
        width = 0.8 / len(batches)
        for j, b in enumerate(batches):
            values = [_value(records, n, b, "copy_fraction") for n in names]
            ax.barh([i + j * width for i in range(len(names))], values, height=width, label=f"batch {b}")
        _bar_ticks(ax, names, width, len(batches))
        ax.axvline(0.85, color="k", ls="--", lw=1, label="85% of copy")
        ax.set(title=f"fraction of copy bandwidth, sequence length {longest}")
        ax.legend(fontsize=8)
    ax.set(xlabel="achieved GB/s / copy GB/s")
    return ax


def plot_decode(result: dict, ax=None):
    """Decode latency (one token, KV cache already filled) of each RoPE implementation.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or
            :func:`~posenc.benchmark.load_results`.
        ax: Matplotlib axes (default: a new figure).

    Returns:
        The axes it drew on, showing per implementation and batch size, the host loop's time per
        call (wide, pale) over the device time from CUDA events (narrow).
    """
    ax = ax if ax is not None else plt.subplots()[1]
    records = ok_records(result, "rope", phase="decode")
    names = _impl_order(records)
    batches = sorted({r["batch"] for r in records})
    width = 0.8 / max(len(batches), 1)
    for j, b in enumerate(batches):
        device_us = [_value(records, n, b, "ms", 1e3) for n in names]
        host_us = [_value(records, n, b, "host_us_per_call") for n in names]
        ys = [i + j * width for i in range(len(names))]
        ax.barh(ys, host_us, height=width, alpha=0.35, label=f"batch {b}: host loop, per call")
        ax.barh(ys, device_us, height=width * 0.5, label=f"batch {b}: device time (events)")
    _bar_ticks(ax, names, width, len(batches))
    ax.set(xlabel="µs per call", title="decode: one token")
    ax.legend(fontsize=8)
    return ax


def plot_results(result: dict):
    """The three RoPE figures of one result file side by side, labelled with device, versions and date.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or
            :func:`~posenc.benchmark.load_results`.

    Returns:
        A figure with the times at batch 1 and at the largest batch, the copy
        fractions, and decoding.
    """
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.6), layout="constrained")
    plot_rope_times(result, axes[0, 0], batch=1)
    plot_rope_times(result, axes[0, 1], batch=max((r["batch"] for r in ok_records(result, "rope")), default=1))
    plot_copy_fraction(result, axes[1, 0])
    plot_decode(result, axes[1, 1])
    # one legend for the four panels, below them, so that no legend covers a curve
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(result_label(result), fontsize=9)
    return fig
