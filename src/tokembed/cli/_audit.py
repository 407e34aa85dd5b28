"""Subcommand `audit`: under-trained tokens of a model (categories, indicators, verification)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

from tokembed.cli._common import (
    add_json,
    add_quiet,
    add_tokenizer_option,
    as_json,
    input_files,
    load_tokenizer,
    progress_wanted,
    speak_cli,
    usage,
)
from tokembed.errors import TokembedError

__all__ = ["register"]

_FIXES = {
    "AUDIT_NO_REFERENCE": "pass --corpus FILES (its never-occurring ids become the reference) "
    "or --reference IDS",
    "AUDIT_VOCAB_MISMATCH": "name the model's own tokenizer with -t",
    "AUDIT_REFERENCE_INVALID": "give --reference ids below the model's row count",
}


def _ids(text: str) -> tuple[int, ...]:
    """``--reference 5,7,100-120``: ids and inclusive ranges, comma-separated."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out += range(int(lo), int(hi) + 1) if sep else [int(lo)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--reference takes ids and ranges such as 5,7,100-120, not {text!r}"
        ) from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"--reference needs ids >= 0, got {text!r}")
    return tuple(out)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text!r}")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(
            f"--confirm-below takes a probability in (0, 1], not {text!r}"
        )
    return value


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the ``audit`` subcommand."""
    p = sub.add_parser(
        "audit",
        help="find a model's under-trained tokens",
        description="Rank a causal LM's vocabulary rows by how much they look never trained "
        "(Land & Bartolo 2024): tokenizer-only categories, occurrences on --corpus, the cosine "
        "of each output row to the mean unused row (first principal component removed), input "
        "norms for untied models, and verification of the top candidates by asking the model to "
        "repeat them. Exit 0 when the audit ran, whatever it found.",
    )
    p.add_argument("model", metavar="MODEL_DIR", help="transformers model folder, or a .gguf file")
    add_tokenizer_option(p, required=False)
    p.add_argument(
        "--corpus",
        nargs="+",
        metavar="FILE",
        help="texts to count occurrences on (files, folders, globs; .conllu read as sentences)",
    )
    p.add_argument(
        "--reference", type=_ids, metavar="IDS",
        help="known unused ids (5,7,100-120) as the reference; default: rows no text addresses, "
        "else ids that never occur in --corpus",
    )  # fmt: skip
    p.add_argument(
        "--verify-top",
        type=_count,
        default=100,
        metavar="N",
        help="candidates verified on the model (default 100; 0 skips verification)",
    )
    p.add_argument("--confirm-below", type=_probability, default=0.01, metavar="P",
                   help="confirmed when the max probability of repeating the token is below P "
                   "(default 0.01)")  # fmt: skip
    p.add_argument("--top", type=_count, default=30, metavar="N", help="rows shown (default 30)")
    p.add_argument("--plot", metavar="PATH", help="write the indicator plot (PNG) to PATH")
    p.add_argument("--report", metavar="PATH", help="write an HTML report of the audit to PATH")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run)


def _tokenizer_spec(args: argparse.Namespace) -> str:
    if args.tokenizer:
        return str(args.tokenizer)
    folder = Path(args.model)
    if folder.is_dir() and any((folder / n).is_file() for n in ("tokenizer.json", "vocab.json")):
        return str(folder)
    raise usage(
        f"{args.model} holds no tokenizer files",
        value=args.model,
        fix="name the model's tokenizer with -t",
    )


def _run(args: argparse.Namespace) -> int:
    from tokembed.audit.tokens import AuditConfig, audit_model_path
    from tokembed.measure.corpus import load_corpus

    inputs = [args.model, *input_files(args.corpus or [])]
    if args.tokenizer and Path(args.tokenizer).exists():
        inputs.append(args.tokenizer)
    for out in (args.plot, args.report):
        if out is not None:
            from tokembed.files.atomic import check_output

            check_output(Path(out), inputs=inputs)
    if args.plot is not None:  # before the audit runs, not after
        from tokembed.measure.curves import plot_format

        plot_format(args.plot)
    tok = load_tokenizer(_tokenizer_spec(args), args.encoding)
    texts = [load_corpus(c).text for c in args.corpus] if args.corpus else None
    config = AuditConfig(
        verify_top=args.verify_top,
        confirm_below=args.confirm_below,
        table_rows=args.top,
        reference=args.reference,
    )
    # transformers draws its GGUF conversion bar with its own tqdm, which its progress
    # switch does not reach; without progress the bar's stream is swallowed instead.
    quiet = contextlib.nullcontext() if progress_wanted(args) else redirect_stderr(io.StringIO())
    try:
        with quiet:
            audit = audit_model_path(args.model, tok, texts, config=config)
    except TokembedError as exc:
        raise speak_cli(exc, _FIXES) from None
    data = audit.to_dict()
    data["summary"]["model"] = str(args.model)
    data["summary"]["corpus"] = list(args.corpus or [])
    print(as_json(data) if args.json else audit.format())
    if args.plot is not None:
        audit.plot(args.plot, title=f"{Path(args.model).name}: unembedding indicator")
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.report is not None:
        import base64

        from tokembed.measure.report import ReportData, write_report

        png = audit.plot(title=f"{Path(args.model).name}: unembedding indicator")
        report = ReportData(
            title=f"tokembed audit: {Path(args.model).name}",
            token_audit={**data, "plot_png_base64": base64.b64encode(png).decode("ascii")},
        )
        write_report(report, args.report, inputs=inputs)
        print(f"wrote {args.report}", file=sys.stderr)
    return 0
