"""Four identities of a release, kept apart: address space, logical table, checkpoint, artifact.

One hash cannot stand for all of them. Resharding or re-serializing a table
changes its files (artifact identity) while the logical tensor stays the same;
permuting its rows keeps every shape and file size but changes the logical
table; two checkpoints can hold the same tables under another alias graph;
and the address space (which tokenizer's ids the rows answer to) is a fact
about the tokenizer, not about any tensor. :class:`Identity` carries its kind
with its digest; comparing two kinds raises instead of answering False, and
:func:`require_identity` refuses an identity of the wrong kind, or a bare
string whose kind nobody recorded.

Example::

    >>> t = torch.arange(6.0).reshape(3, 2)
    >>> table_identity(t) == table_identity(t.clone())
    True
    >>> table_identity(t) == Identity(kind="artifact", digest=table_identity(t).digest)
    Traceback (most recent call last):
    ...
    tokembed.errors.AuditError: IDENTITY_KIND_MISMATCH: ...
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from tokembed.artifacts.digest import data_digest, tensor_digest
from tokembed.errors import AuditError, UsageError
from tokembed.files.os_errors import input_error

__all__ = [
    "Identity",
    "IdentityKind",
    "address_identity",
    "artifact_identity",
    "checkpoint_identity",
    "require_identity",
    "table_identity",
]

IdentityKind = Literal["address", "logical_table", "checkpoint", "artifact"]
_KINDS: tuple[str, ...] = ("address", "logical_table", "checkpoint", "artifact")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# What each kind names, for messages.
_MEANS = {
    "address": "which tokenizer's ids the rows answer to",
    "logical_table": "a tensor's values in canonical row order",
    "checkpoint": "a set of named logical tables and their alias graph",
    "artifact": "the bytes of one serialized file",
}


@dataclass(frozen=True, kw_only=True)
class Identity:
    """A digest together with the kind of thing it identifies.

    Equality holds only between identities of one kind; comparing two kinds is a
    bug that would otherwise read as "different" (or, with equal digests, "same").

    Raises:
        UsageError INVALID_ARGUMENT: an unknown kind or a digest not "sha256:<64 hex>".
        AuditError IDENTITY_KIND_MISMATCH: ``==`` between two kinds.
    """

    kind: IdentityKind
    digest: str

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"identity kind {self.kind!r} is not one of {', '.join(_KINDS)}",
                value=self.kind,
            )
        if not isinstance(self.digest, str) or not _DIGEST.fullmatch(self.digest):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a digest looks like 'sha256:<64 hex>', got {self.digest!r}",
                value=self.digest,
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Identity):
            return NotImplemented
        if other.kind != self.kind:
            raise _mismatch(other, self.kind, what="compared with")
        return other.digest == self.digest

    def __hash__(self) -> int:
        return hash((self.kind, self.digest))


def _mismatch(got: Identity | str, expected: str, *, what: str) -> AuditError:
    if isinstance(got, Identity):
        message = f"a {got.kind} identity ({_MEANS[got.kind]}) was {what} a {expected} identity"
        value: object = (got.kind, expected)
    else:
        message = f"a bare hash {got[:20]}... was {what} a {expected} identity; its kind is unknown"
        value = (None, expected)
    return AuditError(
        "IDENTITY_KIND_MISMATCH",
        message + f" ({_MEANS[expected]})",
        value=value,
        fix=f"compute the {expected} identity itself (tokembed.audit.{_MAKER[expected]})",
    )


_MAKER = {
    "address": "address_identity",
    "logical_table": "table_identity",
    "checkpoint": "checkpoint_identity",
    "artifact": "artifact_identity",
}


def require_identity(value: Identity | str, kind: IdentityKind) -> Identity:
    """Return ``value`` if it is an :class:`Identity` of ``kind``.

    Raises:
        AuditError IDENTITY_KIND_MISMATCH: another kind, or a bare string (a
            release hash whose kind was never recorded).
    """
    if not isinstance(value, Identity) or value.kind != kind:
        raise _mismatch(value, kind, what="presented as")
    return value


def address_identity(source: object) -> Identity:
    """The address-space identity of a tokenizer (anything with ``address_hash``) or of its hash."""
    digest = source if isinstance(source, str) else getattr(source, "address_hash", None)
    if not isinstance(digest, str):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{type(source).__name__} has no address_hash",
            value=type(source).__name__,
            fix="pass a tokenizer or its address_hash",
        )
    return Identity(kind="address", digest=digest)


def table_identity(table: torch.Tensor) -> Identity:
    """The logical-table identity: dtype, shape and values in row-major order.

    Independent of how the tensor is stored, sharded or serialized; any changed
    value or row order gives another identity.
    """
    return Identity(kind="logical_table", digest=tensor_digest(table))


def checkpoint_identity(
    tables: Mapping[str, torch.Tensor], *, aliases: Mapping[str, str] | None = None
) -> Identity:
    """The checkpoint identity: each name's logical-table identity, plus the alias map.

    Aliased names are listed in ``aliases`` (alias -> canonical name) and not in
    ``tables``; the same tables under another alias graph are another checkpoint.
    """
    record = {
        "tables": {name: table_identity(t).digest for name, t in sorted(tables.items())},
        "aliases": dict(sorted((aliases or {}).items())),
    }
    return Identity(kind="checkpoint", digest=data_digest(record))


def artifact_identity(path: str | os.PathLike[str]) -> Identity:
    """The serialized-artifact identity: SHA-256 of one file's bytes.

    Raises:
        UsageError FILE_NOT_FOUND / FILE_UNREADABLE: the file cannot be read.
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise input_error(exc, Path(path)) from exc
    return Identity(kind="artifact", digest="sha256:" + h.hexdigest())
