"""Byte-level BPE training, equal merge for merge to ``train_reference``.

Steps: pre-tokenize every text and count unique chunks in order of first
occurrence (the compiled counter on ``workers`` threads for a scanned pattern, else
worker processes, see ``_count``; or a Dask cluster), then learn merges over that
table (:mod:`~tokembed.tokenizer.learn`): memory follows the number of unique chunks,
not the corpus size.

Special tokens get ids after the merges (``None``) or the ids given; two names
with one id are an alias and are reported by ``Tokenizer.aliases``.

Continuing a trained tokenizer (``TrainConfig(base=...)``): the texts are split by the
base's pre-tokenizer, each chunk is encoded by the base's merges, and ``merges`` new merges
are learned from there by the same rule (the compiled learner, the reference where it is
not built). Every base id keeps its bytes or its special names; new merges get the ids past
every base id (tiktoken's rule for a rank file: a new piece ranks past every old rank), then
new specials, unless a special is given one of the base's reserved ids (a special whose
every name holds ``reserved``, such as o200k_harmony's ``<|reserved_200000|>``), which it
then takes over. ``merges=0`` with specials adds special tokens alone (no text is read).
When the corpus offers fewer new pairs than asked, the merges that exist are returned and
``metadata["merges_learned"]`` says how many; none at all is refused (NO_NEW_MERGE).

Example::

    >>> tok = train(["низко низко летали ласточки, ласточки летали низко"],
    ...             config=TrainConfig(merges=6, progress=False))
    >>> len(tok.encode_ordinary("низко низко летали ласточки, ласточки летали низко"))
    62
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer._batch import progress_enabled
from tokembed.tokenizer._count import count_chunks
from tokembed.tokenizer._dask_count import count_on_dask
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.dialect import Dialect
from tokembed.tokenizer.learn import learn_merges
from tokembed.tokenizer.model import ID_LIMIT, BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.special import assign_special_ids, reserved_ids
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["TrainConfig", "train"]


def _bad(field_name: str, value: object, fix: str) -> UsageError:
    return UsageError(
        "INVALID_ARGUMENT", f"TrainConfig.{field_name} = {value!r} is invalid", value=value, fix=fix
    )


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """What to train.

    Attributes:
        merges: number of merges to learn (fewer if the corpus runs out of pairs).
        pattern: pre-tokenization preset name or a regex.
        dialect: whose regex reading the chunks must match: ``"tiktoken"`` (what
            ``export_tiktoken``'s rank file is split by) or ``"huggingface"`` (what a
            ``tokenizer.json`` from ``export_hf`` will split by). The two differ
            only on code points their Unicode tables classify differently.
        specials: special-token name → id, or None for "next id after the merges".
        workers: counters of chunks (1 = this thread): threads of the compiled counter for
            a preset pattern, spawned processes otherwise (a script using workers > 1 then
            needs the ``if __name__ == "__main__":`` guard); with ``engine="dask"`` and no
            scheduler, the local cluster's worker processes.
        engine: where chunks are counted: ``"local"`` (this machine) or ``"dask"`` (a Dask
            cluster; needs the ``dask`` extra). Pass the texts as
            ``TextFiles`` to have the workers read the files in byte ranges.
            The chunk table, and so every merge, is the same either way.
        scheduler: address of a running Dask scheduler (``tcp://host:8786``), or None for
            a local cluster; only with ``engine="dask"``.
        progress: show tqdm bars (only on a terminal).
        base: a trained tokenizer to continue (see the module docstring): its pre-tokenizer
            is used, so ``pattern`` and ``dialect`` stay at their defaults; a special's
            explicit id must be one of its reserved ids.

    Raises:
        UsageError(INVALID_ARGUMENT): negative merges, workers < 1, a negative id, an
            unknown engine, ``engine="dask"`` without Dask installed, a scheduler without
            ``engine="dask"``, a base that is not a Tokenizer, or a pattern/dialect with one.
        UsageError(INVALID_PATTERN): the pattern does not compile.
        UsageError(NOTHING_TO_ADD): a base with ``merges=0`` and no specials.
        TokenizerError(RESERVED_ID_UNAVAILABLE): with a base, a special's explicit id is
            not a reserved id of the base (an ordinary id, a special in use, or undefined),
            or two new names ask for one reserved id.
        TokenizerError(SPECIAL_TOKEN_CONFLICT): with a base, a new special's name is
            already a special of the base.
    """

    merges: int
    pattern: str = "teaching"
    dialect: Dialect = "tiktoken"
    specials: Mapping[str, int | None] = field(default_factory=dict)
    workers: int = 1
    progress: bool = True
    engine: Literal["local", "dask"] = "local"
    scheduler: str | None = None
    base: Tokenizer | None = None

    def __post_init__(self) -> None:
        if isinstance(self.merges, bool) or not isinstance(self.merges, int) or self.merges < 0:
            raise _bad("merges", self.merges, "pass a non-negative integer")
        if self.merges > ID_LIMIT - 256:  # merge k makes id 256 + k, a 32-bit id
            raise _bad("merges", self.merges, f"pass at most {ID_LIMIT - 256:,} merges")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise _bad("workers", self.workers, "pass workers=1 or more")
        for name, sid in self.specials.items():
            if not isinstance(name, str) or not name:
                raise _bad("specials", name, "special-token names are non-empty strings")
            if sid is not None and (
                isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < ID_LIMIT
            ):
                raise _bad("specials", {name: sid}, "give an id in [0, 2**32) or None")
        if self.engine not in ("local", "dask"):
            raise _bad("engine", self.engine, "pass engine='local' or engine='dask'")
        if self.scheduler is not None and (
            self.engine != "dask" or not isinstance(self.scheduler, str) or not self.scheduler
        ):
            raise _bad(
                "scheduler",
                self.scheduler,
                "a scheduler address is used only with engine='dask'; pass both, or neither",
            )
        if self.engine == "dask" and importlib.util.find_spec("distributed") is None:
            raise _bad(
                "engine", self.engine, "install the dask extra: pip install 'tokembed[dask]'"
            )
        object.__setattr__(self, "specials", dict(self.specials))
        if self.base is not None:
            self._check_base(self.base)
        self.pretokenizer  # noqa: B018  (compiles the pattern: fail here, not later)

    def _check_base(self, base: Tokenizer) -> None:
        if not isinstance(base, Tokenizer):
            raise _bad("base", base, "pass a Tokenizer (load_tokenizer reads any file or name)")
        if self.pattern != "teaching" or self.dialect != "tiktoken":
            raise _bad(
                "pattern" if self.pattern != "teaching" else "dialect",
                self.pattern if self.pattern != "teaching" else self.dialect,
                "leave pattern and dialect out: a continued tokenizer splits text as its base does",
            )
        if self.merges == 0 and not self.specials:
            raise UsageError(
                "NOTHING_TO_ADD",
                "continuing a tokenizer with merges=0 and no specials adds nothing",
                value=0,
                fix="ask for merges (merges=N, --merges N) or specials (--special NAME)",
            )
        old = base.tables.specials
        reserved = reserved_ids(old)
        asked: dict[int, str] = {}
        for name, sid in self.specials.items():
            if name in old:
                raise TokenizerError(
                    "SPECIAL_TOKEN_CONFLICT",
                    f"special token {name!r} is already in the base, with id {old[name]}",
                    value=name,
                    fix="drop it: the base's specials keep their ids in the new tokenizer",
                )
            if sid is None:
                continue
            if sid not in reserved or sid in asked:
                taken = (
                    f"asked for by {asked[sid]!r} too"
                    if sid in asked
                    else "an ordinary id of the base"
                    if sid in base.tables.pieces
                    else f"the special {sorted(n for n, i in old.items() if i == sid)[0]!r}"
                    if sid in old.values()
                    else "not an id of the base"
                )
                raise TokenizerError(
                    "RESERVED_ID_UNAVAILABLE",
                    f"special token {name!r} asks for id {sid}, which is {taken}, "
                    "not a free reserved id",
                    value={name: sid},
                    fix=f"pass one of the base's {len(reserved)} reserved ids"
                    + (f" ({min(reserved)}…{max(reserved)})" if reserved else "")
                    + ", or no id (it then goes past the last id)",
                )
            asked[sid] = name

    @property
    def pretokenizer(self) -> Pretokenizer:
        if self.base is not None:
            return self.base.pretokenizer
        return Pretokenizer.preset(self.pattern, dialect=self.dialect)


def _count(
    texts: Iterable[str], pretokenizer: Pretokenizer, config: TrainConfig, show: bool
) -> ChunkTable:
    """The corpus's chunk table, counted where ``config.engine`` says."""
    if config.engine == "dask":
        return count_on_dask(
            texts, pretokenizer, scheduler=config.scheduler, workers=config.workers
        )
    return count_chunks(texts, pretokenizer, workers=config.workers, progress=show)


def train(texts: Iterable[str], *, config: TrainConfig) -> Tokenizer:
    """Learn ``config.merges`` merges from ``texts`` (each text is pre-tokenized on its own).

    With ``config.base``, the base continued (see the module docstring): its tables with
    the new merges and specials appended, every base id unchanged.

    Example::

        >>> base = train(["низко низко летали"], config=TrainConfig(merges=4, progress=False))
        >>> tok = train(["ласточки ласточки"], config=TrainConfig(merges=3, base=base,
        ...             specials={"<|end|>": None}, progress=False))
        >>> tok.n_merges, tok.special_tokens
        (7, {'<|end|>': 263})

    Raises:
        TokenizerError(EMPTY_CORPUS): the texts hold no characters.
        TokenizerError(NO_NEW_MERGE): with a base and ``merges > 0``, the base's merges leave
            no adjacent pair in any chunk of the texts (every chunk is one base token).
        TokenizerError(UNREPRESENTABLE_BYTE): with a base, a text holds a byte it has no id for.
        TokenizerError(LONE_SURROGATE): a text has no UTF-8 form.
        TokenizerError(SPECIAL_TOKEN_CONFLICT): an explicit special id is an ordinary id.
        TokenizerError(SCHEDULER_UNREACHABLE): ``engine="dask"`` and nothing answers at
            the scheduler address.
        TokenizerError(LOCAL_CLUSTER_NOT_STARTED): ``engine="dask"`` with no scheduler and
            the local cluster's worker processes cannot start: code run from stdin
            (``python -``) or a script without the ``if __name__ == "__main__":`` guard.
            From a notebook or stdin, start ``distributed.LocalCluster(processes=False)``
            and pass ``scheduler=cluster.scheduler_address``.
    """
    from tqdm import tqdm

    pretokenizer = config.pretokenizer
    show = progress_enabled(config.progress)
    if config.base is not None and config.merges == 0:
        return _extended(config.base, [], config)  # specials alone: no text to read
    table = _count(texts, pretokenizer, config, show)
    if not len(table):
        raise TokenizerError(
            "EMPTY_CORPUS",
            "the training texts are empty",
            value=0,
            fix="pass at least one non-empty text",
        )
    with tqdm(total=config.merges, disable=not show, unit="merge", desc="merges") as bar:

        def on_merge() -> None:
            # Indexing the pairs precedes the first merge; restart the clock there, or
            # that set-up time, charged to merge 1, makes the first ETA hours long.
            if bar.n == 0:
                bar.reset(total=config.merges)
            bar.update()

        base = None if config.base is None else config.base.tables
        pairs = learn_merges(table, merges=config.merges, on_merge=on_merge, base=base)
    if config.base is not None:
        return _extended(config.base, pairs, config)
    specials = assign_special_ids(config.specials, first_free=256 + len(pairs))
    tables = BPETables.byte_level(merges=pairs, specials=specials)
    return Tokenizer(
        pretokenizer=pretokenizer,
        tables=tables,
        metadata={"merges_requested": str(config.merges), "merges_learned": str(len(pairs))},
    )


def _extended(base: Tokenizer, pairs: list[tuple[int, int]], config: TrainConfig) -> Tokenizer:
    """``base`` with ``pairs`` (ids from ``base``'s id range on) and ``config.specials`` added."""
    old = base.tables
    if config.merges and not pairs:
        raise TokenizerError(
            "NO_NEW_MERGE",
            f"no new merge exists: 0 of {config.merges} learned, every chunk of the texts "
            "is already one token of the base",
            value=0,
            fix="train on text the base splits into several tokens (another language or domain)",
        )
    first = old.id_range
    pieces = dict(old.pieces)
    merges = list(old.merges)
    for k, (a, b) in enumerate(pairs):
        pieces[first + k] = pieces[a] + pieces[b]
        merges.append((a, b, first + k))
    taken = set(config.specials.values())
    # A reserved id taken over loses its placeholder names; every other base special stays.
    specials = {name: sid for name, sid in old.specials.items() if sid not in taken}
    specials |= assign_special_ids(config.specials, first_free=first + len(pairs))
    metadata = {
        **base.metadata,
        "base": base.name or "",
        "merges_requested": str(config.merges),
        "merges_learned": str(len(pairs)),
    }
    return Tokenizer(
        pretokenizer=base.pretokenizer,
        # a continued rank file keeps tiktoken's rule (learned pieces are rebuilt by
        # their merges, so for them the rule changes nothing)
        tables=BPETables(
            pieces=pieces,
            merges=tuple(merges),
            specials=specials,
            ignore_merges=old.ignore_merges,
        ),
        name=None if base.name is None else f"{base.name}-extended",
        metadata=metadata,
    )
