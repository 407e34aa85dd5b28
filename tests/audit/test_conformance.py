"""The initial state before step 0: real models pass; each broken contract fails with its own code."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch
from torch import nn

from conftest import data_path
from tokembed.audit import AuditReport, ShapeLedger, check_initial_state
from tokembed.embedding import AddressedIds, TokenEmbedding
from tokembed.embedding.variants import ScaledSinusoidalEmbedding
from tokembed.errors import AuditError
from tokembed.tokenizer.formats import load_tokenizer

TEXTS = ("Hello world, this is a test of the initial state.", "Short one.")


@pytest.fixture(scope="module")
def gpt2_tok() -> Any:
    return load_tokenizer(data_path("tokenizers", "gpt2-hf"))


@pytest.fixture(scope="module")
def smol_tok() -> Any:
    return load_tokenizer(data_path("tokenizers", "smollm2-135m"))


def _gpt2(**overrides: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64, **overrides))


def _batch(tok: Any, pad: int) -> dict[str, torch.Tensor]:
    rows = [tok.encode(t) for t in TEXTS]
    ids = AddressedIds.from_lists(rows, source=tok, pad_id=pad).ids
    mask = torch.tensor([[1] * len(r) + [0] * (ids.shape[1] - len(r)) for r in rows])
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def _unpadded(tok: Any) -> dict[str, torch.Tensor]:
    """Both texts cut to the shorter one's length: a batch with no PAD at all."""
    rows = [tok.encode(t) for t in TEXTS]
    n = min(map(len, rows))
    ids = torch.tensor([r[:n] for r in rows])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def _rejected(*args: Any, **kwargs: Any) -> AuditReport:
    with pytest.raises(AuditError) as e:
        check_initial_state(*args, **kwargs)
    assert e.value.code == "INITIAL_STATE_REJECTED"
    report = e.value.value
    assert isinstance(report, AuditReport)
    assert all(code in str(e.value) for code in report.failed_codes)  # one error lists them all
    return report


# --- real models pass ----------------------------------------------------------------
def test_gpt2_from_config_on_a_real_batch(gpt2_tok: Any) -> None:
    model = _gpt2().train()  # dropout on: the check runs in eval and restores the mode
    batch = _unpadded(gpt2_tok)
    report = check_initial_state(model, gpt2_tok, batch, pad_id=50256)
    assert model.training
    assert report.passed, report.format()
    length = batch["input_ids"].shape[1]
    assert report.ledger.dims == {"V": 50257, "d_model": 64, "B": 2, "L": length}
    assert [e.name for e in report.ledger.entries] == [
        "table", "ids", "attention_mask", "labels", "head", "rows", "positions", "x0",
    ]  # fmt: skip
    assert report.check("positions once").value["declared"] == 1  # GPT-2's wpe
    assert report.check("positions once").value["observed"] == pytest.approx(1.0, abs=1e-5)
    assert report.check("scale once").detail == "no input scale declared and none observed"


def test_smollm2_config_llama_with_pad_as_eos(smol_tok: Any) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = json.loads(data_path("tokenizers", "smollm2-135m", "config.json").read_text())
    config.update(hidden_size=64, intermediate_size=128, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, num_hidden_layers=2)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**config))
    batch = _batch(smol_tok, pad=2)  # SmolLM2 pads with <|im_end|> = EOS
    hidden = abs(len(smol_tok.encode(TEXTS[0])) - len(smol_tok.encode(TEXTS[1])))
    report = check_initial_state(model, smol_tok, batch)
    assert report.passed, report.format()
    assert report.check("mask/PAD").detail == (
        f"{hidden} masked positions, all PAD 2, labels ignored there; padding_idx = 2"
    )
    assert report.check("positions once").detail == "no additive positions declared and none arrive"
    assert report.ledger.dims["V"] == 49152
    # transformers gives the table padding_idx = pad_token_id = EOS: a visible EOS reads a
    # row whose lookup gradient is frozen.
    batch["input_ids"][0, 3] = 2
    assert _rejected(model, smol_tok, batch).failed_codes == ("PAD_ROW_AS_CONTENT",)


def test_harvard_embedding_scales_once_and_adds_sinusoids_once(gpt2_tok: Any) -> None:
    model = ScaledSinusoidalEmbedding(50257, 16, dropout=0.1, address_hash=gpt2_tok.address_hash)
    ids = AddressedIds(
        ids=torch.tensor([gpt2_tok.encode(TEXTS[0])]), address_hash=gpt2_tok.address_hash
    )
    report = check_initial_state(model, gpt2_tok, ids)
    assert report.passed, report.format()
    assert report.check("scale once").value["fit_scale"] == pytest.approx(4.0, rel=1e-5)
    assert (
        report.check("scale once").detail
        == "x4 (owner: TokenEmbedding.input_scale) applied 1 time(s)"
    )


# --- each broken contract, with its code ------------------------------------------------
def test_a_nan_row_in_the_batch(gpt2_tok: Any) -> None:
    model = _gpt2()
    batch = _unpadded(gpt2_tok)
    with torch.no_grad():
        model.transformer.wte.weight[int(batch["input_ids"][1, 0])] = float("nan")
    report = _rejected(model, gpt2_tok, batch, pad_id=50256)
    assert report.failed_codes == ("NON_FINITE_VALUES", "NON_FINITE_VALUES")
    assert report.check("lookup finite").value == 1  # one position reads the NaN row
    assert report.check("scale once").skipped


class _Doubled(nn.Module):
    """A table that owns sqrt(d) and a forward that multiplies by sqrt(d) again."""

    def __init__(self, v: int, d: int) -> None:
        super().__init__()
        self.tok = TokenEmbedding(v, d, input_scale=math.sqrt(d))
        self.block = nn.Linear(d, d)
        self.d = d

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.block(self.tok(ids) * math.sqrt(self.d))  # unstamped: the stamps cannot see it


def test_a_double_sqrt_d_scale(gpt2_tok: Any) -> None:
    model = _Doubled(50257, 16)
    ids = torch.tensor([gpt2_tok.encode(TEXTS[0])])
    report = _rejected(model, gpt2_tok, ids, first_layer=model.block)
    assert report.failed_codes == ("DOUBLE_SCALING",)
    assert report.check("scale once").value["fit_scale"] == pytest.approx(16.0, rel=1e-5)
    model.forward = lambda ids: model.block(model.tok(ids))  # type: ignore[method-assign]
    assert check_initial_state(model, gpt2_tok, ids, first_layer=model.block).passed


def test_a_pad_id_outside_the_table(gpt2_tok: Any) -> None:
    batch = _batch(gpt2_tok, pad=-1)  # the LLaMA-style -1 PAD is not a row
    report = _rejected(_gpt2(), gpt2_tok, batch, pad_id=-1)
    assert report.failed_codes == ("PAD_ID_INVALID",) * 3
    assert [c.name for c in report.failures] == ["ids admitted", "pad id", "mask/PAD"]


def test_padding_a_table_without_padding_idx(gpt2_tok: Any) -> None:
    # GPT-2's table has no padding_idx: padding with EOS makes row 50256 train as padding.
    report = _rejected(_gpt2(), gpt2_tok, _batch(gpt2_tok, pad=50256), pad_id=50256)
    assert report.failed_codes == ("PAD_ID_INVALID",)
    assert report.check("mask/PAD").value == (50256, None)


def test_a_mask_that_disagrees_with_pad(gpt2_tok: Any) -> None:
    batch = _batch(gpt2_tok, pad=50256)
    batch["attention_mask"][0, 2] = 0  # hides a real token
    batch["labels"][0, 2] = -100
    report = _rejected(_gpt2(), gpt2_tok, batch, pad_id=50256)
    assert report.failed_codes == ("PAD_MASK_MISMATCH",)
    assert report.check("mask/PAD").value == (0, 2)


def test_labels_on_pad_positions(gpt2_tok: Any) -> None:
    batch = _batch(gpt2_tok, pad=50256)
    batch["labels"] = batch["input_ids"].clone()  # PAD positions would be trained on
    report = _rejected(_gpt2(), gpt2_tok, batch, pad_id=50256)
    assert report.failed_codes == ("PAD_MASK_MISMATCH",)
    assert "the loss would supervise padding" in report.check("mask/PAD").detail


def test_a_broken_tie(gpt2_tok: Any) -> None:
    model = _gpt2()
    model.lm_head.weight = nn.Parameter(model.transformer.wte.weight.detach().clone())
    report = _rejected(model, gpt2_tok, _unpadded(gpt2_tok))
    assert report.failed_codes == ("TIE_NOT_SHARED",)


def test_a_transposed_untied_head(gpt2_tok: Any) -> None:
    model = _gpt2(tie_word_embeddings=False)
    model.lm_head.weight = nn.Parameter(torch.zeros(64, 50257))  # stored [d, V]
    report = _rejected(model, gpt2_tok, _unpadded(gpt2_tok))
    assert report.failed_codes == ("HEAD_LAYOUT_MISMATCH",)
    assert "head" not in report.ledger  # reported once, by the head check


class _PositionsTwice(nn.Module):
    def __init__(self, v: int, d: int) -> None:
        super().__init__()
        self.embed = ScaledSinusoidalEmbedding(v, d, dropout=0.0)
        self.block = nn.Linear(d, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.embed(ids)
        return self.block(rows + self.embed.get_buffer("pe")[: ids.shape[-1]])


def test_positions_applied_twice(gpt2_tok: Any) -> None:
    model = _PositionsTwice(50257, 16)
    ids = torch.tensor([gpt2_tok.encode(TEXTS[0])])
    report = _rejected(model, gpt2_tok, ids, first_layer=model.block)
    assert report.failed_codes == ("POSITION_APPLIED_TWICE",)


def test_a_table_bound_to_another_tokenizer(gpt2_tok: Any, smol_tok: Any) -> None:
    model = ScaledSinusoidalEmbedding(50257, 16, dropout=0.0, address_hash=smol_tok.address_hash)
    report = _rejected(model, gpt2_tok, torch.tensor([gpt2_tok.encode(TEXTS[1])]))
    assert report.failed_codes == ("ADDRESS_HASH_MISMATCH",)


def test_the_ledger_catches_a_renamed_dimension(gpt2_tok: Any) -> None:
    declared = ShapeLedger.declared(
        {"table": ("V", "d_model"), "ids": ("B", "T"), "rows": ("B", "T", "d_model")}, V=50257
    )
    model = ScaledSinusoidalEmbedding(50257, 16, dropout=0.0)
    report = _rejected(model, gpt2_tok, torch.tensor([gpt2_tok.encode(TEXTS[1])]),
                       declared_ledger=declared)  # fmt: skip
    assert report.failed_codes == ("LEDGER_MISMATCH",)
    assert report.check("ledger vs declared").value == ("ids", "dims")
