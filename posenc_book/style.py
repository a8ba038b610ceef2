"""The one matplotlib style the book's figures share.

Matplotlib is needed only by the book; ``posenc`` itself depends on torch alone.
"""

from __future__ import annotations

BOOK_STYLE = {
    "figure.figsize": (7.0, 3.4),
    "figure.dpi": 110,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "RdBu_r",
    "legend.frameon": False,
}


def use_book_style() -> None:
    """Apply the book's figure style to matplotlib's global settings."""
    import matplotlib as mpl

    mpl.rcParams.update(BOOK_STYLE)
