"""A user cache of merge lists derived from rank files, keyed by the file's SHA-256.

Deriving explicit merges from tiktoken ranks replays tiktoken's joining inside
every piece (under a second for o200k's 200k ranks compiled, seconds in the
reference). The result depends only on the file's bytes, so it is stored once per
digest under the cache folder
(``$TOKEMBED_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokembed``, else
``~/.cache/tokembed``) in ``rank-merges/<sha256>.merges``: a header line with the
format, the count and the SHA-256 of the payload, then the merges as
little-endian ``uint32`` triples. The address hash of a rank file's tokenizer (its
pattern and special tokens hashed with the merges, ~1.4 s for o200k, once per
``tokembed tokenize`` run) is kept beside it in ``rank-address/<sha256>-<key>.hash``,
where the key digests the pattern and the special tokens. A file that does not check out (truncated,
edited, another format) is ignored and rewritten; a folder that cannot be
written only costs the derivation next time. Writes are atomic
(``tokembed.files.atomic``), so concurrent processes never read half a file.

Example::

    >>> cached_merges(b"YQ== 0", lambda: ())  # doctest: +SKIP
    ()
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tokembed.errors import TokembedError
from tokembed.files.atomic import write_bytes_atomic

__all__ = ["cache_folder", "cached_address_hash", "cached_merges"]

# v2: pieces ranked below one of their parts get their merge (v1 lists dropped them).
# The compiled deriver gives the reference's lists merge for merge, so it kept v2.
_MAGIC = b"tokembed-rank-merges-v2"
_HASH_MAGIC = "tokembed-rank-address-v1"
Merges = tuple[tuple[int, int, int], ...]
T = TypeVar("T")


def cache_folder() -> Path:
    """Where derived tables are kept (see the module docstring for the order of choices)."""
    own = os.environ.get("TOKEMBED_CACHE_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tokembed"


def _stored(
    path: Path,
    parse: Callable[[bytes], T | None],
    compute: Callable[[], T],
    encode: Callable[[T], bytes],
) -> T:
    """What ``path`` holds when ``parse`` accepts it, else ``compute()``, stored there (a file
    that does not check out is rewritten; a folder that cannot be written only costs the
    computation next time)."""
    try:
        found = parse(path.read_bytes())
    except OSError:
        found = None
    if found is not None:
        return found
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, encode(value))
    except (OSError, TokembedError):
        pass
    return value


def _parse_merges(blob: bytes) -> Merges | None:
    head, _, payload = blob.partition(b"\n")
    fields = head.split(b" ")
    if len(fields) != 3 or fields[0] != _MAGIC or not fields[1].isdigit():
        return None
    count = int(fields[1])
    if len(payload) != 12 * count or hashlib.sha256(payload).hexdigest().encode() != fields[2]:
        return None
    import array

    flat = array.array("I")
    flat.frombytes(payload)
    if sys.byteorder != "little":
        flat.byteswap()
    return tuple(zip(flat[0::3], flat[1::3], flat[2::3], strict=True))


def _encode(merges: Merges) -> bytes:
    import array

    flat = array.array("I", [i for merge in merges for i in merge])
    if sys.byteorder != "little":
        flat.byteswap()
    payload = flat.tobytes()
    digest = hashlib.sha256(payload).hexdigest().encode()
    return b" ".join([_MAGIC, str(len(merges)).encode(), digest]) + b"\n" + payload


def cached_merges(rank_file: bytes, derive: Callable[[], Merges]) -> Merges:
    """The merges ``derive()`` gives for ``rank_file``, from the cache when it holds them."""
    path = cache_folder() / "rank-merges" / f"{hashlib.sha256(rank_file).hexdigest()}.merges"
    return _stored(path, _parse_merges, derive, _encode)


def _parse_hash(blob: bytes) -> str | None:
    magic, _, found = blob.decode("ascii", "replace").partition(" ")
    hex_part = found.removeprefix("sha256:")
    ok = magic == _HASH_MAGIC and len(hex_part) == 64
    return found if ok and all(c in "0123456789abcdef" for c in hex_part) else None


def cached_address_hash(rank_file: bytes, key: str, compute: Callable[[], str]) -> str:
    """The address hash ``compute()`` gives for ``rank_file`` under ``key`` (what else it
    hashes: pattern, special tokens), from the cache when it holds it."""
    name = f"{hashlib.sha256(rank_file).hexdigest()}-{hashlib.sha256(key.encode()).hexdigest()}"
    path = cache_folder() / "rank-address" / f"{name}.hash"
    return _stored(path, _parse_hash, compute, lambda v: f"{_HASH_MAGIC} {v}".encode("ascii"))
