"""Compiled twins of the tokenizer's hot loops (optional: the pure-Python references remain).

Each extension is a Python-free core (``*_core.c``, with the shared scanner ``scan.c``) and
one small binding file (``*_module.c``) that converts types and releases the GIL. Each is
``optional``: a machine without a C compiler or Python headers still installs tokembed, and
``tokembed.tokenizer._native.load`` then reports the module as missing so callers take the
reference paths.
"""

from glob import glob

from setuptools import Extension, setup

_NATIVE = "src/tokembed/tokenizer/_native"
# -O3: the merge and scan loops are branchy integer code that gains ~20% over -O2.
# _DEFAULT_SOURCE: strict C11 hides madvise, which asks for huge pages for the big tables.
_FLAGS = ["-O3", "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Wno-unused-parameter"]


def _ext(name: str, *sources: str) -> Extension:
    return Extension(
        f"tokembed.tokenizer._native.{name}",
        sources=[f"{_NATIVE}/{s}" for s in sources],
        depends=sorted(glob(f"{_NATIVE}/*.h")),
        extra_compile_args=_FLAGS,
        optional=True,
    )


# One line per compiled module; keep the list sorted.
EXTENSIONS: list[Extension] = [
    _ext("_count", "count_module.c", "count_core.c", "scan.c"),
    # The encoder splits the scanned patterns with the same scanner, without the GIL.
    _ext("_encode", "encode_module.c", "encode_core.c", "scan.c"),
    # Merge lists: learned from a chunk table, or derived from a rank file.
    _ext("_learn", "learn_module.c", "learn_core.c", "ranks_core.c"),
]

setup(ext_modules=EXTENSIONS)
