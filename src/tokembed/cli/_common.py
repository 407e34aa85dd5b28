"""Pieces every subcommand module shares: the parser class, common options, inputs."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["OneLineParser", "add_quiet", "add_tokenizer_option", "input_files", "load_tokenizer"]


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage mistake in one line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tokembed: usage: {message} (see `{self.prog} --help`)\n")


def add_tokenizer_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-t",
        "--tokenizer",
        required=True,
        help="tokembed JSON, .tiktoken rank file, HF tokenizer.json, or a folder with one",
    )
    p.add_argument(
        "--encoding",
        help="for rank files: encoding whose pattern/specials apply (e.g. o200k_harmony, qwen)",
    )


def load_tokenizer(args: argparse.Namespace) -> Any:
    from tokembed.tokenizer.formats import load_tokenizer

    return load_tokenizer(args.tokenizer, encoding=args.encoding)


def add_quiet(p: argparse.ArgumentParser) -> None:
    # Also accepted after the subcommand; SUPPRESS keeps a global --quiet from being reset.
    p.add_argument(
        "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )


def input_files(corpus: Sequence[str]) -> list[str]:
    """The files a corpus argument list names (folders and globs expanded): never overwrite them."""
    from tokembed.measure.sources import expand_paths

    return [p for p in expand_paths(corpus) if p != "-"]
