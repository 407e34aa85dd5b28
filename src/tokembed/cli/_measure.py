"""Subcommands of measurement: demo, measure, inspect, report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tokembed.cli._common import (
    activity,
    add_json,
    add_pattern_options,
    add_quiet,
    add_tokenizer_option,
    as_json,
    input_files,
    load_tokenizer,
    load_tokenizers,
    progress_wanted,
    usage,
)
from tokembed.errors import UsageError

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
    add_pattern_options(p)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "-o",
        "--output",
        default="out/demo-tokenizer.json",
        help="tokenizer JSON to write (default out/demo-tokenizer.json)",
    )
    report = p.add_mutually_exclusive_group()
    report.add_argument(
        "--report",
        metavar="PATH",
        help="HTML report to write (default: report.html in the folder of -o)",
    )
    report.add_argument("--no-report", action="store_true", help="write no HTML report")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_demo)


def _demo_report_path(args: argparse.Namespace) -> Path | None:
    if args.no_report:
        return None
    return Path(args.report) if args.report else Path(args.output).parent / "report.html"


def _check_demo_outputs(args: argparse.Namespace) -> None:
    """Refuse a bad output before training, and before anything is saved."""
    from tokembed.files.atomic import check_output

    inputs = input_files(args.corpus) if args.corpus else []
    outputs = [Path(args.output)]
    report = _demo_report_path(args)
    if report is not None:
        outputs.append(report)
        if not args.report:  # the default path: never replace an unrelated page silently
            from tokembed.measure.report import is_tokembed_report

            if not is_tokembed_report(report):
                raise UsageError(
                    "OUTPUT_EXISTS",
                    f"{report} exists and is not a tokembed report",
                    value=str(report),
                    fix="pass --report PATH to choose where the report goes, or --no-report",
                )
    if len({p.resolve() for p in outputs}) < len(outputs):
        raise usage("-o and --report name the same file", value=str(report), fix="pick two paths")
    for path in outputs:
        check_output(path, inputs=inputs)


def _run_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.measure.demo import DemoConfig, run_demo
    from tokembed.text.sources import DEFAULT_CORPUS_BYTES, default_corpus, read_texts
    from tokembed.tokenizer.formats import save_tokenizer

    _check_demo_outputs(args)
    config = DemoConfig(
        merges=args.merges,
        holdout=args.holdout,
        pattern=args.regex or args.pattern,
        workers=args.workers,
        progress=progress_wanted(args),
        name=Path(args.output).stem,
    )
    say = _Say(quiet_stdout=args.json)
    if args.corpus:
        sources = read_texts(args.corpus, max_bytes=args.max_bytes)
        what = " ".join(args.corpus)
    else:
        sources = default_corpus(max_bytes=args.max_bytes or DEFAULT_CORPUS_BYTES)
        what = f"Python {sys.version.split()[0]} stdlib .py files (default corpus)"
    total = sum(s.n_bytes for s in sources)
    say(f"corpus: {what}: {len(sources)} files, {total:,} bytes")
    say(f"training {config.merges} merges, pattern {config.pattern!r}, holdout {config.holdout}")
    result = run_demo(sources, config=config)
    parts = {"train": result.partition.train, "held-out": result.partition.eval}
    sides = {}
    for label, side in (("train", result.train), ("held-out", result.held_out)):
        if side is not None:
            files = len(parts[label].documents)
            sides[label] = {"files": files, "bytes": side.bytes, "tokens": side.tokens}
            say(
                f"{label:>8}: {files} files, {side.bytes:,} bytes, "
                f"{side.tokens:,} tokens, {side.bytes_per_token:.3f} bytes/token"
            )
        else:
            say(f"{label:>8}: none (nothing to hold out)")
    say(f"  merges: {result.tokenizer.n_merges} learned in {result.train_seconds:.1f} s")
    inputs = input_files(args.corpus) if args.corpus else []
    path = save_tokenizer(result.tokenizer, args.output, inputs=inputs)
    say(f"   saved: {path} ({result.tokenizer.address_hash[:19]})")
    report = None
    if not args.no_report:
        from tokembed.measure.report import write_demo_report

        with activity("building the report", show=progress_wanted(args)):
            report = write_demo_report(
                result,
                path=_demo_report_path(args) or path.parent / "report.html",
                inputs=inputs,
            )
        say(f"  report: {report}")
    if args.json:
        print(as_json({
            "corpus_files": len(sources), "corpus_bytes": total, "sides": sides,
            "merges_learned": result.tokenizer.n_merges, "tokenizer": str(path),
            "address_hash": result.tokenizer.address_hash,
            "report": None if report is None else str(report),
        }))  # fmt: skip
    return 0


class _Say:
    """Prints a progress line to stdout, or to nowhere when --json owns stdout."""

    def __init__(self, *, quiet_stdout: bool) -> None:
        self._quiet = quiet_stdout

    def __call__(self, line: str) -> None:
        if not self._quiet:
            print(line)


def _merge_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N1,N2,... (integers), got {text!r}") from None
    if not counts:
        raise argparse.ArgumentTypeError("expected at least one merge count")
    return counts


def _partition_rule(text: str) -> str:
    from tokembed.errors import MeasureError
    from tokembed.measure.partition import PartitionRule

    try:
        PartitionRule.parse(text)
    except MeasureError as exc:  # an unknown rule is a usage mistake (exit 2)
        raise argparse.ArgumentTypeError(f"{exc.message} — {exc.fix}") from None
    return text


def _add_corpus_options(p: argparse.ArgumentParser, *, need_tokenizer: bool) -> None:
    add_tokenizer_option(p, many=True, required=need_tokenizer)
    p.add_argument(
        "corpus",
        nargs="+",
        help="CoNLL-U (.conllu[.gz]) or plain-text files, folders, globs or '-' (one corpus each)",
    )
    p.add_argument(
        "--partition",
        type=_partition_rule,
        metavar="RULE",
        help="document split: sha256-mod<K> (e.g. sha256-mod5), every<K>, holdout<F>",
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
    from pathlib import Path

    from tokembed.tokenizer.formats.specs import split_spec

    specs = [*(args.tokenizer or []), *(getattr(args, "inspect", None) or [])]
    paths = [split_spec(t)[0] for t in specs]
    return input_files([*args.corpus, *(p for p in paths if Path(p).exists())])


def _measure_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from tokembed.measure.metrics import WordDefinition
    from tokembed.measure.session import load_corpora

    if args.corpus.count("-") > 1:
        raise usage("'-' is given twice", value="-", fix="stdin can be read once")
    words = WordDefinition(pattern=args.words, leading_space=args.leading_space)
    corpora = load_corpora(args.corpus, partition=args.partition)
    return load_tokenizers(args.tokenizer, args.encoding), corpora, words


def _add_measure(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "measure",
        help="bytes/token, fertility, retention, premiums of tokenizers on corpora",
        description="Measure tokenizers side by side on named corpora (optionally partitioned, "
        "with a compression curve of the first tokenizer).",
    )
    _add_corpus_options(p, need_tokenizer=False)
    add_json(p)
    add_quiet(p)
    p.add_argument(
        "--save-texts", metavar="DIR", help="write each measured text (e.g. ru.train.txt)"
    )
    p.add_argument("--csv", metavar="PATH", help="write the compression curve as CSV (--curve)")
    p.add_argument(
        "--plot", metavar="PATH", help="write the compression curve plot, .svg or .png (--curve)"
    )
    p.set_defaults(handler=_run_measure)


def _check_curve_outputs(args: argparse.Namespace) -> None:
    for flag in ("csv", "plot"):
        if getattr(args, flag, None) and not args.curve:
            raise usage(
                f"--{flag} writes the compression curve, but no --curve was given",
                value=getattr(args, flag),
                fix="add --curve N1,N2,... (merge counts of the first -t)",
            )
    if args.curve and not args.tokenizer:
        raise usage(
            "--curve needs a tokenizer to truncate",
            value=args.curve,
            fix="pass -t TOK (the curve uses the first one)",
        )
    if getattr(args, "plot", None):  # an unknown image suffix is refused before the work
        from tokembed.measure.curves import plot_format

        plot_format(args.plot)


def _run_measure(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.files.atomic import check_output, write_atomic
    from tokembed.measure.curves import curve_csv, plot_curve
    from tokembed.measure.session import run_measure, save_texts
    from tokembed.measure.tables import corpus_rows, curve_rows, format_table, measurement_rows

    _check_curve_outputs(args)
    toks, corpora, words = _measure_inputs(args)
    # Bars count the bytes each tokenizer has encoded (the work is known in advance).
    result = run_measure(
        toks,
        corpora,
        reference=args.reference,
        merge_counts=args.curve or (),
        words=words,
        progress=progress_wanted(args),
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
        print(as_json(result.to_dict()))
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
    add_tokenizer_option(p, many=True, required=False)
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="more tokenizers as paths (FILE@ENCODING too); a config.json after a tokenizer "
        "gives its model's V",
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_inspect)


def _inspect_option(spec: str, encoding: str | None) -> Any:
    """Vocabulary sizes of one -t value (a folder's config.json supplies V)."""
    from pathlib import Path

    from tokembed.artifacts.config import read_model_config
    from tokembed.measure.vocab_sizes import vocab_sizes_of
    from tokembed.tokenizer.formats.specs import split_spec

    path, enc = split_spec(spec)
    tok = load_tokenizer(spec, encoding, among=True)
    config = Path(path) / "config.json"
    model = read_model_config(config) if config.is_file() else None
    return vocab_sizes_of(tok, config=model, name=enc or tok.name or Path(path).name)


def _run_inspect(args: argparse.Namespace) -> int:
    from tokembed.measure.artifacts import inspect_paths
    from tokembed.measure.tables import format_table, vocab_rows

    if not args.tokenizer and not args.paths:
        raise usage("nothing to inspect", value=None, fix="pass -t TOK (or tokenizer paths)")
    sizes = [_inspect_option(t, args.encoding) for t in args.tokenizer]
    sizes += inspect_paths(args.paths, encoding=args.encoding) if args.paths else []
    if args.json:
        print(as_json([s.to_dict() for s in sizes]))
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
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from tokembed.measure.artifacts import inspect_paths
    from tokembed.measure.report import DEFAULT_SAMPLES, build_report, write_report

    _check_curve_outputs(args)
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
        progress=progress_wanted(args),
    )
    path = write_report(data, args.output, inputs=_measured_files(args))
    print(as_json({"output": str(path)}) if args.json else path)
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_demo(sub)
    _add_measure(sub)
    _add_inspect(sub)
    _add_report(sub)
