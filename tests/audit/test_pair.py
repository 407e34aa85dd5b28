"""Admission of tokenizer/model pairs: real pairs pass, mismatched pairs fail with exactly their codes."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import data_path
from migrate._smollm2 import gguf_file
from tokembed.audit import AuditReport, check_pair, read_tokenizer_roles, require_pair
from tokembed.errors import AuditError
from tokembed.tokenizer.formats import load_tokenizer

SMOL = ("tokenizers", "smollm2-135m")


def _failed(report: AuditReport) -> list[str]:
    return sorted(report.failed_codes)


@pytest.fixture(scope="module")
def smol_tok() -> Any:
    return load_tokenizer(data_path(*SMOL))


@pytest.fixture(scope="module")
def gpt2_tok() -> Any:
    return load_tokenizer(data_path("tokenizers", "gpt2-hf"))


def _gpt2(**overrides: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=64, **overrides)
    return GPT2LMHeadModel(config).eval()


def _small_smollm2(folder: Path, **changes: Any) -> Path:
    """SmolLM2's own config.json with one small layer (and ``changes``), written to ``folder``."""
    config = json.loads(data_path(*SMOL, "config.json").read_text())
    config.update(hidden_size=32, intermediate_size=64, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, num_hidden_layers=1, **changes)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


# --- real pairs ----------------------------------------------------------------
@pytest.mark.slow
def test_smollm2_tokenizer_with_its_gguf_model_passes() -> None:
    report = check_pair(str(data_path(*SMOL)), gguf_file())
    assert report.passed, report.format()
    assert [c.name for c in report.checks] == [
        "address hash", "vocab rows", "gguf tokens", "table shape", "head shape",
        "bos id", "eos id", "pad id", "unk id",
        "tie token_embd.weight <-> output.weight", "input scale", "dtype ledger", "table finite",
    ]  # fmt: skip
    assert report.check("address hash").skipped  # GGUF records no tokembed address hash
    assert report.check("vocab rows").value == {
        "unique_ids": 49152, "id_range": 49152, "holes": 0, "model_rows": 49152, "unreached_rows": 0,
    }  # fmt: skip
    assert report.check("pad id").value == {"config": [2], "tokenizer": 2}  # <|im_end|>
    assert report.check("dtype ledger").value == {
        "stored": "Q8_0",
        "encoded": True,
        "declared": None,
    }


def test_tokenizer_roles_come_from_tokenizer_config() -> None:
    assert read_tokenizer_roles(data_path(*SMOL)) == {
        "bos": "<|im_start|>", "eos": "<|im_end|>", "pad": "<|im_end|>", "unk": "<|endoftext|>",
    }  # fmt: skip
    assert read_tokenizer_roles(data_path("tokenizers", "gpt2-hf")) == {}


def test_gpt2_files_with_a_gpt2_model_pass(gpt2_tok: Any, tmp_path: Path) -> None:
    model = _gpt2()
    model.save_pretrained(tmp_path / "gpt2")
    for source in (tmp_path / "gpt2", model):
        report = check_pair(gpt2_tok, source)
        assert report.passed, report.format()
        assert report.check("eos id").detail == "50256 '<|endoftext|>': stated by the config"
        assert report.check("tie transformer.wte.weight <-> lm_head.weight").passed
    assert report.check("input scale").value == {
        "factor": 1.0,
        "owner": "none",
        "applied_by_table": 0,
    }


# --- mismatched pairs ------------------------------------------------------------
@pytest.mark.slow
def test_o200k_with_smollm2_fails_on_rows_and_every_role() -> None:
    o200k = load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"), encoding="o200k_base")
    report = check_pair(o200k, gguf_file(), read_values=False)
    # The GGUF's own token list names another tokenizer too (issue 25.3).
    assert _failed(report) == ["ADDRESS_HASH_MISMATCH"] + ["SPECIAL_ID_MISMATCH"] * 4 + [
        "VOCAB_BELOW_ID_RANGE"
    ]
    assert report.check("gguf tokens").code == "ADDRESS_HASH_MISMATCH"
    assert report.check("vocab rows").value["id_range"] == 200019
    assert report.check("eos id").detail == (
        "the config's eos id 2 is '#' in this tokenizer, an ordinary piece, not a special token"
    )
    with pytest.raises(AuditError) as e:
        require_pair(o200k, gguf_file(), read_values=False)
    assert e.value.code == "PAIR_NOT_ADMITTED"
    assert e.value.value.failed_codes == report.failed_codes


def _saved(model: Any, folder: Path, tokenizer_hash: str) -> Path:
    from tokembed.checkpoint import save_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(str(folder / "config.json"))
    save_checkpoint(model, folder / "model.safetensors", tokenizer=tokenizer_hash)
    return folder


def _llama(folder: Path) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).eval()


def test_a_truncated_model_vocabulary_fails_on_rows_only(smol_tok: Any, tmp_path: Path) -> None:
    # SmolLM2's config cut to 48,000 rows, saved with the SmolLM2 tokenizer's hash.
    model = _llama(_small_smollm2(tmp_path / "cfg", vocab_size=48000))
    folder = _saved(model, tmp_path / "model", smol_tok.address_hash)
    report = check_pair(str(data_path(*SMOL)), folder)
    assert _failed(report) == ["VOCAB_BELOW_ID_RANGE"]
    assert report.check("address hash").passed
    assert not report.check("address hash").skipped
    assert (
        report.check("vocab rows").detail
        == "|I|=49,152, R=49,152, V=48,000: ids 48000..49151 have no row"
    )


def test_a_truncated_tokenizer_fails_on_the_address_hash_only(
    smol_tok: Any, tmp_path: Path
) -> None:
    model = _llama(_small_smollm2(tmp_path / "cfg"))
    folder = _saved(model, tmp_path / "model", smol_tok.address_hash)
    short = smol_tok.truncated(20000)  # same specials, fewer merges: another address space
    report = check_pair(short, folder, roles=read_tokenizer_roles(data_path(*SMOL)))
    assert _failed(report) == ["ADDRESS_HASH_MISMATCH"]
    assert report.check("vocab rows").value["unreached_rows"] == 49152 - report.check(
        "vocab rows").value["unique_ids"]  # fmt: skip


def test_config_role_ids_against_the_tokenizer(tmp_path: Path) -> None:
    folder = _small_smollm2(tmp_path / "m", pad_token_id=49152, eos_token_id=[2, 5], bos_token_id=7)
    report = check_pair(str(data_path(*SMOL)), folder)
    assert [(c.name, c.code) for c in report.failures] == [
        ("bos id", "SPECIAL_ID_MISMATCH"), ("pad id", "PAD_ID_INVALID"),
    ]  # fmt: skip
    assert report.check("eos id").passed  # the tokenizer's EOS (2) is among the config's
    assert (
        report.check("bos id").detail
        == "the config says [7], the tokenizer's bos is '<|im_start|>' = 1"
    )
    assert report.check("pad id").detail == "id 49152 is not a row of the table [0, 49152)"


def test_stored_tables_against_config_dtype_tie_and_values(gpt2_tok: Any, tmp_path: Path) -> None:
    model = _gpt2()
    model.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    report = check_pair(gpt2_tok, tmp_path / "m")
    assert _failed(report) == ["UNSAFE_CAST"]  # float32 stored, bfloat16 declared
    # A NaN row and an untied head under a tied claim, stored both.
    from safetensors.torch import save_file

    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["transformer.wte.weight"][11] = float("nan")
    state["lm_head.weight"] = torch.zeros_like(state["transformer.wte.weight"])
    shutil.copy(tmp_path / "m" / "config.json", tmp_path / "config.json")
    save_file(state, str(tmp_path / "m" / "model.safetensors"), metadata={"format": "pt"})
    report = check_pair(gpt2_tok, tmp_path / "m")
    assert _failed(report) == ["DIVERGENT_ALIAS_VALUES", "NON_FINITE_VALUES", "UNSAFE_CAST"]
    assert report.check("table finite").value == 1
    assert check_pair(gpt2_tok, tmp_path / "m", read_values=False).check("table finite").skipped


def test_a_module_whose_tie_claim_storage_denies(gpt2_tok: Any) -> None:
    model = _gpt2()
    model.lm_head.weight = torch.nn.Parameter(model.transformer.wte.weight.detach().clone())
    report = check_pair(gpt2_tok, model)
    assert _failed(report) == ["TIE_NOT_SHARED"]


def test_input_scale_is_observed_on_a_module() -> None:
    # BART declares scale_embedding: its scaled word embedding owns sqrt(d_model).
    from transformers import BartConfig, BartForConditionalGeneration

    tok = load_tokenizer(data_path("tokenizers", "gpt2-hf"))  # BART uses GPT-2's byte-level BPE
    torch.manual_seed(0)
    config = BartConfig(vocab_size=50265, d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, scale_embedding=True,
                        bos_token_id=50256, eos_token_id=50256, pad_token_id=50256,
                        decoder_start_token_id=50256, forced_eos_token_id=None)  # fmt: skip
    model = BartForConditionalGeneration(config).eval()
    report = check_pair(tok, model)
    assert report.passed, report.format()
    assert report.check("input scale").value == {
        "factor": 4.0, "owner": "embedding module (scale_embedding)", "applied_by_table": 1,
    }  # fmt: skip
    model.get_input_embeddings().embed_scale = 16.0  # the owner scales twice
    assert _failed(check_pair(tok, model)) == ["DOUBLE_SCALING"]
    model.get_input_embeddings().embed_scale = 1.0  # ... or not at all
    assert _failed(check_pair(tok, model)) == ["SCALE_MISMATCH"]


def test_a_live_table_below_the_declared_dtype(gpt2_tok: Any) -> None:
    model = _gpt2().to(torch.bfloat16)
    model.config.dtype = torch.float32  # the checkpoint's dtype; the live table lost bits
    report = check_pair(gpt2_tok, model)
    assert _failed(report) == ["UNSAFE_CAST"]
    assert report.check("dtype ledger").value == {
        "stored": "bfloat16", "encoded": False, "declared": "float32",
    }  # fmt: skip


def test_a_role_token_the_vocabulary_lacks(tmp_path: Path) -> None:
    folder = _small_smollm2(tmp_path / "m")
    report = check_pair(str(data_path(*SMOL)), folder, roles={"pad": "<|pad|>"})
    assert [(c.name, c.code) for c in report.failures] == [("pad id", "SPECIAL_ID_MISMATCH")]
    assert report.check("pad id").detail == (
        "the tokenizer's config names '<|pad|>' as its pad token, but its vocabulary does not"
        " define it"
    )


# --- evidence that is absent, short or another tokenizer's (issue 25.3) ---------
def _byte_level() -> Any:
    from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer

    tables = BPETables.byte_level(merges=[(104, 105)], specials={"<|end|>": 257})
    return Tokenizer(pretokenizer=Pretokenizer.preset("gpt2"), tables=tables)


def _gguf(path: Path, tok: Any, *, tensors: dict[str, Any], swap: bool = False) -> Path:
    """A llama GGUF file whose token list is ``tok``'s (two ids swapped when ``swap``)."""
    import numpy as np
    from gguf import GGUFWriter

    tokens = [tok.id_to_token(i) for i in range(tok.tables.id_range)]
    if swap:
        tokens[104], tokens[105] = tokens[105], tokens[104]
    w = GGUFWriter(str(path), "llama")
    w.add_vocab_size(len(tokens))
    w.add_embedding_length(4)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_bos_token_id(257)
    w.add_eos_token_id(257)
    for name, rows in tensors.items():
        w.add_tensor(name, np.arange(rows * 4, dtype=np.float32).reshape(rows, 4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_gguf_token_list_that_disagrees_with_the_tokenizer_fails(tmp_path: Path) -> None:
    tok = _byte_level()
    good = _gguf(tmp_path / "good.gguf", tok, tensors={"token_embd.weight": 258})
    report = check_pair(tok, good)
    assert report.passed, report.format()
    assert report.check("gguf tokens").detail == "all 258 ids spell the model's own tokens"
    swapped = _gguf(tmp_path / "s.gguf", tok, tensors={"token_embd.weight": 258}, swap=True)
    report = check_pair(tok, swapped)
    assert _failed(report) == ["ADDRESS_HASH_MISMATCH"]
    assert report.check("gguf tokens").value["differing_ids"] == [104, 105]


def test_a_short_untied_head_fails_in_gguf_and_in_a_folder(gpt2_tok: Any, tmp_path: Path) -> None:
    tok = _byte_level()
    path = _gguf(tmp_path / "h.gguf", tok, tensors={"token_embd.weight": 258, "output.weight": 200})
    report = check_pair(tok, path)
    assert _failed(report) == ["HEAD_VOCAB_MISMATCH"]
    assert report.check("head shape").value == {"stored": [200, 4], "config": [258, 4]}
    from safetensors.torch import save_file

    model = _gpt2(tie_word_embeddings=False)
    model.save_pretrained(tmp_path / "m")
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["lm_head.weight"][:50000].clone()
    save_file(state, str(tmp_path / "m" / "model.safetensors"), metadata={"format": "pt"})
    assert "HEAD_VOCAB_MISMATCH" in check_pair(gpt2_tok, tmp_path / "m").failed_codes


def test_a_gguf_without_its_input_table_fails_and_a_weightless_folder_is_partial(
    tmp_path: Path,
) -> None:
    tok = _byte_level()
    path = _gguf(tmp_path / "n.gguf", tok, tensors={"output.weight": 258})
    report = check_pair(tok, path)
    assert [(c.name, c.code) for c in report.failures] == [("table shape", "MISSING_KEY")]
    folder = _small_smollm2(tmp_path / "cfg")  # config.json only
    report = check_pair(str(data_path(*SMOL)), folder)
    assert report.passed
    assert report.partial
    assert (
        report.format()
        .splitlines()[-1]
        .endswith(
            "partial: every check that ran passes, but the folder stores no weights, so no table "
            "was checked"
        )
    )
    assert report.to_dict()["partial"] == report.partial


def test_a_truncated_gguf_is_refused_by_half_or_by_one_byte(tmp_path: Path) -> None:
    from tokembed.errors import CheckpointError

    tok = _byte_level()
    raw = _gguf(tmp_path / "t.gguf", tok, tensors={"token_embd.weight": 258}).read_bytes()
    for cut in (len(raw) // 2, len(raw) - 1):
        (tmp_path / "cut.gguf").write_bytes(raw[:cut])
        with pytest.raises(CheckpointError) as e:
            check_pair(tok, tmp_path / "cut.gguf")
        assert e.value.code == "MALFORMED_CHECKPOINT", cut


@pytest.mark.slow
def test_the_real_smollm2_gguf_cut_by_one_byte_or_with_two_tokens_swapped(
    smol_tok: Any, tmp_path: Path
) -> None:
    from tokembed.errors import CheckpointError

    raw = gguf_file().read_bytes()
    (tmp_path / "cut.gguf").write_bytes(raw[:-1])
    with pytest.raises(CheckpointError) as e:
        check_pair(smol_tok, tmp_path / "cut.gguf")
    assert e.value.code == "MALFORMED_CHECKPOINT"
    # Swap the spellings of two ids of one length in the file's own token list.
    a, b = smol_tok.id_to_token(300).encode(), smol_tok.id_to_token(301).encode()
    assert len(a) == len(b)
    at = raw.index(struct.pack("<Q", len(a)) + a + struct.pack("<Q", len(b)) + b)
    swapped = bytearray(raw)
    swapped[at + 8 : at + 8 + len(a)] = b
    swapped[at + 16 + len(a) : at + 16 + len(a) + len(b)] = a
    (tmp_path / "swap.gguf").write_bytes(bytes(swapped))
    report = check_pair(smol_tok, tmp_path / "swap.gguf", read_values=False)
    assert _failed(report) == ["ADDRESS_HASH_MISMATCH"]
    assert report.check("gguf tokens").value["differing_ids"] == [300, 301]


def test_non_finite_rows_of_the_head_or_its_bias_fail_not_only_the_input_table(
    gpt2_tok: Any, tmp_path: Path
) -> None:
    from safetensors.torch import save_file

    model = _gpt2(tie_word_embeddings=False)
    model.save_pretrained(tmp_path / "m")
    state = {k: v.contiguous().clone() for k, v in model.state_dict().items()}
    state["lm_head.weight"][7, 0] = float("inf")
    save_file(state, str(tmp_path / "m" / "model.safetensors"), metadata={"format": "pt"})
    report = check_pair(gpt2_tok, tmp_path / "m")
    assert report.check("table finite").code == "NON_FINITE_VALUES"
    assert not report.check("table finite").passed
    assert "lm_head.weight" in report.check("table finite").detail
