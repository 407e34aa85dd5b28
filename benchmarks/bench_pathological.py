"""Pathological text: encoding and training throughput must not fall as one chunk grows.

For every real tokenizer in ``../shared/data/tokenizers`` and four inputs that
make a single pre-tokenization chunk as long as the text (a run of one letter,
whitespace, digits, CJK), encode 10 KB, 100 KB and 1 MB with ours
(``Tokenizer.encode_ordinary``, whichever engine it picks) and with the peer
that defines the vocabulary: tiktoken (``tiktoken.Encoding`` built from the rank
file with its own pattern, ``encode_ordinary``) for rank files, Hugging Face
``tokenizers`` (``Tokenizer.from_file``/``BPE.from_file``, ``encode(...).ids``)
for ``tokenizer.json`` and GPT-2's files. Then training (``train`` with the
cl100k pattern, 20 merges) against ``tokenizers``' ``BpeTrainer`` on the same
texts (up to 100 KB: that trainer is quadratic on one long word).

Linear work shows as a constant MB/s down a column: the ``1MB/10KB`` column is
the throughput at 1 MB divided by that at 10 KB (1.0 = linear; a quadratic
algorithm gives about 0.01). Each cell is the median of up to seven calls (fewer
once a second is spent), ours and the peer alike: one call on 10 KB is a fraction
of a millisecond, and a single such sample moved the ratio by 2x. A peer that
crashes (tiktoken's regex overflows its stack on a million spaces) prints ``crash``.

A last table keeps the total fixed (4 MB) and grows the chunk: the same bytes as
4,000 chunks of 1 KB, ..., 4 chunks of 1 MB, for our compiled encoder with its
cache off (every chunk merged), in rank mode (o200k) and explicit-merge mode
(SmolLM2). The merge is O(n log n) in the chunk length n (a heap of candidate
pairs); the ratio column divides MB/s at 1 MB chunks by MB/s at 1 KB chunks, so
a log factor alone would show about 0.5 and a quadratic merge about 0.001
(part of what remains below 1.0 is the heap outgrowing the CPU caches).

    python benchmarks/bench_pathological.py            # 10 KB, 100 KB, 1 MB
    python benchmarks/bench_pathological.py --quick    # 10 KB and 100 KB
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _env import load_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
TOKENIZERS = DATA / "tokenizers"
INPUTS = {"letter": "a", "spaces": " ", "digits": "7", "cjk": "中"}
SIZES = {"10KB": 10_000, "100KB": 100_000, "1MB": 1_000_000}
_REPEATS = 7  # calls per cell at most (the median is printed)
_BUDGET = 1.0  # seconds per cell after which no further call starts


def _text(unit: str, n_bytes: int) -> str:
    return unit * (n_bytes // len(unit.encode()))


def _timed(fn: Callable[[str], Any], text: str) -> float | None:
    """Median seconds of ``fn(text)`` over up to ``_REPEATS`` calls (fewer once ``_BUDGET``
    seconds are spent), or None when a call raises (a crash of the peer)."""
    times: list[float] = []
    while len(times) < _REPEATS and sum(times) < _BUDGET:
        t0 = time.perf_counter()
        try:
            fn(text)
        except KeyboardInterrupt:
            raise
        except BaseException:  # tiktoken's PanicException derives from BaseException
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _peers() -> list[tuple[str, Any, Callable[[str], Any] | None, str]]:
    """(name, our tokenizer, peer's encode or None, peer's name) per real vocabulary."""
    from tokembed.tokenizer import load_tokenizer

    out: list[tuple[str, Any, Callable[[str], Any] | None, str]] = []
    for path in sorted(TOKENIZERS.glob("*.tiktoken")):
        tok = load_tokenizer(path, encoding=path.stem)
        peer: Callable[[str], Any] | None = None
        try:
            import tiktoken

            from tokembed.tokenizer.formats.ranks import parse_ranks

            enc = tiktoken.Encoding(
                path.stem,
                pat_str=tok.pretokenizer.stages[0],
                mergeable_ranks=parse_ranks(path.read_bytes()),
                special_tokens={},
            )
            peer = enc.encode_ordinary
        except ImportError:
            pass
        out.append((path.stem, tok, peer, "tiktoken"))
    for folder in sorted(p for p in TOKENIZERS.iterdir() if p.is_dir()):
        tok = load_tokenizer(folder)
        hf: Callable[[str], Any] | None = None
        try:
            from tokenizers import Tokenizer, decoders, models, pre_tokenizers

            if (folder / "tokenizer.json").is_file():
                peer_tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            else:
                bpe = models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
                peer_tok = Tokenizer(bpe)
                peer_tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
                peer_tok.decoder = decoders.ByteLevel()
            hf = lambda text, t=peer_tok: t.encode(text, add_special_tokens=False).ids  # noqa: E731
        except ImportError:
            pass
        out.append((folder.name, tok, hf, "HF tokenizers"))
    return out


def _row(
    label: str, ours: list[float | None], peer: list[float | None] | None, sizes: list[int]
) -> None:
    """One line: MB/s of ours and the peer per size, our linearity, the time ratio at the end."""

    def mbs(dt: float | None, n: int) -> str:
        if dt is None:
            return "crash"
        return "skip" if dt != dt else f"{n / dt / 1e6:.2f}"  # NaN: not run

    theirs = peer if peer is not None else [None] * len(sizes)
    cells = [
        f"{mbs(o, n)} / {mbs(p, n) if peer is not None else 'n/a'}"
        for o, p, n in zip(ours, theirs, sizes, strict=True)
    ]
    first, last = ours[0], ours[-1]
    lin = f"{(sizes[-1] / last) / (sizes[0] / first):.2f}" if first and last else "-"
    end = theirs[-1]
    ratio = f"{end / last:.2f}" if end and last and end == end else "-"
    print(f"{label:<30}" + "".join(f"{c:>22}" for c in cells) + f"{lin:>8}{ratio:>11}")


def _header(sizes: list[str], what: str) -> None:
    print(
        f"\n{what}\nMB/s as ours / peer per size (medians of up to {_REPEATS} calls); "
        "lin. = MB/s at the largest size over MB/s at 10 KB (1.0 = linear); "
        "peer/ours = time ratio at the largest size (> 1: ours faster)"
    )
    print(f"{'':<30}" + "".join(f"{s:>22}" for s in sizes) + f"{'lin.':>8}{'peer/ours':>11}")


_CHUNK_LENGTHS = {"1KB": 1_000, "10KB": 10_000, "100KB": 100_000, "1MB": 1_000_000}
_TOTAL = 4_000_000


def _chunk_growth() -> None:
    """Our compiled merge alone (cache off) at a fixed total and growing chunk length."""
    from tokembed.tokenizer import load_tokenizer

    print(
        f"\nchunk length at a fixed total of {_TOTAL // 1_000_000} MB "
        "(ours, compiled, cache off; MB/s per chunk length)"
    )
    print(f"{'':<30}" + "".join(f"{s:>10}" for s in _CHUNK_LENGTHS) + f"{'1MB/1KB':>10}")
    for source in (TOKENIZERS / "o200k_base.tiktoken", TOKENIZERS / "smollm2-135m"):
        if not source.exists():
            continue
        tok = load_tokenizer(source)
        fast = tok._engine
        if tok.implementation != "compiled" or fast.scanner is None:
            print(f"{source.name}: the compiled encoder is not built; skipped")
            continue
        for kind, unit in INPUTS.items():
            speeds = []
            for n in _CHUNK_LENGTHS.values():
                # A chunk of n bytes of one kind, closed by a letter/space the patterns split off.
                chunk = _text(unit, n - 2) + ("x " if unit != "a" else "! ")
                text = chunk * (_TOTAL // n)
                enc = fast._module.Encoder(fast.tables, cache_limit=0)
                t0 = time.perf_counter()
                enc.encode_text(text, *fast.scanner, as_bytes=True)
                speeds.append(len(text.encode()) / (time.perf_counter() - t0) / 1e6)
            cells = "".join(f"{v:>10.2f}" for v in speeds)
            print(f"{source.name + ' ' + kind:<30}{cells}{speeds[-1] / speeds[0]:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 KB and 100 KB only")
    args = parser.parse_args()
    print(load_line("start"))
    names = ["10KB", "100KB"] if args.quick else list(SIZES)
    sizes = [SIZES[s] for s in names]

    _header(names, "encode")
    for vocab, tok, peer, peer_name in _peers():
        for kind, unit in INPUTS.items():
            texts = [_text(unit, n) for n in sizes]
            tok.encode_ordinary(texts[0][:100])  # build the engine outside the timing
            ours = [_timed(tok.encode_ordinary, t) for t in texts]
            theirs = None if peer is None else [_timed(peer, t) for t in texts]
            _row(
                f"{vocab} [{tok.implementation}] {kind}",
                ours,
                theirs,
                [len(t.encode()) for t in texts],
            )
        print(f"  peer for {vocab}: {peer_name}")

    from tokembed.tokenizer import TrainConfig, train

    _header(names, "train (cl100k pattern, 20 merges; peer: HF BpeTrainer, ByteLevel)")
    for kind, unit in INPUTS.items():
        texts = [_text(unit, n) for n in sizes]
        config = TrainConfig(merges=20, pattern="cl100k", progress=False)
        ours = [_timed(lambda t: train([t], config=config), t) for t in texts]  # noqa: B023
        # HF's trainer is quadratic on one long word (10 KB: 0.2 s, 100 KB: 7.9 s here),
        # so 1 MB would take over ten minutes: it is skipped above 100 KB.
        theirs = [_timed(_hf_train, t) if len(t) <= 100_000 else float("nan") for t in texts]
        _row(f"train {kind}", ours, theirs, [len(t.encode()) for t in texts])
    _chunk_growth()
    print(load_line("end"))


def _hf_train(text: str) -> None:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from tokembed.tokenizer import PATTERNS
    from tokembed.tokenizer.oniguruma import to_onig

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(to_onig(PATTERNS["cl100k"])), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=256 + 20,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([text], trainer=trainer)


if __name__ == "__main__":
    main()
