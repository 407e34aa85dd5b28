"""Sequence-length metrics of one tokenizer on one corpus: bytes/token, fertility, retention.

Given an ``encode`` callable (text → ids) and a :class:`Corpus`:

* bytes/token = UTF-8 bytes of the measured text / tokens;
* chars/token = code points / tokens;
* fertility = tokens / words, where a word is a match of :attr:`WordDefinition.pattern`
  (default ``\\p{L}+|\\p{N}+``: runs of letters or digits);
* single-token retention = share of *distinct* words that encode to exactly one
  token under the leading-space policy (``"space"``: the word is encoded as
  ``" " + word``, its usual form inside running text for GPT-style pre-tokenizers;
  ``"bare"``: the word alone);
* tokens/sentence = mean tokens when each sentence is encoded on its own, with no
  added LF (separators can change chunk boundaries, so this is not derived from the
  joined text);
* bits per byte = tokens · ⌈log2 R⌉ / bytes for an id range R (ids as a fixed-width code);
* the token premium of each language over a reference on parallel text = its
  sentence-by-sentence token total divided by the reference's.

Everything here works on an ``encode`` callable, so any tokenizer (ours, tiktoken,
HF) can be measured the same way. Text is encoded ordinarily: special-token
spellings in a corpus count as text.

Example::

    >>> from tokembed.measure.corpus import text_corpus
    >>> m = measure(lambda t: list(t.encode()), text_corpus("x", "ab cd\\n"))
    >>> m.bytes_per_token, m.fertility
    (1.0, 3.0)
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import regex

from tokembed.errors import MeasureError, UsageError, require_choice
from tokembed.measure.corpus import Corpus

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_WORD_PATTERN",
    "Encode",
    "Measurement",
    "WordDefinition",
    "compare",
    "measure",
    "single_token_ids",
    "token_premium",
]

Encode = Callable[[str], Sequence[int]]
DEFAULT_WORD_PATTERN = r"\p{L}+|\p{N}+"


@dataclass(frozen=True, kw_only=True)
class WordDefinition:
    """What a word is (a regex) and how a word is encoded for retention."""

    pattern: str = DEFAULT_WORD_PATTERN
    leading_space: Literal["space", "bare"] = "space"

    def __post_init__(self) -> None:
        require_choice(
            self.leading_space,
            ("space", "bare"),
            "leading-space policy",
            fix="use 'space' (encode ' ' + word) or 'bare' (the word alone)",
        )
        try:
            regex.compile(self.pattern)
        except regex.error as exc:
            raise UsageError(
                "INVALID_PATTERN",
                f"word regex does not compile: {exc}",
                value=self.pattern,
                fix="pass a valid `regex` pattern such as \\p{L}+|\\p{N}+",
            ) from exc

    @cached_property
    def _compiled(self) -> regex.Pattern[str]:
        return regex.compile(self.pattern)

    def words(self, text: str, *, corpus: str = "") -> list[str]:
        """All non-empty matches in ``text``; raises EMPTY_WORD_DEFINITION when there are none.

        The match releases the GIL (``concurrent=True``), so a thread can find words
        while another encodes (see ``curves._fast_points``).
        """
        compiled = self._compiled
        if compiled.groups:  # findall would return groups; keep whole matches
            found = [m.group() for m in compiled.finditer(text, concurrent=True)]
        else:
            found = compiled.findall(text, concurrent=True)
        if found.count(""):  # a pattern such as \w* also matches empty strings
            found = [w for w in found if w]
        if not found:
            raise MeasureError(
                "EMPTY_WORD_DEFINITION",
                f"the word regex {self.pattern!r} matches nothing in {corpus or 'the text'}",
                value=self.pattern,
                fix="use a word regex that matches this script, e.g. the default \\p{L}+|\\p{N}+",
            )
        return found

    def count_distinct(self, text: str, *, corpus: str = "") -> tuple[int, set[str]]:
        """How many words ``text`` has and the set of distinct ones (raises as :meth:`words`)."""
        found = self.words(text, corpus=corpus)
        return len(found), set(found)

    def form(self, word: str) -> str:
        """The string encoded to test whether ``word`` is a single token."""
        return " " + word if self.leading_space == "space" else word

    def describe(self) -> str:
        return f"{self.pattern} (retention encodes {self.form('w')!r} for word 'w')"


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """Raw counts of one tokenizer on one corpus; ratios are derived properties."""

    tokenizer: str
    corpus: str
    partition: str | None
    bytes: int
    chars: int
    tokens: int
    words: int
    distinct_words: int
    single_token_words: int
    sentences: int
    sentence_tokens: int
    id_range: int | None
    word_definition: str
    address_hash: str | None = None  # of the tokenizer measured, when known

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens

    @property
    def fertility(self) -> float:
        return self.tokens / self.words

    @property
    def retention(self) -> float:
        return self.single_token_words / self.distinct_words

    @property
    def tokens_per_sentence(self) -> float:
        return self.sentence_tokens / self.sentences if self.sentences else math.nan

    @property
    def bits_per_id(self) -> int | None:
        """⌈log2 R⌉: the bits of a fixed-width id code."""
        return None if self.id_range is None else max(1, (self.id_range - 1).bit_length())

    @property
    def bits_per_byte(self) -> float | None:
        bits = self.bits_per_id
        return None if bits is None else self.tokens * bits / self.bytes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name in (
            "bytes_per_token",
            "chars_per_token",
            "fertility",
            "retention",
            "tokens_per_sentence",
            "bits_per_id",
            "bits_per_byte",
        ):
            d[name] = getattr(self, name)
        return d


def single_token_ids(
    encode: Encode,
    distinct: Iterable[str],
    words: WordDefinition,
    *,
    pieces: Collection[bytes] | None = None,
) -> list[int]:
    """The id of each distinct word that encodes to exactly one token (under ``words.form``).

    ``pieces`` (the vocabulary's ordinary byte strings) only skips encoding words that
    no single piece spells; the result is the same, since a one-token encoding spells
    its piece exactly. Ids come in the order of the words when ``pieces`` is None,
    else in the order of the sorted candidate words.
    """
    if pieces is None:
        candidates: Iterable[str] = distinct
    else:
        # Look each piece up among the distinct words instead of testing each word
        # against the pieces: RusLit-40 has 201k distinct words but a 4,096-merge
        # vocabulary only ~4.4k pieces, and ~95% of the words are no piece at all.
        prefix = words.form("")
        pool = distinct if isinstance(distinct, set | frozenset) else set(distinct)
        found = set()
        for piece in pieces:
            try:
                spelled = piece.decode("utf-8")
            except UnicodeDecodeError:  # a partial character spells no word
                continue
            word = spelled[len(prefix) :]
            if word and spelled.startswith(prefix) and word in pool:
                found.add(word)
        candidates = sorted(found)
    out = []
    for w in candidates:
        ids = encode(words.form(w))
        if len(ids) == 1:
            out.append(ids[0])
    return out


def _sentence_tokens(encode: Encode, lines: Sequence[str]) -> int:
    """Total tokens of the lines encoded one by one; each distinct line is encoded once
    (RusLit-40: 120,039 distinct of 131,043 lines)."""
    return sum(len(encode(line)) * k for line, k in Counter(lines).items())


def measure(
    encode: Encode,
    corpus: Corpus,
    *,
    tokenizer: str = "encode",
    words: WordDefinition | None = None,
    id_range: int | None = None,
    pieces: Collection[bytes] | None = None,
    address_hash: str | None = None,
    advance: Callable[[int], object] | None = None,
) -> Measurement:
    """Measure ``encode`` on ``corpus`` (metrics in the module docstring).

    Tokens are counted on :attr:`Corpus.units` (each file of a plain-text corpus
    alone, the joined sentences of a CoNLL-U corpus as one text). This is the one
    measurement behind ``tokembed measure``, ``report`` and ``demo``.

    ``pieces`` (optional, the vocabulary's byte strings) only speeds up retention.
    ``advance`` (optional) is called with the UTF-8 bytes of each unit once it is
    encoded: a progress bar's ``update``.

    Raises:
        MeasureError(EMPTY_INPUT): the corpus has no text.
        MeasureError(EMPTY_WORD_DEFINITION): the word regex matches nothing in it.
    """
    words = words or WordDefinition()
    corpus.require_text()
    text = corpus.text
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The word regex and tiktoken's encoder release the GIL, so finding words
        # (1.4 s on RusLit-40 with the set) overlaps the encodes (2 x 2.1 s).
        counted = pool.submit(words.count_distinct, text, corpus=corpus.name)
        try:
            tokens = 0
            for unit in corpus.units:
                tokens += len(encode(unit))
                if advance is not None:
                    advance(_utf8_bytes(unit))
            sentence_tokens = _sentence_tokens(encode, [s.text for s in corpus.sentences])
        finally:  # a word error (EMPTY_WORD_DEFINITION) wins, as when words came first
            n_words, distinct = counted.result()
    return Measurement(
        tokenizer=tokenizer,
        corpus=corpus.name,
        partition=corpus.partition,
        bytes=len(text.encode("utf-8")),
        chars=len(text),
        tokens=tokens,
        words=n_words,
        distinct_words=len(distinct),
        single_token_words=len(single_token_ids(encode, distinct, words, pieces=pieces)),
        sentences=len(corpus.sentences),
        sentence_tokens=sentence_tokens,
        id_range=id_range,
        word_definition=words.describe(),
        address_hash=address_hash,
    )


def token_premium(measurements: Mapping[str, Measurement], *, reference: str) -> dict[str, float]:
    """Each language's sentence-wise token total over the reference language's (parallel text).

    Raises:
        UsageError(INVALID_ARGUMENT): ``reference`` is not among the measurements.
        MeasureError(UNALIGNED_PARALLEL_CORPUS): sentence counts differ.
    """
    if reference not in measurements:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"reference language {reference!r} was not measured",
            value=reference,
            fix=f"choose one of {sorted(measurements)}",
        )
    ref = measurements[reference]
    out: dict[str, float] = {}
    for name, m in measurements.items():
        if m.sentences != ref.sentences:
            raise MeasureError(
                "UNALIGNED_PARALLEL_CORPUS",
                f"{name} has {m.sentences} sentences, reference {reference} has {ref.sentences}",
                value=name,
                fix="measure aligned corpora (see tokembed.measure.corpus.align)",
            )
        out[name] = m.sentence_tokens / ref.sentence_tokens
    return out


def _utf8_bytes(text: str) -> int:
    """The UTF-8 length of ``text`` (lone surrogates count as their 3 bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _bytes_bar(total: int, *, show: bool) -> Any:
    """A tqdm bar counting ``total`` bytes on stderr, or None unless ``show`` and a terminal.

    The work of measuring is known in advance (the bytes of every unit, once per
    tokenizer), so the bar counts it; callers name the step with ``set_description``.
    """
    if not (show and sys.stderr.isatty()):
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, leave=False)


def compare(
    tokenizers: Mapping[str, Tokenizer],
    corpora: Mapping[str, Corpus],
    *,
    words: WordDefinition | None = None,
    progress: bool = False,
) -> list[Measurement]:
    """:func:`measure` every tokenizer on every corpus (ordinary encoding, R from its tables).

    Each measurement carries its tokenizer's label and address hash.

    Results are ordered by corpus, then tokenizer, in the order given; each
    measurement's ``corpus`` is its key in ``corpora``. With ``progress`` (and stderr a
    terminal) a bar counts the bytes encoded, named ``TOKENIZER on CORPUS``.
    """
    total = len(tokenizers) * sum(_utf8_bytes(u) for c in corpora.values() for u in c.units)
    bar = _bytes_bar(total, show=progress)
    out = []
    try:
        for label, corpus in corpora.items():
            for name, tok in tokenizers.items():
                if bar is not None:
                    bar.set_description(f"{name} on {label}")
                m = measure(
                    tok.encode_ordinary,
                    corpus,
                    tokenizer=name,
                    words=words,
                    id_range=tok.tables.id_range,
                    pieces=frozenset(tok.tables.pieces.values()),
                    address_hash=tok.address_hash,
                    advance=None if bar is None else bar.update,
                )
                out.append(replace(m, corpus=label))
    finally:
        if bar is not None:
            bar.refresh()  # the last count, whatever tqdm's redraw interval skipped
            bar.close()
    return out
