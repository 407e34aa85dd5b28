"""Shared test fixtures: where the project's real data lives, and the CI rule for its absence.

Data is read from ``../shared/data`` (relative to the repository root), or from
``$TOKEMBED_DATA``. Outside CI a test that needs it skips with the reason; under
``CI=true`` its absence is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TOKEMBED_DATA", REPO.parent / "shared" / "data"))
SPEC = DATA.parent / "spec"

# The failure-lab marker's record (tests/_lab_marks.py), read by tests/audit/test_lab.py.
pytest_plugins = ["_lab_marks"]

PUD_LANGS = ("ar", "de", "en", "es", "fi", "fr", "hi", "id", "ko", "ru", "th", "tr", "zh")


def data_path(*parts: str) -> Path:
    """Path under the shared data folder; skip (or fail under CI) when it is absent."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        reason = f"shared test data not found: {path} (set TOKEMBED_DATA)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def pud_file(lang: str) -> Path:
    return data_path("ud-pud-2.15", f"{lang}_pud-ud-test.conllu")


def pud_text(lang: str) -> str:
    """The `# text = ` lines of one PUD file, joined by LF plus a final LF."""
    lines = [
        line[len("# text = ") :]
        for line in pud_file(lang).read_text(encoding="utf-8").splitlines()
        if line.startswith("# text = ")
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def ruslit_text() -> str:
    import gzip

    with gzip.open(data_path("ruslit", "ruslit40.txt.gz"), "rt", encoding="utf-8") as f:
        return f.read()


# tiktoken caches each downloaded rank file under the SHA-1 of its address; these are the
# addresses of the encodings whose official files (checked by SHA-256) are in shared data.
_TIKTOKEN_ADDRESS = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
TIKTOKEN_LOCAL = ("r50k_base", "cl100k_base", "o200k_base")


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiktoken cache folder holding the local rank files; TIKTOKEN_CACHE_DIR points at it
    for the rest of the session, so tiktoken and tokembed load these encodings by name."""
    import hashlib
    import shutil

    folder = tmp_path_factory.mktemp("tiktoken-cache")
    for name in TIKTOKEN_LOCAL:
        key = hashlib.sha1(_TIKTOKEN_ADDRESS.format(name).encode()).hexdigest()
        shutil.copyfile(data_path("tokenizers", f"{name}.tiktoken"), folder / key)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(folder))
        yield folder


def rounding_bound(dtype: object, *, terms: int, magnitude: float) -> float:
    """How far two evaluations of the same sums may differ: ``terms * eps * magnitude``.

    Adding ``n`` numbers in any order errs by at most ``gamma_(n-1) sum|x_i|`` with
    ``gamma_k = k u / (1 - k u)`` and unit roundoff ``u = eps / 2`` (Higham, Accuracy
    and Stability of Numerical Algorithms, 2nd ed., section 4.2), so two orders (two
    thread counts, a sharded and an unsharded sum, torch and a NumPy oracle) differ
    by at most about ``2 (n - 1) u sum|x_i| <= n eps sum|x_i|``. ``terms`` counts the
    additions on the longest chain leading to a compared value and ``magnitude`` is
    the size of their terms (the largest |value| among them, from the data).
    ``dtype`` is a torch dtype or a NumPy dtype / type.
    """
    import numpy as np
    import torch

    eps = torch.finfo(dtype).eps if isinstance(dtype, torch.dtype) else np.finfo(dtype).eps
    return terms * float(eps) * magnitude


def assert_within(actual: object, expected: object, bound: object, *, what: str = "") -> None:
    """``|actual - expected| <= bound`` elementwise in float64; ``bound`` may be an array.

    Example: ``assert_within(grad, oracle, rounding_bound(np.float64, terms=n, magnitude=m))``.
    """
    import numpy as np

    def _array(x: object) -> np.ndarray:
        detach = getattr(x, "detach", None)
        return np.asarray(detach().cpu() if detach is not None else x, dtype=np.float64)

    got, want = _array(actual), _array(expected)
    diff = np.abs(got - want)
    limit = np.broadcast_to(_array(bound), diff.shape)
    bad = ~(diff <= limit)
    if bad.any():
        at = np.unravel_index(int(np.argmax(np.where(bad, diff - limit, -np.inf))), diff.shape)
        raise AssertionError(
            f"{what or 'values'}: {int(bad.sum())} of {diff.size} out of bounds; worst at "
            f"{tuple(int(i) for i in at)}: |{got[at]!r} - {want[at]!r}| = {diff[at]:.3e} "
            f"> {limit[at]:.3e}"
        )
