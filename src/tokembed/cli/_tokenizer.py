"""Subcommands of the tokenizer: train, encode, decode, export."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tokembed.cli._common import (
    TOKENIZER_HELP,
    add_json,
    add_pattern_options,
    add_quiet,
    add_tokenizer_option,
    as_json,
    input_files,
    load_tokenizer,
    progress_wanted,
    read_stdin_text,
    speak_cli,
    usage,
)
from tokembed.errors import TokembedError

if TYPE_CHECKING:
    from tokembed.text.ranges import TextFiles
    from tokembed.text.sources import TextBlock
    from tokembed.tokenizer import Tokenizer

__all__ = ["register"]

# The library's fixes name Python arguments; on the command line they are these flags.
_ENCODE_FIXES = {
    "SPECIAL_TOKEN_DISALLOWED": "pass --allow-special to encode {name!r} as its id, or "
    "--specials-as-text to encode it as ordinary text",
    "LONE_SURROGATE": "repair the input text (it has no UTF-8 form)",
}
_TRAIN_FIXES = {
    "SCHEDULER_UNREACHABLE": "start one (`dask scheduler`) and pass its address with "
    "--scheduler tcp://HOST:8786, or drop --scheduler to start a local cluster",
    "LOCAL_CLUSTER_NOT_STARTED": "start a scheduler and workers yourself (`dask scheduler`, "
    "`dask worker`) and pass --scheduler tcp://HOST:8786, or train without --engine dask",
}
_DECODE_FIXES = {
    "INVALID_UTF8": "pass --errors replace to show U+FFFD, or --errors ignore to drop the "
    "incomplete bytes",
}


def _special_option(text: str) -> tuple[str, int | None]:
    name, sep, value = text.partition("=")
    if not name or (sep and not value.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME or NAME=ID, got {text!r}")
    return name, int(value) if sep else None


def _add_train(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "train",
        help="train a byte-level BPE tokenizer on text files",
        description="Train byte-level BPE on files, folders (recursive), globs, .gz or '-' "
        "(stdin). A .conllu file contributes its sentences (its '# text =' lines, one per "
        "line), as `measure` reads it, unless --raw. With --extend BASE, continue BASE: its "
        "merges are applied first, the new merges get ids past every id of BASE, and the "
        "result is proved append-only before it is written.",
    )
    p.add_argument(
        "corpus",
        nargs="*",
        help="text or .conllu files, folders, globs, or '-' (none with --extend and --merges 0)",
    )
    p.add_argument("--merges", type=int, required=True, help="number of merges to learn")
    p.add_argument(
        "--extend",
        metavar="BASE",
        help="continue this tokenizer, keeping every id (" + TOKENIZER_HELP + ")",
    )
    p.add_argument(
        "--encoding",
        metavar="NAME",
        help="with --extend and a .tiktoken BASE: the encoding whose pattern and specials it has",
    )
    p.add_argument(
        "--format",
        choices=("tiktoken", "hf", "tokembed"),
        dest="fmt",
        help="with --extend: the output format (default: the base's; a rank-file base gives a "
        "tiktoken rank folder, or tokembed JSON for an -o ending in .json)",
    )
    add_pattern_options(p)
    p.add_argument(
        "--special",
        action="append",
        type=_special_option,
        default=[],
        metavar="NAME[=ID]",
        help="special token (id defaults to the next free id; with --extend, ID must be a "
        "reserved id of the base); repeatable",
    )
    p.add_argument("--raw", action="store_true", help="train on .conllu files as raw text")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="threads (or processes, for a --regex) counting chunks (with --engine dask and no --scheduler: local workers)",
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="count chunks on this machine (default) or on a Dask cluster, whose workers read "
        "the files in byte ranges; the merges are the same",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (tcp://host:8786) for --engine dask; without it a "
        "local cluster of --workers processes is started",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="tokenizer JSON to write (with --extend: the file or folder of --format)",
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_train)


class _Tally:
    """UTF-8 bytes of the texts that went past (the corpus is streamed, never held)."""

    def __init__(self) -> None:
        self.bytes = 0

    def count(self, texts: Iterator[str]) -> Iterator[str]:
        for text in texts:
            self.bytes += len(text.encode("utf-8", "surrogatepass"))
            yield text


def _training_texts(
    corpus: list[str], *, raw: bool, preset: bool
) -> tuple[list[str], Iterator[str]]:
    """The files named and their texts, streamed; .conllu files give their sentences.

    Plain files are read in blocks (whole files when the pattern is not a preset: only the
    presets are known to split a block boundary like the text around it).
    """
    from tokembed.measure.corpus import load_corpus
    from tokembed.text.sources import TEXT_BLOCK_CHARS, expand_paths, iter_text_blocks

    names = expand_paths(corpus)

    def texts() -> Iterator[str]:
        for name in names:
            if not raw and name.endswith((".conllu", ".conllu.gz")):
                yield load_corpus(name).text
            else:
                blocks = iter_text_blocks([name], block_chars=TEXT_BLOCK_CHARS if preset else None)
                yield from (block.text for block in _allow_empty(blocks))

    return names, texts()


def _allow_empty(blocks: Iterator[TextBlock]) -> Iterator[TextBlock]:
    """The blocks of one file; an empty file adds nothing (the corpus as a whole may not be empty)."""
    from tokembed.errors import MeasureError

    try:
        yield from blocks
    except MeasureError as exc:
        if exc.code != "EMPTY_INPUT":
            raise


def _cluster_files(corpus: list[str], *, raw: bool) -> tuple[list[str], TextFiles, int] | None:
    """Plain files left for the cluster's workers to read, and their size on disk.

    None when some input must be read here (stdin, the sentences of .conllu files).
    """
    import os

    from tokembed.text.ranges import TextFiles
    from tokembed.text.sources import expand_paths

    names = expand_paths(corpus)
    if "-" in names or (not raw and any(n.endswith((".conllu", ".conllu.gz")) for n in names)):
        return None
    return names, TextFiles(tuple(names)), sum(os.path.getsize(n) for n in names)


def _run_train(args: argparse.Namespace) -> int:
    import time

    from tokembed.tokenizer.formats import save_tokenizer
    from tokembed.tokenizer.train import TrainConfig, train

    if args.scheduler is not None and args.engine != "dask":
        raise usage(
            "--scheduler needs --engine dask",
            value=args.scheduler,
            fix="add --engine dask, or drop --scheduler",
        )
    if args.extend is not None:
        return _run_extend(args)
    for flag, value in (("--encoding", args.encoding), ("--format", args.fmt)):
        if value is not None:
            raise usage(f"{flag} applies to --extend", value=value, fix=f"drop {flag}")
    if not args.corpus:
        raise usage("no corpus given", value=[], fix="name the text files to train on")
    config = TrainConfig(
        merges=args.merges,
        pattern=args.regex or args.pattern,
        specials=dict(args.special),
        workers=args.workers,
        progress=progress_wanted(args),
        engine=args.engine,
        scheduler=args.scheduler,
    )
    from tokembed.tokenizer.patterns import PATTERNS

    tally = _Tally()
    files = _cluster_files(args.corpus, raw=args.raw) if args.engine == "dask" else None
    texts: Iterable[str] | TextFiles
    if files is not None:
        names, texts, disk_bytes = files
    else:
        preset = config.pattern in PATTERNS
        names, streamed = _training_texts(args.corpus, raw=args.raw, preset=preset)
        texts = tally.count(streamed)
    start = time.perf_counter()
    try:
        tok = train(texts, config=config)
    except TokembedError as exc:
        raise speak_cli(exc, _TRAIN_FIXES) from None
    seconds = time.perf_counter() - start
    n_bytes = disk_bytes if files is not None else tally.bytes
    path = save_tokenizer(tok, args.output, inputs=input_files(args.corpus))
    if tok.n_merges < args.merges:
        print(
            f"tokembed: note: the corpus allows only {tok.n_merges} merges (every chunk is a "
            f"single token after them); asked for {args.merges}",
            file=sys.stderr,
        )
    if args.json:
        print(as_json({
            "merges_requested": args.merges, "merges_learned": tok.n_merges,
            "files": len(names), "bytes": n_bytes, "seconds": round(seconds, 3),
            "output": str(path), "address_hash": tok.address_hash,
        }))  # fmt: skip
        return 0
    print(
        f"trained {tok.n_merges} merges on {len(names)} file(s), {n_bytes:,} bytes, "
        f"in {seconds:.1f} s\nwrote {path} ({tok.address_hash[:19]})"
    )
    return 0


def _output_format(args: argparse.Namespace, base: Tokenizer) -> str:
    """--format, or the base's own: a rank file's ranks, a tokenizer.json's document."""
    if args.fmt is not None:
        return str(args.fmt)
    kind = base.metadata.get("source_format")
    if kind == "tiktoken":
        return "tokembed" if args.output.endswith(".json") else "tiktoken"
    return "hf" if kind in ("huggingface", "gpt2-vocab-merges") else "tokembed"


def _check_reproducible(base: Tokenizer, fmt: str) -> None:
    """Refuse an output format that would split text otherwise than the base does."""
    from tokembed.errors import FormatError

    pre = base.pretokenizer
    need = {"tiktoken": "tiktoken", "hf": "huggingface"}.get(fmt)
    if need is None:  # tokembed JSON records the stages and their dialect
        return
    stages = len(pre.stages)
    if pre.dialect != need or (fmt == "tiktoken" and stages != 1):
        reader = "tiktoken's regex engine" if fmt == "tiktoken" else "Hugging Face's (Oniguruma)"
        why = (
            f"{stages} pre-tokenizer stages; a rank file holds one regex"
            if pre.dialect == need
            else f"the base splits text as {pre.dialect} reads its regex, a {fmt} file as "
            f"{reader} does"
        )
        raise FormatError(
            "BASE_PRETOKENIZER_UNREPRODUCIBLE",
            f"--format {fmt} cannot reproduce the base's pre-tokenizer: {why}",
            value=fmt,
            fix="write tokembed JSON (--format tokembed), which keeps the base's pre-tokenizer",
        )


def _prove_append_only(base: Tokenizer, new: Tokenizer) -> object:
    """classify_change's proof that ``new`` only adds to ``base`` (NOT_APPEND_ONLY if not).

    A reserved id a new special took over changed only its placeholder name: the proof
    compares against the base with those names already changed (the ids were checked to be
    reserved by TrainConfig), so every other id must keep its symbol."""
    from tokembed.migrate import classify_change
    from tokembed.tokenizer import BPETables, Tokenizer

    old, tables = base.tables, new.tables
    renamed = {sid for name, sid in old.specials.items() if name not in tables.specials}
    if renamed:
        specials = {n: i for n, i in old.specials.items() if i not in renamed}
        specials |= {n: i for n, i in tables.specials.items() if i in renamed}
        base = Tokenizer(
            pretokenizer=base.pretokenizer,
            tables=BPETables(
                pieces=old.pieces,
                merges=old.merges,
                specials=specials,
                ignore_merges=old.ignore_merges,
            ),
        )
    change = classify_change(base, new)
    change.require_append_only()
    return change


def _write_extension(args: argparse.Namespace, base: Tokenizer, new: Tokenizer, fmt: str) -> Any:
    from pathlib import Path

    from tokembed.tokenizer.formats import export_tiktoken, save_tokenizer
    from tokembed.tokenizer.formats.hf import export_hf, extend_hf_document, write_hf_document
    from tokembed.tokenizer.formats.specs import split_spec

    source = Path(split_spec(args.extend)[0])
    inputs: list[str | Path] = [*input_files(args.corpus)]
    inputs += [source, *(source.iterdir() if source.is_dir() else ())] if source.exists() else []
    if fmt == "tiktoken":
        return export_tiktoken(new, args.output, inputs=inputs)
    if fmt == "tokembed":
        return save_tokenizer(new, args.output, inputs=inputs)
    if base.metadata.get("source_format") != "huggingface":
        return export_hf(new, args.output, inputs=inputs)
    import json

    path = source / "tokenizer.json" if source.is_dir() else source
    doc = json.loads(path.read_text(encoding="utf-8"))  # load_tokenizer read it just now
    data = extend_hf_document(doc, base, new, source=str(path))
    return write_hf_document(data, args.output, inputs=inputs)


def _run_extend(args: argparse.Namespace) -> int:
    import time

    from tokembed.tokenizer.patterns import PATTERNS
    from tokembed.tokenizer.train import TrainConfig, train

    if args.regex is not None or args.pattern != "teaching":
        raise usage(
            "--pattern/--regex do not apply to --extend",
            value=args.regex or args.pattern,
            fix="drop them: the extended tokenizer splits text as its base does",
        )
    if not args.corpus and args.merges != 0:
        raise usage(
            "no corpus to learn merges from",
            value=args.merges,
            fix="name the text files, or pass --merges 0 to add --special tokens alone",
        )
    base = load_tokenizer(args.extend, args.encoding)
    fmt = _output_format(args, base)
    _check_reproducible(base, fmt)
    config = TrainConfig(
        merges=args.merges,
        specials=dict(args.special),
        workers=args.workers,
        progress=progress_wanted(args),
        engine=args.engine,
        scheduler=args.scheduler,
        base=base,
    )
    tally = _Tally()
    preset = base.pretokenizer.stages[0] in PATTERNS.values() and len(base.pretokenizer.stages) == 1
    names, streamed = _training_texts(args.corpus, raw=args.raw, preset=preset)
    start = time.perf_counter()
    try:
        new = train(tally.count(streamed), config=config)
    except TokembedError as exc:
        raise speak_cli(exc, _TRAIN_FIXES) from None
    seconds = time.perf_counter() - start
    change: Any = _prove_append_only(base, new)
    path = _write_extension(args, base, new, fmt)
    learned = new.n_merges - base.n_merges
    if learned < args.merges:
        print(
            f"tokembed: note: the corpus allows only {learned} new merges (every chunk is a "
            f"single token after them); asked for {args.merges}",
            file=sys.stderr,
        )
    added = list(change.added)
    specials = {n: i for n, i in new.special_tokens.items() if n not in base.special_tokens}
    if args.json:
        print(as_json({
            "base": args.extend, "format": fmt, "merges_requested": args.merges,
            "merges_learned": learned, "specials_added": specials,
            "reserved_taken": sorted(i for i in specials.values() if i < change.old_ids),
            "old_ids": change.old_ids, "new_ids": change.new_ids, "added_ids": len(added),
            "kind": change.kind, "files": len(names), "bytes": tally.bytes,
            "seconds": round(seconds, 3), "output": str(path),
            "base_address_hash": base.address_hash, "address_hash": new.address_hash,
        }))  # fmt: skip
        return 0
    span = (
        "no new ids"
        if not added
        else f"new id {added[0]}"
        if len(added) == 1
        else f"new ids {added[0]}..{added[-1]}"
    )
    slots = sorted(i for i in specials.values() if i < change.old_ids)
    taken = f" (reserved ids taken over: {', '.join(map(str, slots))})" if slots else ""
    print(
        f"extended {args.extend} by {learned} merges and {len(specials)} special token(s)"
        f"{taken} on {len(names)} file(s), {tally.bytes:,} bytes, in {seconds:.1f} s\n"
        f"{change.kind}: {len(change.exact):,} old ids kept, {span}; ids {change.old_ids:,} -> "
        f"{change.new_ids:,}\nwrote {path} ({fmt}, {new.address_hash[:19]})"
    )
    return 0


def _add_encode(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("encode", help="print the token ids of a text")
    add_tokenizer_option(p)
    p.add_argument("text", nargs="?", default="-", help="text to encode, or '-' for stdin")
    specials = p.add_mutually_exclusive_group()
    specials.add_argument(
        "--allow-special", action="store_true", help="special-token spellings become their ids"
    )
    specials.add_argument(
        "--specials-as-text",
        action="store_true",
        help="special-token spellings are encoded as ordinary text",
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_encode)


def _run_encode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(args.tokenizer, args.encoding)
    text = read_stdin_text() if args.text == "-" else args.text
    try:
        ids = tok.encode(
            text,
            allowed_special="all" if args.allow_special else frozenset(),
            disallowed_special=frozenset() if args.specials_as_text else "all",
        )
    except TokembedError as exc:
        raise speak_cli(exc, _ENCODE_FIXES) from None
    print(as_json(ids) if args.json else " ".join(map(str, ids)))
    return 0


def _add_decode(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "decode",
        help="print the text of token ids",
        description="Decode ids given as arguments, or read from stdin ('-' or none): "
        "whitespace- or comma-separated, or a JSON list (what `encode --json` prints).",
    )
    add_tokenizer_option(p)
    p.add_argument("ids", nargs="*", metavar="ID", help="token ids, or '-' for stdin")
    p.add_argument(
        "--errors",
        choices=("strict", "replace", "ignore"),
        default="strict",
        help="bytes that are not UTF-8: refuse (default), show U+FFFD, or drop",
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_decode)


def _parse_ids(words: list[str], source: str) -> list[int]:
    import json

    text = " ".join(words).strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # also an int past the 4300-digit limit
            data = None
        if isinstance(data, list) and all(type(i) is int for i in data):
            return data
        raise usage(
            f"{source} is not a JSON list of integer ids",
            value=text[:40],
            fix="pass ids like `1 2 3` or `[1, 2, 3]`",
        )
    ids: list[int] = []
    for word in text.replace(",", " ").split():
        digits = word.removeprefix("-")
        # ASCII only: '²'.isdigit() holds but int('²') fails; 20 digits exceed any id.
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 20):
            raise usage(
                f"{source} holds {word!r}, which is not an integer id",
                value=word,
                fix="pass ids like `1 2 3` (what `tokembed encode` prints)",
            )
        ids.append(int(word))
    return ids


def _run_decode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(args.tokenizer, args.encoding)
    if args.ids in ([], ["-"]):
        ids = _parse_ids([sys.stdin.read()], "stdin")
    else:
        ids = _parse_ids(args.ids, "the arguments")
    try:
        text = tok.decode(ids, errors=args.errors)
    except TokembedError as exc:
        raise speak_cli(exc, _DECODE_FIXES) from None
    if args.json:
        print(as_json(text))
    else:  # one final newline, not two, when the text already ends a line
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _add_export(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("export", help="write a tokenizer as tiktoken ranks or HF tokenizer.json")
    add_tokenizer_option(p)
    p.add_argument("--format", required=True, choices=("tiktoken", "hf"), dest="fmt")
    p.add_argument("-o", "--output", required=True, help="folder (tiktoken) or file/folder (hf)")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.tokenizer.formats import export_hf, export_tiktoken
    from tokembed.tokenizer.formats.specs import split_spec

    tok = load_tokenizer(args.tokenizer, args.encoding)
    export = export_tiktoken if args.fmt == "tiktoken" else export_hf
    source = Path(split_spec(args.tokenizer)[0])
    inputs = [source, *(source.iterdir() if source.is_dir() else ())]  # never overwrite them
    path = export(tok, args.output, inputs=inputs)
    print(as_json({"output": str(path)}) if args.json else f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_train(sub)
    _add_encode(sub)
    _add_decode(sub)
    _add_export(sub)
