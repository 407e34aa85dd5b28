"""Compiled twins of the tokenizer's hot loops (optional: the pure-Python paths remain).

Each extension is ``optional``: a machine without a C compiler or Python headers
still installs tokembed, and ``tokembed.tokenizer._native.load`` then reports the
module as missing so callers take the pure-Python reference path.
"""

from setuptools import Extension, setup

_NATIVE = "src/tokembed/tokenizer/_native"
# -O3: the merge and scan loops are branchy integer code that gains ~20% over -O2.
_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]


def _ext(name: str, *sources: str) -> Extension:
    return Extension(
        f"tokembed.tokenizer._native.{name}",
        sources=[f"{_NATIVE}/{s}" for s in sources],
        depends=[f"{_NATIVE}/common.h"],
        extra_compile_args=_FLAGS,
        optional=True,
    )


# One line per compiled module; keep the list sorted.
EXTENSIONS: list[Extension] = [
    _ext("_count", "count_module.c", "scan.c"),
    _ext("_learn", "learn.c"),
]

setup(ext_modules=EXTENSIONS)
