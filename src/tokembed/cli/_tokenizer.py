"""Subcommands of the tokenizer: train, encode, decode, export."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokembed.cli._common import add_quiet, add_tokenizer_option, input_files, load_tokenizer

__all__ = ["register"]


def _special_option(text: str) -> tuple[str, int | None]:
    name, sep, value = text.partition("=")
    if not name or (sep and not value.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME or NAME=ID, got {text!r}")
    return name, int(value) if sep else None


def _add_train(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "train",
        help="train a byte-level BPE tokenizer on text files",
        description="Train byte-level BPE on files, folders (recursive), globs, .gz or '-' (stdin).",
    )
    p.add_argument("corpus", nargs="+", help="text files, folders, globs, or '-'")
    p.add_argument("--merges", type=int, required=True, help="number of merges to learn")
    p.add_argument("--pattern", default="teaching", help="preset name or regex")
    p.add_argument(
        "--special",
        action="append",
        type=_special_option,
        default=[],
        metavar="NAME[=ID]",
        help="special token (id defaults to the next free id); repeatable",
    )
    p.add_argument("--workers", type=int, default=1, help="processes counting chunks")
    p.add_argument("-o", "--output", required=True, help="tokenizer JSON to write")
    add_quiet(p)
    p.set_defaults(handler=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    import time

    from tokembed.measure.sources import read_texts
    from tokembed.tokenizer.formats import save_tokenizer
    from tokembed.tokenizer.train import TrainConfig, train

    config = TrainConfig(
        merges=args.merges,
        pattern=args.pattern,
        specials=dict(args.special),
        workers=args.workers,
        progress=not args.quiet,
    )
    sources = read_texts(args.corpus)
    start = time.perf_counter()
    tok = train((s.text for s in sources), config=config)
    seconds = time.perf_counter() - start
    path = save_tokenizer(tok, args.output, inputs=input_files(args.corpus))
    n_bytes = sum(s.n_bytes for s in sources)
    print(
        f"trained {tok.n_merges} merges on {len(sources)} file(s), {n_bytes:,} bytes, "
        f"in {seconds:.1f} s\nwrote {path} ({tok.address_hash[:19]})"
    )
    return 0


def _add_encode(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("encode", help="print the token ids of a text")
    add_tokenizer_option(p)
    p.add_argument("text", nargs="?", default="-", help="text to encode, or '-' for stdin")
    p.add_argument(
        "--allow-special", action="store_true", help="special-token spellings become their ids"
    )
    p.set_defaults(handler=_run_encode)


def _run_encode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(args)
    if args.text == "-":
        from tokembed.measure.sources import read_texts

        text = read_texts(["-"])[0].text
    else:
        text = args.text
    ids = tok.encode(text, allowed_special="all" if args.allow_special else frozenset())
    print(" ".join(map(str, ids)))
    return 0


def _add_decode(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("decode", help="print the text of token ids")
    add_tokenizer_option(p)
    p.add_argument("ids", nargs="+", type=int, metavar="ID", help="token ids")
    p.add_argument(
        "--errors", choices=("strict", "replace"), default="strict", help="invalid UTF-8 policy"
    )
    p.set_defaults(handler=_run_decode)


def _run_decode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(args)
    sys.stdout.write(tok.decode(args.ids, errors=args.errors) + "\n")
    return 0


def _add_export(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("export", help="write a tokenizer as tiktoken ranks or HF tokenizer.json")
    add_tokenizer_option(p)
    p.add_argument("--format", required=True, choices=("tiktoken", "hf"), dest="fmt")
    p.add_argument("-o", "--output", required=True, help="folder (tiktoken) or file/folder (hf)")
    p.set_defaults(handler=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.tokenizer.formats import export_hf, export_tiktoken

    tok = load_tokenizer(args)
    export = export_tiktoken if args.fmt == "tiktoken" else export_hf
    source = Path(args.tokenizer)
    inputs = [source, *(source.iterdir() if source.is_dir() else ())]  # never overwrite them
    path = export(tok, args.output, inputs=inputs)
    print(f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_train(sub)
    _add_encode(sub)
    _add_decode(sub)
    _add_export(sub)
