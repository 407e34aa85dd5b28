"""Subcommands of measurement: demo, measure, inspect, report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokembed.cli._common import add_quiet, input_files

__all__ = ["register"]


def _add_demo(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "demo",
        help="train on a corpus (default: this Python's stdlib), measure, save",
        description="Train a tokenizer, hold whole files out, print bytes/token, save it.",
    )
    p.add_argument(
        "--corpus", nargs="+", help="your files/folders/globs/.gz/'-' (default: stdlib .py files)"
    )
    p.add_argument("--max-bytes", type=int, default=None, help="cap on corpus bytes (whole files)")
    p.add_argument("--merges", type=int, default=16384, help="merges to learn (default 16384)")
    p.add_argument("--holdout", type=float, default=0.1, help="fraction of files held out")
    p.add_argument("--pattern", default="teaching", help="preset name or regex")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("-o", "--output", default="out/demo-tokenizer.json")
    add_quiet(p)
    p.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.measure.demo import DemoConfig, run_demo
    from tokembed.measure.sources import DEFAULT_CORPUS_BYTES, default_corpus, read_texts
    from tokembed.tokenizer.formats import save_tokenizer

    config = DemoConfig(
        merges=args.merges,
        holdout=args.holdout,
        pattern=args.pattern,
        workers=args.workers,
        progress=not args.quiet,
        name=Path(args.output).stem,
    )
    if args.corpus:
        sources = read_texts(args.corpus, max_bytes=args.max_bytes)
        what = " ".join(args.corpus)
    else:
        sources = default_corpus(max_bytes=args.max_bytes or DEFAULT_CORPUS_BYTES)
        what = f"Python {sys.version.split()[0]} stdlib .py files (default corpus)"
    total = sum(s.n_bytes for s in sources)
    print(f"corpus: {what}: {len(sources)} files, {total:,} bytes")
    print(f"training {config.merges} merges, pattern {config.pattern!r}, holdout {config.holdout}")
    result = run_demo(sources, config=config)
    sides = {"train": result.partition.train, "held-out": result.partition.eval}
    for label, side in (("train", result.train), ("held-out", result.held_out)):
        if side is not None:
            print(
                f"{label:>8}: {len(sides[label].documents)} files, {side.bytes:,} bytes, "
                f"{side.tokens:,} tokens, {side.bytes_per_token:.3f} bytes/token"
            )
        else:
            print(f"{label:>8}: none (nothing to hold out)")
    print(f"  merges: {result.tokenizer.n_merges} learned in {result.train_seconds:.1f} s")
    inputs = input_files(args.corpus) if args.corpus else []
    path = save_tokenizer(result.tokenizer, args.output, inputs=inputs)
    print(f"   saved: {path} ({result.tokenizer.address_hash[:19]})")
    from tokembed.measure.report import write_demo_report

    report = write_demo_report(result, path=path.parent / "report.html", inputs=inputs)
    print(f"  report: {report}")
    return 0


def _merge_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N1,N2,... (integers), got {text!r}") from None
    if not counts:
        raise argparse.ArgumentTypeError("expected at least one merge count")
    return counts


def _add_corpus_options(p: argparse.ArgumentParser, *, need_tokenizer: bool) -> None:
    p.add_argument(
        "-t",
        "--tokenizer",
        action="append",
        default=[],
        required=need_tokenizer,
        metavar="TOK",
        help="tokenizer file/folder, or RANKS.tiktoken@ENCODING (repeat -t for several)",
    )
    p.add_argument(
        "corpus",
        nargs="+",
        help="CoNLL-U (.conllu[.gz]) or plain-text files, folders, globs or '-' (one corpus each)",
    )
    p.add_argument(
        "--partition",
        metavar="RULE",
        help="document split: lecture, sha256-mod<K>, every<K>, holdout<F>",
    )
    p.add_argument(
        "--curve", type=_merge_counts, metavar="N1,N2,...", help="merge counts of the first -t"
    )
    p.add_argument(
        "--reference", metavar="LABEL", help="language label for token premiums, e.g. en"
    )
    p.add_argument("--words", default=r"\p{L}+|\p{N}+", metavar="REGEX", help="word definition")
    p.add_argument(
        "--leading-space",
        choices=("space", "bare"),
        default="space",
        help="retention encodes ' word' (space) or 'word' (bare)",
    )


def _measured_files(args: argparse.Namespace) -> list[str]:
    """Corpus and tokenizer files of a measure/report call (``file@encoding`` stripped)."""
    from tokembed.measure.artifacts import split_encoding

    tokenizers = [str(split_encoding(t)[0]) for t in (args.tokenizer or [])]
    extra = [str(split_encoding(p)[0]) for p in (getattr(args, "inspect", None) or [])]
    return input_files([*args.corpus, *tokenizers, *extra])


def _measure_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from tokembed.measure.metrics import WordDefinition
    from tokembed.measure.session import load_corpora, load_tokenizers

    words = WordDefinition(pattern=args.words, leading_space=args.leading_space)
    corpora = load_corpora(args.corpus, partition=args.partition)
    return load_tokenizers(args.tokenizer), corpora, words


def _add_measure(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "measure",
        help="bytes/token, fertility, retention, premiums of tokenizers on corpora",
        description="Measure tokenizers side by side on named corpora (optionally partitioned, "
        "with a compression curve of the first tokenizer).",
    )
    _add_corpus_options(p, need_tokenizer=False)
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument(
        "--save-texts", metavar="DIR", help="write each measured text (e.g. ru.train.txt)"
    )
    p.add_argument("--csv", metavar="PATH", help="write the compression curve as CSV")
    p.add_argument("--plot", metavar="PATH", help="write the compression curve plot (.svg or .png)")
    p.set_defaults(handler=_run_measure)


def _run_measure(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from tokembed._atomic import check_output, write_atomic
    from tokembed.measure.curves import curve_csv, plot_curve
    from tokembed.measure.session import run_measure, save_texts
    from tokembed.measure.tables import corpus_rows, curve_rows, format_table, measurement_rows

    toks, corpora, words = _measure_inputs(args)
    result = run_measure(
        toks, corpora, reference=args.reference, merge_counts=args.curve or (), words=words
    )
    inputs = _measured_files(args)
    if args.csv and result.curve:
        write_atomic(Path(args.csv), curve_csv(result.curve).encode("utf-8"), inputs=inputs)
    if args.plot and result.curve:
        check_output(Path(args.plot), inputs=inputs)
        plot_curve(result.curve, args.plot)
    if args.save_texts:
        for path in save_texts(corpora, args.save_texts, inputs=inputs):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    print(format_table(*corpus_rows(result.records)))
    if result.measurements:
        print()
        premiums = result.premiums or None
        print(format_table(*measurement_rows(result.measurements, premiums=premiums)))
    if result.curve:
        print()
        print(format_table(*curve_rows(result.curve)))
    return 0


def _add_inspect(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "inspect",
        help="vocabulary sizes |I|, R, holes, aliases and V of tokenizer files",
        description="Three vocabulary sizes of tokenizer files; a config.json after a tokenizer "
        "gives the model's V.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="tokenizer files/folders, config.json")
    p.add_argument("--encoding", help="tiktoken encoding for rank files (e.g. o200k_harmony)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=_run_inspect)


def _run_inspect(args: argparse.Namespace) -> int:
    import json

    from tokembed.measure.artifacts import inspect_paths
    from tokembed.measure.tables import format_table, vocab_rows

    sizes = inspect_paths(args.paths, encoding=args.encoding)
    if args.json:
        print(json.dumps([s.to_dict() for s in sizes], indent=2))
    else:
        print(format_table(*vocab_rows(sizes)))
    return 0


def _add_report(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "report",
        help="write one static HTML report (metrics, curve, vocabulary sizes, token view)",
        description="Measure tokenizers on corpora and write a self-contained HTML file.",
    )
    _add_corpus_options(p, need_tokenizer=True)
    p.add_argument("--inspect", nargs="+", metavar="PATH", help="files for the vocabulary section")
    p.add_argument(
        "--width",
        type=int,
        default=768,
        help="memory table: width d for tokenizers without a model config (default 768)",
    )
    p.add_argument("--sample", action="append", help="text for the token view (repeatable)")
    p.add_argument("-o", "--output", default="out/report.html")
    p.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from tokembed.measure.artifacts import inspect_paths
    from tokembed.measure.report import DEFAULT_SAMPLES, build_report, write_report

    toks, corpora, words = _measure_inputs(args)
    data = build_report(
        tokenizers=toks,
        corpora=corpora,
        reference=args.reference,
        curve_tokenizer=next(iter(toks)) if args.curve else None,
        merge_counts=args.curve or (),
        vocab=inspect_paths(args.inspect) if args.inspect else (),
        width=args.width,
        samples=args.sample or DEFAULT_SAMPLES,
        words=words,
    )
    print(write_report(data, args.output, inputs=_measured_files(args)))
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_demo(sub)
    _add_measure(sub)
    _add_inspect(sub)
    _add_report(sub)
