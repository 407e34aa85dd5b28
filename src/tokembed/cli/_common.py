"""Conventions every subcommand shares: the parser, -t, --json, --quiet, '-', progress.

* ``-t SPEC`` names a tokenizer the same way everywhere: a file, a folder, a
  tiktoken encoding name (``o200k_base``, through tiktoken's cache), or
  ``FILE@ENCODING`` / ``NAME@ENCODING`` for a rank file read with another
  encoding's pattern and special tokens (``tokembed.tokenizer.formats.specs`` parses
  them). ``--encoding`` does the same for every ``-t`` that names no encoding of its own.
* ``-`` reads stdin (text, or ids for ``decode``).
* ``--json`` prints results as JSON; ``--quiet`` silences progress, which is only
  drawn when stderr is a terminal.
* Errors are one line (``tokembed: CODE: ...``); their fixes name CLI flags.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from tokembed.errors import TokembedError, UsageError

if TYPE_CHECKING:
    from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = [
    "TOKENIZER_HELP",
    "OneLineParser",
    "activity",
    "add_json",
    "add_pattern_options",
    "add_quiet",
    "add_tokenizer_option",
    "as_json",
    "finite_float",
    "input_files",
    "load_tokenizer",
    "load_tokenizers",
    "progress_wanted",
    "quiet_libraries",
    "read_stdin_text",
    "speak_cli",
    "usage",
]

TOKENIZER_HELP = (
    "tokenizer: a file or folder (tokembed JSON, HF tokenizer.json, .tiktoken, "
    "vocab.json+merges.txt), an encoding name (o200k_base), or FILE@ENCODING"
)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage mistake as one coded line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        # One line with a code, like every other failure (exit 2: a usage mistake).
        self.exit(2, f"tokembed: INVALID_ARGUMENT: {message} — see `{self.prog} --help`\n")


def add_tokenizer_option(
    p: argparse.ArgumentParser, *, many: bool = False, required: bool = True
) -> None:
    """``-t``/``--tokenizer`` (repeatable when ``many``) and ``--encoding``."""
    p.add_argument(
        "-t",
        "--tokenizer",
        action="append" if many else "store",
        default=[] if many else None,
        required=required,
        metavar="TOK",
        help=TOKENIZER_HELP + (" (repeat -t for several)" if many else ""),
    )
    p.add_argument(
        "--encoding",
        metavar="NAME",
        help="encoding whose pattern and special tokens a rank file uses (o200k_harmony, qwen); "
        "same as TOK@NAME",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    # Also accepted after the subcommand; SUPPRESS keeps a global --quiet from being reset.
    p.add_argument(
        "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")


# What transformers, huggingface_hub and tqdm (the GGUF conversion bar included) read to
# stay silent; set while a command runs without progress, so nothing but the command's
# own lines reaches a file or pipe.
_SILENT_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "DS_ACCELERATOR": "cpu",  # deepspeed, when transformers imports it, logs its guess otherwise
}


@contextlib.contextmanager
def quiet_libraries(quiet: bool) -> Iterator[None]:
    """Silence libraries' progress bars, warnings and logging while the block runs (if ``quiet``).

    ``main`` wraps every command in it when progress is not wanted (``--quiet``, or
    stderr is not a terminal), so that a failure's one ``tokembed: CODE: ...`` line is
    the only thing on stderr. The environment and warning filters are restored after.
    """
    if not quiet:
        yield
        return
    import logging
    import os
    import warnings

    saved = {k: os.environ.get(k) for k in _SILENT_ENV}
    os.environ.update(_SILENT_ENV)
    levels = {n: logging.getLogger(n).level for n in ("transformers", "huggingface_hub", "gguf")}
    for name in levels:
        logging.getLogger(name).setLevel(logging.ERROR)
    hf = sys.modules.get("transformers.utils.logging")
    if hf is not None:  # already imported: its switches, not the environment, decide
        hf.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if hf is not None:
            hf.enable_progress_bar()


def progress_wanted(args: argparse.Namespace) -> bool:
    """Progress is drawn unless --quiet, and only on a terminal (never into a pipe or file)."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


@contextlib.contextmanager
def activity(label: str, *, show: bool) -> Iterator[None]:
    """A live "label: elapsed" line on stderr while a step of unknown length runs.

    No ETA is shown: without a count of work done, any estimate would be invented.
    """
    if not show:
        yield
        return
    from tqdm import tqdm

    bar = tqdm(desc=label, bar_format="{desc}: {elapsed}", leave=False)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.5):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
        bar.close()


def load_tokenizer(spec: str, encoding: str | None = None, *, among: bool = False) -> Tokenizer:
    """The tokenizer a ``-t`` value names (see the module docstring).

    ``--encoding`` applies to this one value, so giving it for a file that is not a rank
    file is refused; ``among=True`` (one of several ``-t``) applies it only where it can.
    A ``-t TOK@ENC`` whose ENC differs from ``--encoding`` is refused (INVALID_ARGUMENT),
    never resolved silently one way.
    """
    from tokembed.tokenizer.formats import load_tokenizer as load
    from tokembed.tokenizer.formats.specs import split_spec

    path, enc = split_spec(spec)
    if enc is not None and encoding is not None and enc != encoding:
        raise usage(
            f"-t {spec} names encoding {enc!r} and --encoding names {encoding!r}",
            value=(enc, encoding),
            fix=f"give the encoding once: -t {path}@{encoding}, or drop --encoding",
        )
    if enc is None and (not among or _takes_encoding(path)):
        enc = encoding
    if enc is not None and _is_json_tokenizer(path):
        flag = f"@{enc}" if encoding is None or enc != encoding else f"--encoding {enc}"
        raise usage(
            f"{flag} names the pattern and special tokens for a .tiktoken file or an encoding "
            f"name, but {path} is a JSON tokenizer that has its own",
            value=enc,
            fix=f"drop {flag} for this tokenizer",
        )
    return load(path, encoding=enc)


def _takes_encoding(path: str) -> bool:
    p = Path(path)
    return not p.exists() or p.suffix == ".tiktoken" or (p.is_dir() and any(p.glob("*.tiktoken")))


def _is_json_tokenizer(path: str) -> bool:
    p = Path(path)
    if p.is_dir():
        return (p / "tokenizer.json").is_file() or (p / "vocab.json").is_file()
    return p.suffix == ".json" and p.is_file()


def load_tokenizers(specs: Sequence[str], encoding: str | None = None) -> dict[str, Tokenizer]:
    """Tokenizers of several ``-t`` values, labelled by encoding, name or file stem (unique)."""
    from tokembed.tokenizer.formats.specs import split_spec

    out: dict[str, Tokenizer] = {}
    for spec in specs:
        path, enc = split_spec(spec)
        tok = load_tokenizer(spec, encoding, among=True)
        name = enc or tok.name or Path(path).stem
        base, k = name, 2
        while name in out:
            name, k = f"{base}#{k}", k + 1
        out[name] = tok
    return out


def read_stdin_text() -> str:
    """All of stdin as UTF-8 text (errors name the offset, as for files)."""
    from tokembed.text.sources import read_texts

    return read_texts(["-"])[0].text


def input_files(corpus: Sequence[str]) -> list[str]:
    """The files a corpus argument list names (folders and globs expanded): never overwrite them."""
    from tokembed.text.sources import expand_paths

    return [p for p in expand_paths(corpus) if p != "-"]


def speak_cli(exc: TokembedError, fixes: Mapping[str, str]) -> TokembedError:
    """``exc`` with its fix in command-line terms when ``fixes`` has one for its code.

    The library's fixes name Python arguments (``allowed_special=...``); on the command
    line the same advice is a flag.
    """
    fix = fixes.get(exc.code)
    if fix is None:
        return exc
    if exc.code == "SPECIAL_TOKEN_DISALLOWED":
        fix = fix.format(name=exc.value)
    return type(exc)(exc.code, exc.message, value=exc.value, fix=fix)


def usage(message: str, *, value: object, fix: str) -> UsageError:
    """An INVALID_ARGUMENT usage error (exit 2) raised by a subcommand itself."""
    return UsageError("INVALID_ARGUMENT", message, value=value, fix=fix)


def as_json(data: Any) -> str:
    """What ``--json`` prints: indented, non-ASCII kept readable."""
    import json

    return json.dumps(data, indent=2, ensure_ascii=False)


def finite_float(text: str) -> float:
    """An argparse type: a finite float that float32 can hold (``nan``, ``inf``, ``1e308`` are not).

    Values written into model tables are float32 or narrower; a number beyond that range
    would be written as infinity.
    """
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or abs(value) > 3.4028234663852886e38:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a finite number a float32 table can hold (|x| <= 3.4e38)"
        )
    return value


def _pattern_preset(text: str) -> str:
    """A pre-tokenization preset name (tiktoken's encoding names are accepted for theirs)."""
    from tokembed.tokenizer.patterns import PATTERNS

    name = text.removesuffix("_base")
    if name not in PATTERNS:
        raise argparse.ArgumentTypeError(
            f"unknown --pattern preset {text!r}; presets: {', '.join(sorted(PATTERNS))} "
            "(pass a regular expression with --regex)"
        )
    return name


def add_pattern_options(p: argparse.ArgumentParser) -> None:
    """``--pattern PRESET`` or ``--regex REGEX`` (one of them) for commands that train."""
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--pattern",
        type=_pattern_preset,
        default="teaching",
        metavar="PRESET",
        help="pre-tokenization preset: teaching (default), gpt2, r50k, cl100k, o200k, gpt2-hf",
    )
    how.add_argument("--regex", metavar="REGEX", help="pre-tokenization regex of your own")
