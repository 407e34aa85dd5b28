"""The audit's picture: the unembedding indicator against token id, coloured by category.

Under-trained rows show as a band near cosine 1 above the cloud of trained rows;
confirmed candidates are ringed. matplotlib is imported here only.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokembed.audit._categories import CATEGORY_ORDER
from tokembed.files.atomic import write_atomic

__all__ = ["plot_indicator"]

_COLOURS = {
    "special": "#d62728",
    "beyond_range": "#7f7f7f",
    "hole": "#bcbd22",
    "unreachable": "#9467bd",
    "partial_utf8": "#ff7f0e",
    "never_seen": "#17becf",
    "ok": "#1f77b4",
}


def plot_indicator(
    indicator: Sequence[float],
    labels: Sequence[str],
    *,
    confirmed: Iterable[int] = (),
    title: str = "unembedding indicator",
    path: str | Path | None = None,
    inputs: Iterable[str | Path] = (),
) -> bytes:
    """Scatter of ``indicator[i]`` against id ``i``, one colour per label; returns it as PNG.

    Writes ``path`` atomically when given (format from its suffix, PNG by default). PNG,
    not SVG, is what the HTML report embeds: 50,000 points make a multi-megabyte SVG.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or a folder.
        UsageError(INVALID_ARGUMENT): ``path`` has a suffix no plot can be written as.
    """
    from tokembed.measure.curves import plot_format

    kind = "png" if path is None else plot_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    try:
        # The two big classes first and small, so the rare categories show on top of them.
        for name in reversed(CATEGORY_ORDER):
            ids = [i for i, lab in enumerate(labels) if lab == name]
            if ids:
                ax.scatter(
                    ids,
                    [indicator[i] for i in ids],
                    s=2 if name in ("ok", "never_seen") else 10,
                    c=_COLOURS[name],
                    label=f"{name} ({len(ids)})",
                    linewidths=0,
                )
        ringed = sorted(set(confirmed))
        if ringed:
            ax.scatter(
                ringed,
                [indicator[i] for i in ringed],
                s=40,
                facecolors="none",
                edgecolors="black",
                linewidths=0.8,
                label=f"confirmed ({len(ringed)})",
            )
        ax.set_xlabel("token id")
        ax.set_ylabel("cosine to mean unused row (1st PC removed)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, markerscale=2, loc="lower right")
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png")
        if path is not None:
            image = png if kind == "png" else io.BytesIO()
            if kind != "png":
                fig.savefig(image, format=kind)
            write_atomic(Path(path), image.getvalue(), inputs=inputs)
    finally:
        plt.close(fig)
    return png.getvalue()
