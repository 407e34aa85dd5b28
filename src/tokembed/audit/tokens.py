"""Under-trained tokens: which rows of a language model were (almost) never trained?

:func:`audit_tokens` follows Land & Bartolo, "Fishing for Magikarp: Automatically
Detecting Under-trained Tokens in Large Language Models" (2024), in four stages:

1. **tokenizer-only categories** (:mod:`tokembed.audit._categories`): specials, rows
   past the id range R, holes, unreachable pieces, partial UTF-8 pieces;
2. **occurrences** on a named corpus (optional): each text encoded with the
   tokenizer, every id counted; ordinary ids with no occurrence are *never seen*;
3. **weight indicators**: the cosine of each output row to the mean of reference
   unused rows after removing the first principal component, and, for untied models,
   each input row's L2 norm;
4. **verification** of the top candidates on the model itself: prompts that ask for
   the token to be repeated; a candidate is *confirmed* when the largest probability
   the model gives it stays below :attr:`AuditConfig.confirm_below`.

The result, :class:`TokenAudit`, ranks every row by the indicator (most unused-like
first) and prints, serializes (``to_dict``) and plots itself. The model is any
``nn.Module`` with ``get_input_embeddings`` / ``get_output_embeddings`` (every
transformers causal LM) that maps ``input_ids`` to logits.

Example::

    >>> audit = audit_tokens(model, tok, corpus=texts)           # doctest: +SKIP
    >>> [r.id for r in audit.rows[:3]], audit.confirmed[:3]      # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from tokembed.audit._categories import TokenCategories, token_categories
from tokembed.audit._indicators import input_norms, reference_rows, unembedding_indicator
from tokembed.audit._verify import max_repeat_probability
from tokembed.errors import AuditError, TokembedError, UsageError

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = ["AuditConfig", "TokenAudit", "TokenRow", "audit_model_path", "audit_tokens"]


def _invalid(name: str, value: object, need: str) -> UsageError:
    return UsageError(
        "INVALID_ARGUMENT", f"AuditConfig.{name} = {value!r}", value=value, fix=f"pass {need}"
    )


@dataclass(frozen=True, kw_only=True)
class AuditConfig:
    """Sizes and thresholds of :func:`audit_tokens`.

    ``confirm_below`` = 0.01: a trained model asked to repeat a token it has just seen
    gives it a large share of the probability mass (0.18–0.86 for the ordinary words
    among SmolLM2-135M's top 60 candidates), so below 1 % it cannot produce the token even when told to. The
    authors' released code grades candidates between 0.001 (strongly verified) and 0.1
    (weakly); 0.01 lies between the two.

    Raises:
        UsageError(INVALID_ARGUMENT): a size < 0 (``verify_top``, ``table_rows``), a size
            < 1 (``steps``, ``batch_size``), or ``confirm_below`` outside (0, 1].
    """

    verify_top: int = 100  # candidates verified on the model (0: no verification)
    confirm_below: float = 0.01
    steps: int = 3  # greedy steps per prompt in which the token may appear
    batch_size: int = 32
    table_rows: int = 50  # rows kept in the ranked table (to_dict, format)
    reference: tuple[int, ...] | None = None  # known unused ids; None: chosen automatically

    def __post_init__(self) -> None:
        for name in ("verify_top", "table_rows"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise _invalid(name, v, "an int >= 0")
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise _invalid(name, v, "an int >= 1")
        c = self.confirm_below
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0 < c <= 1:
            raise _invalid("confirm_below", c, "a probability in (0, 1]")


@dataclass(frozen=True, kw_only=True)
class TokenRow:
    """One row of the ranked table."""

    rank: int
    id: int
    piece: str  # the token's bytes, readable (non-text bytes as \\xNN), or a special's name
    category: str
    occurrences: int | None  # None without a corpus
    indicator: float
    input_norm: float | None  # None for tied models
    max_probability: float | None  # None when not verified
    confirmed: bool | None


@dataclass(frozen=True, kw_only=True)
class TokenAudit:
    """Every stage's result; ``rows`` is the top of the ranking (see :class:`AuditConfig`)."""

    categories: TokenCategories
    tied: bool
    reference: tuple[int, ...]
    reference_source: str
    indicator: tuple[float, ...]  # per row id, V entries
    input_norm: tuple[float, ...] | None
    occurrences: tuple[int, ...] | None  # per row id; None without a corpus
    corpus_tokens: int | None
    ranking: tuple[int, ...]  # every row id, most unused-like first
    labels: tuple[str, ...]  # category label per row id
    verified: dict[int, float]  # candidate id -> max probability of producing it
    confirm_below: float
    rows: tuple[TokenRow, ...]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def confirmed(self) -> list[int]:
        """Verified candidates whose max probability stayed below the threshold, by rank."""
        return [i for i in self.ranking if self.verified.get(i, 1.0) < self.confirm_below]

    @property
    def never_seen(self) -> int | None:
        """How many ids carry the never-seen label (None without a corpus)."""
        return None if self.occurrences is None else self.labels.count("never_seen")

    def summary(self) -> dict[str, Any]:
        counts = self.categories.counts()
        if self.occurrences is not None:
            counts["never_seen"] = self.labels.count("never_seen")
            counts["never_occurring_ids"] = sum(
                1 for i in range(self.categories.id_range) if self.occurrences[i] == 0
            )
        return {
            "model_rows": self.categories.model_rows,
            "id_range": self.categories.id_range,
            "unique_ids": self.categories.unique_ids,
            "tied": self.tied,
            "counts": counts,
            "corpus_tokens": self.corpus_tokens,
            "reference_rows": len(self.reference),
            "reference_source": self.reference_source,
            "verified": len(self.verified),
            "confirmed": len(self.confirmed),
            "confirm_below": self.confirm_below,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready, torch-free): what ``--json`` prints and the report shows."""
        return {
            "summary": self.summary(),
            "categories": self.categories.to_dict(),
            "reference": list(self.reference),
            "confirmed": self.confirmed,
            "rows": [vars(r) for r in self.rows],
        }

    def format(self) -> str:
        """The summary and the ranked table as text."""
        s = self.summary()
        lines = [
            f"rows V={s['model_rows']}  id range R={s['id_range']}  defined ids |I|="
            f"{s['unique_ids']}  {'tied' if self.tied else 'untied'}",
            "categories: " + ", ".join(f"{k} {v}" for k, v in s["counts"].items()),
            f"reference unused rows: {s['reference_rows']} ({s['reference_source']})",
        ]
        if self.corpus_tokens is not None:
            lines.append(f"corpus: {self.corpus_tokens} tokens")
        lines.append(
            f"verified {s['verified']} candidates: {s['confirmed']} confirmed "
            f"(max probability < {self.confirm_below:g})"
        )
        lines.append("")
        lines.append(
            f"{'rank':>5} {'id':>7} {'category':<13} {'count':>7} {'cosine':>7} "
            f"{'in-norm':>8} {'max p':>9}  piece"
        )
        for r in self.rows:
            count = "-" if r.occurrences is None else str(r.occurrences)
            norm = "-" if r.input_norm is None else f"{r.input_norm:.4f}"
            p = "-" if r.max_probability is None else f"{r.max_probability:.2e}"
            mark = "  confirmed" if r.confirmed else ""
            lines.append(
                f"{r.rank:>5} {r.id:>7} {r.category:<13} {count:>7} {r.indicator:>7.4f} "
                f"{norm:>8} {p:>9}  {r.piece}{mark}"
            )
        return "\n".join(lines)

    def plot(self, path: str | Path | None = None, *, title: str | None = None) -> bytes:
        """The indicator against token id, coloured by category, as PNG (written to ``path``)."""
        from tokembed.audit._plot import plot_indicator

        return plot_indicator(
            self.indicator,
            self.labels,
            confirmed=self.confirmed,
            title=title or "unembedding indicator by token id",
            path=path,
        )


def _tables(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        inp = model.get_input_embeddings().weight  # type: ignore[operator]
        out = model.get_output_embeddings().weight  # type: ignore[operator]
    except (AttributeError, TypeError) as exc:
        raise AuditError(
            "AUDIT_NOT_A_LANGUAGE_MODEL",
            f"{type(model).__name__} has no input and output token tables ({exc})",
            value=type(model).__name__,
            fix="audit a causal language model (get_input_embeddings and "
            "get_output_embeddings return its tables)",
        ) from None
    return inp, out


def _is_tied(model: nn.Module, inp: torch.Tensor, out: torch.Tensor) -> bool:
    """Do the input and output tables share their rows (one Parameter or one storage)?"""
    if inp is out:
        return True
    from tokembed.checkpoint.ties import tie_report

    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    pair = {names.get(id(inp)), names.get(id(out))}
    return any({p.left, p.right} == pair and p.tied for p in tie_report(model).pairs)


def _readable(tok: Tokenizer, i: int, specials: dict[int, str]) -> str:
    if i in specials:
        return specials[i]
    piece = tok.tables.pieces.get(i)
    if piece is None:
        return ""
    return repr(piece)[2:-1]  # bytes repr without b'...': text readable, other bytes \xNN


def _occurrences(tok: Tokenizer, corpus: Sequence[str], rows: int) -> np.ndarray:
    counts = np.zeros(rows, dtype=np.int64)
    for text in corpus:
        ids = np.asarray(tok.encode_ordinary(text), dtype=np.int64)
        counts += np.bincount(ids, minlength=rows)[:rows]
    return counts


def audit_tokens(
    model: nn.Module,
    tokenizer: Tokenizer,
    corpus: Sequence[str] | None = None,
    *,
    config: AuditConfig | None = None,
) -> TokenAudit:
    """Find the under-trained rows of ``model`` (see module docstring).

    ``corpus`` is a sequence of texts, each encoded on its own (special spellings as
    ordinary text). Verification runs the model in inference mode on its own device.

    Raises:
        AuditError(AUDIT_NOT_A_LANGUAGE_MODEL): the model has no input/output tables.
        AuditError(AUDIT_VOCAB_MISMATCH): a table has fewer rows than the tokenizer's R,
            or the two tables' row counts differ.
        AuditError(AUDIT_NO_REFERENCE, AUDIT_REFERENCE_INVALID): see
            :func:`tokembed.audit._indicators.reference_rows`.
    """
    cfg = config or AuditConfig()
    timings: dict[str, float] = {}
    inp, out = _tables(model)
    rows = int(out.shape[0])
    if int(inp.shape[0]) != rows:
        raise AuditError(
            "AUDIT_VOCAB_MISMATCH",
            f"the input table has {inp.shape[0]} rows but the output table {rows}",
            value=(int(inp.shape[0]), rows),
            fix="audit a model whose input and output tables cover the same vocabulary",
        )
    t = time.perf_counter()
    cats = token_categories(tokenizer, model_rows=rows)
    timings["categories"] = time.perf_counter() - t

    counts: np.ndarray | None = None
    never: list[int] = []
    if corpus is not None:
        t = time.perf_counter()
        counts = _occurrences(tokenizer, corpus, rows)
        never = [i for i in sorted(tokenizer.tables.pieces) if counts[i] == 0]
        timings["occurrences"] = time.perf_counter() - t

    t = time.perf_counter()
    tied = _is_tied(model, inp, out)
    reference, source = reference_rows(cats, rows=rows, explicit=cfg.reference, never_seen=never)
    with torch.no_grad():
        indicator = unembedding_indicator(out.detach().cpu(), reference)
        norms = None if tied else input_norms(inp.detach().cpu())
    # Most unused-like first; ties (identical rows) keep id order.
    ranking = [int(i) for i in torch.argsort(-indicator, stable=True)]
    timings["indicators"] = time.perf_counter() - t

    never_set = set(never)
    labels = tuple(cats.label(i, never_seen=i in never_set) for i in range(rows))
    t = time.perf_counter()
    unaddressable = {*cats.hole, *cats.beyond_range}
    candidates = [i for i in ranking if i not in unaddressable][: cfg.verify_top]
    was_training = model.training
    model.eval()
    try:
        probs = max_repeat_probability(
            model, tokenizer, candidates, steps=cfg.steps, batch_size=cfg.batch_size
        )
    finally:
        model.train(was_training)
    verified = dict(zip(candidates, probs, strict=True))
    timings["verification"] = time.perf_counter() - t

    specials = {v: k for k, v in sorted(tokenizer.tables.specials.items(), reverse=True)}
    table = []
    for rank, i in enumerate(ranking[: cfg.table_rows], start=1):
        p = verified.get(i)
        table.append(
            TokenRow(
                rank=rank,
                id=i,
                piece=_readable(tokenizer, i, specials),
                category=labels[i],
                occurrences=None if counts is None else int(counts[i]),
                indicator=float(indicator[i]),
                input_norm=None if norms is None else float(norms[i]),
                max_probability=p,
                confirmed=None if p is None else p < cfg.confirm_below,
            )
        )
    return TokenAudit(
        categories=cats,
        tied=tied,
        reference=reference,
        reference_source=source,
        indicator=tuple(indicator.tolist()),
        input_norm=None if norms is None else tuple(norms.tolist()),
        occurrences=None if counts is None else tuple(int(c) for c in counts),
        corpus_tokens=None if counts is None else int(counts.sum()),
        ranking=tuple(ranking),
        labels=labels,
        verified=verified,
        confirm_below=cfg.confirm_below,
        rows=tuple(table),
        timings=timings,
    )


def audit_model_path(
    path: str | Path,
    tokenizer: Tokenizer,
    corpus: Sequence[str] | None = None,
    *,
    config: AuditConfig | None = None,
) -> TokenAudit:
    """:func:`audit_tokens` of the transformers model in folder ``path`` (or a ``.gguf`` file),
    read by the same loader as the migration command; the load time is in ``timings``.

    Raises:
        UsageError(FILE_NOT_FOUND): ``path`` does not exist.
        AuditError(AUDIT_NOT_A_LANGUAGE_MODEL): transformers cannot read it as a causal LM.
        As :func:`audit_tokens`.
    """
    from tokembed.artifacts.models import load_model

    t = time.perf_counter()
    try:
        model = load_model(Path(path))
    except TokembedError:
        raise
    except (OSError, ValueError, KeyError) as exc:  # what transformers raises for bad folders
        why = (str(exc).splitlines() or [""])[0]
        raise AuditError(
            "AUDIT_NOT_A_LANGUAGE_MODEL",
            f"{path} cannot be read as a causal language model ({type(exc).__name__}: {why})",
            value=str(path),
            fix="pass a transformers model folder (config.json and weights) or a .gguf file",
        ) from None
    loaded = time.perf_counter() - t
    audit = audit_tokens(model, tokenizer, corpus, config=config)
    audit.timings["load"] = loaded
    return audit
