"""The determinism helper: child environments, pinned variables, torch settings, scoped threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tokembed._determinism import (
    THREAD_VARIABLES,
    child_environment,
    configure_torch,
    intra_op_threads,
    pinned_environment,
)
from tokembed.errors import UsageError


def test_child_environment_sets_every_thread_variable() -> None:
    env = child_environment(threads=3)
    assert {name: env[name] for name in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "3")
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


@pytest.mark.parametrize("threads", [0, -1, True, 1.5, "2"])
def test_a_thread_count_that_is_not_a_positive_int_is_refused(threads: object) -> None:
    for call in (
        lambda: child_environment(threads=threads),  # type: ignore[arg-type]
        lambda: configure_torch(threads=threads),  # type: ignore[arg-type]
        lambda: intra_op_threads(threads).__enter__(),  # type: ignore[arg-type]
    ):
        with pytest.raises(UsageError) as e:
            call()
        assert (e.value.code, e.value.value) == ("INVALID_ARGUMENT", threads)


def test_pinned_environment_sets_then_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    with pinned_environment(threads=2) as env:
        assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "2"
        assert env["OMP_NUM_THREADS"] == "2"
    assert os.environ["OMP_NUM_THREADS"] == "7"
    assert "MKL_NUM_THREADS" not in os.environ


def test_a_child_started_inside_sees_the_variables_before_it_imports_torch() -> None:
    probe = (
        "import os, sys; seen = os.environ['OMP_NUM_THREADS']; "
        "assert 'torch' not in sys.modules; import torch; "
        "print(seen, torch.get_num_threads())"
    )
    with pinned_environment(threads=1):
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
    assert done.stdout.split() == ["1", "1"]


def test_configure_torch_pins_threads_and_deterministic_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in child_environment(threads=1):
        monkeypatch.setenv(name, "x")  # restored by monkeypatch afterwards
    cudnn = torch.backends.cudnn
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    before_cudnn = (cudnn.deterministic, cudnn.benchmark)
    # An earlier test in this process may have imported PyTorch's test utilities, which
    # freeze the cuDNN flags; configure_torch then leaves them alone.
    frozen = torch.backends.flags_frozen()
    try:
        configure_torch(threads=1)
        assert torch.get_num_threads() == 1
        assert torch.are_deterministic_algorithms_enabled()
        if not frozen:
            assert cudnn.deterministic
            assert not cudnn.benchmark
        assert os.environ["OMP_NUM_THREADS"] == "1"  # for this process's children
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])
        if not frozen:
            cudnn.deterministic, cudnn.benchmark = before_cudnn


def test_intra_op_threads_is_scoped() -> None:
    before = torch.get_num_threads()
    with intra_op_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), intra_op_threads(before + 1):
        raise RuntimeError("the count is restored on errors too")
    assert torch.get_num_threads() == before
