"""Byte-level BPE training, equal merge for merge to ``train_reference``.

Steps: pre-tokenize every text and count unique chunks in order of first
occurrence (the compiled counter on ``workers`` threads for a scanned pattern, else
worker processes, see ``_count``; or a Dask cluster), then learn merges over that
table (:mod:`~tokembed.tokenizer.learn`): memory follows the number of unique chunks,
not the corpus size.

Special tokens get ids after the merges (``None``) or the ids given; two names
with one id are an alias and are reported by ``Tokenizer.aliases``.

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
from tokembed.tokenizer.special import assign_special_ids
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

    Raises:
        UsageError(INVALID_ARGUMENT): negative merges, workers < 1, a negative id, an
            unknown engine, ``engine="dask"`` without Dask installed, a scheduler without
            ``engine="dask"``.
        UsageError(INVALID_PATTERN): the pattern does not compile.
    """

    merges: int
    pattern: str = "teaching"
    dialect: Dialect = "tiktoken"
    specials: Mapping[str, int | None] = field(default_factory=dict)
    workers: int = 1
    progress: bool = True
    engine: Literal["local", "dask"] = "local"
    scheduler: str | None = None

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
        self.pretokenizer  # noqa: B018  (compiles the pattern: fail here, not later)

    @property
    def pretokenizer(self) -> Pretokenizer:
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

    Raises:
        TokenizerError(EMPTY_CORPUS): the texts hold no characters.
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

        pairs = learn_merges(table, merges=config.merges, on_merge=on_merge)
    specials = assign_special_ids(config.specials, first_free=256 + len(pairs))
    tables = BPETables.byte_level(merges=pairs, specials=specials)
    return Tokenizer(
        pretokenizer=pretokenizer,
        tables=tables,
        metadata={"merges_requested": str(config.merges), "merges_learned": str(len(pairs))},
    )
