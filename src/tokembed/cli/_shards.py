"""The ``tokenize`` subcommand: a corpus into training shards bound to their tokenizer."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tokembed.cli._common import (
    add_json,
    add_quiet,
    add_tokenizer_option,
    as_json,
    load_tokenizer,
    progress_wanted,
    speak_cli,
)
from tokembed.errors import TokembedError

__all__ = ["register"]

# The library's fixes name Python arguments; on the command line they are these flags.
_FIXES = {
    "UNKNOWN_SPECIAL_TOKEN": "pass --no-eot, or a tokenizer with <|endoftext|>",
    "WORKERS_NOT_STARTED": "run again with --workers 1, or check the machine's memory",
    "RESUME_MISMATCH": "run with the same inputs, tokenizer and options, or pass --overwrite",
    "SCHEDULER_UNREACHABLE": "start one (`dask scheduler`) and pass --scheduler tcp://HOST:8786, "
    "or drop --scheduler to start a local cluster",
}


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``tokembed tokenize``."""
    p = sub.add_parser(
        "tokenize",
        help="tokenize a corpus into training shards (Megatron indexed dataset or flat .bin)",
        description="Tokenize files, folders (recursive), globs, .gz, '-' (stdin), CoNLL-U "
        "and JSON Lines (.jsonl/.ndjson: one document per record) into shards with a "
        "manifest naming the tokenizer's address hash and every input's SHA-256. The output "
        "is the same for any --workers and --engine.",
    )
    p.add_argument("inputs", nargs="+", metavar="FILES", help="files, folders, globs or '-'")
    add_tokenizer_option(p)
    p.add_argument("-o", "--output", required=True, help="folder to write the shards into")
    p.add_argument("--format", choices=("megatron", "bin"), default="megatron",
                   help="megatron: .bin + .idx for Megatron-Core's IndexedDataset (default); "
                   "bin: nanoGPT's flat .bin of ids with a JSON sidecar")  # fmt: skip
    p.add_argument("--doc", default="line", metavar="RULE",
                   help="where documents end: line (default), blank-line, file or sep:STRING")  # fmt: skip
    p.add_argument("--field", default="text", help="JSON Lines field holding the text (text)")
    p.add_argument("--input-format", choices=("auto", "text", "jsonl", "conllu"), default="auto",
                   help="how inputs are read: by file name (auto), or as said for every file")  # fmt: skip
    eot = p.add_mutually_exclusive_group()
    eot.add_argument("--eot", dest="eot", action="store_const", const=True, default=None,
                     help="end every document with <|endoftext|> (default where it exists)")  # fmt: skip
    eot.add_argument("--no-eot", dest="eot", action="store_const", const=False,
                     help="append no end-of-text id")  # fmt: skip
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="a byte that is not UTF-8: refuse it (strict) or read it as U+FFFD")  # fmt: skip
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="shards encoded at once: threads for line documents of plain text, else processes (or Dask workers)",
    )
    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local processes, or a Dask cluster (--scheduler, else a local one)")  # fmt: skip
    p.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--shard-bytes", type=int, default=None, metavar="N",
                   help="input bytes per shard (default 16 MiB)")  # fmt: skip
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue the run OUT records")
    again.add_argument("--overwrite", action="store_true", help="replace the shards OUT holds")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from tokembed.tokenizer.shards import TokenizeConfig, tokenize_corpus

    options: dict[str, Any] = {}
    if args.shard_bytes is not None:
        options["shard_bytes"] = args.shard_bytes
    config = TokenizeConfig(
        format=args.format,
        doc=args.doc,
        field=args.field,
        input_format=args.input_format,
        eot=args.eot,
        errors=args.errors,
        workers=args.workers,
        engine=args.engine,
        scheduler=args.scheduler,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=progress_wanted(args),
        **options,
    )
    tok = load_tokenizer(args.tokenizer, args.encoding)
    start = time.perf_counter()
    try:
        m = tokenize_corpus(args.inputs, tokenizer=tok, output=args.output, config=config)
    except TokembedError as exc:
        raise speak_cli(exc, _FIXES) from None
    seconds = time.perf_counter() - start
    n_bytes = m.text_bytes
    if args.json:
        print(as_json({
            "output": args.output, "address_hash": m.address_hash, "format": m.format,
            "dtype": m.dtype, "documents": m.documents, "tokens": m.tokens,
            "shards": len(m.shards), "text_bytes": n_bytes, "seconds": round(seconds, 3),
        }))  # fmt: skip
        return 0
    rate = n_bytes / seconds / 1e6 if seconds > 0 else float("inf")
    print(
        f"tokenized {len(m.inputs)} file(s), {n_bytes:,} bytes of text, into {len(m.shards)} "
        f"{m.format} shard(s): {m.documents:,} documents, {m.tokens:,} {m.dtype} ids, "
        f"in {seconds:.1f} s ({rate:.1f} MB/s)\nwrote {args.output} ({m.address_hash[:19]})",
        file=sys.stdout,
    )
    return 0
