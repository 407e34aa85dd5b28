"""Table calculators: published model sizes, tying/factorization variants, Adam state, HF peers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import data_path
from tokembed.errors import EmbeddingError, UsageError
from tokembed.measure.memory import (
    GIB,
    MIB,
    TableConfig,
    dtype_bytes,
    format_memory_report,
    load_table_config,
    memory_report,
    rows_per_rank,
    table_parameters,
    training_state_bytes,
)

KIB = 1024
V, H, D = 128_000, 4_096, 256  # a 128k vocabulary, a 4k-wide model, a 256-wide lexical table


def test_llama_3_1_8b_untied_tables() -> None:
    p = table_parameters(TableConfig(vocab_size=128_256, hidden_size=4_096, tied=False))
    assert p.total == 2 * 128_256 * 4_096 == 1_050_673_152
    assert round(p.total / 1e9, 2) == 1.05
    assert round(p.total / 8e9, 2) == 0.13  # "roughly 13% of 8 billion"
    report = memory_report(TableConfig(vocab_size=128_256, hidden_size=4_096, tied=False))
    assert report.weight_bytes == 2 * p.total  # bf16: two bytes per parameter
    assert round(report.weight_bytes / GIB, 3) == 1.957
    tied = table_parameters(TableConfig(vocab_size=128_256, hidden_size=4_096, tied=True))
    assert tied.total == p.total // 2


def test_factorized_input_table() -> None:
    direct = table_parameters(TableConfig(vocab_size=V, hidden_size=H, tied=True))
    fact = table_parameters(TableConfig(vocab_size=V, hidden_size=H, embedding_dim=D, tied=True))
    assert direct.input_table == 524_288_000
    assert (fact.input_table, fact.input_bridge) == (32_768_000, 1_048_576)
    ratio = (fact.input_table + fact.input_bridge) / direct.input_table
    assert round(ratio, 4) == 0.0645
    assert round(1 / ratio, 1) == 15.5
    assert D < V * H / (V + H)  # the saving condition


@pytest.mark.parametrize(
    ("cfg", "total"),
    [
        (TableConfig(vocab_size=V, hidden_size=H, tied=False), 1_048_576_000),
        (TableConfig(vocab_size=V, hidden_size=H, tied=True), 524_288_000),
        (TableConfig(vocab_size=V, hidden_size=H, embedding_dim=D, tied=False), 558_104_576),
        (TableConfig(vocab_size=V, hidden_size=H, embedding_dim=D, tied=True), 34_865_152),
        (
            TableConfig(
                vocab_size=V, hidden_size=H, embedding_dim=D, tied=True, shared_bridge=True
            ),
            33_816_576,
        ),
    ],
)
def test_tying_architectures(cfg: TableConfig, total: int) -> None:
    assert table_parameters(cfg).total == total


def test_training_state_bytes() -> None:
    p = table_parameters(TableConfig(vocab_size=32_000, hidden_size=4_096, tied=True)).total
    assert p == 131_072_000
    assert p * dtype_bytes("bf16") == 250 * MIB
    st = training_state_bytes(p, weight_dtype="bf16", dense_gradient=False)
    assert (st.weights, st.master, st.first_moment, st.second_moment) == (
        2 * p,
        4 * p,
        4 * p,
        4 * p,
    )
    assert st.total == 14 * p
    with_grad = training_state_bytes(p, weight_dtype="bf16", grad_dtype="fp32")
    assert with_grad.gradient == 4 * p
    fp32 = training_state_bytes(p, weight_dtype="float32")  # weights already are the master
    assert fp32.master == 0
    assert fp32.total == 16 * p


def test_vocab_parallel_qwen2_5_72b() -> None:
    cfg = TableConfig(vocab_size=152_064, hidden_size=8_192, tied=False)
    full = table_parameters(cfg).input_table
    assert round(full / 1e9, 2) == 1.25
    assert round(full / 10.18e9, 2) == 0.12  # "1.25B of each GPU's 10.18B parameters (12%)"
    report = memory_report(cfg, tp=8)
    assert report.rows_per_rank == 19_008
    assert report.input_params_per_rank == 155_713_536
    assert round(report.input_params_per_rank / 1e9, 2) == 0.16


def test_rows_per_rank_is_a_ceiling() -> None:
    assert [rows_per_rank(131, tp) for tp in (1, 2, 4, 8)] == [131, 66, 33, 17]
    assert rows_per_rank(4, 8) == 1
    with pytest.raises(UsageError) as e:
        rows_per_rank(10, 0)
    assert e.value.code == "INVALID_ARGUMENT"


def test_smollm2_config() -> None:
    cfg = load_table_config(data_path("tokenizers", "smollm2-135m", "config.json"))
    assert cfg == TableConfig(vocab_size=49_152, hidden_size=576, tied=True)
    report = memory_report(cfg, tp=2)
    assert report.parameters.total == 49_152 * 576 == 28_311_552
    assert (report.rows_per_rank, report.output_params_per_rank) == (24_576, 0)
    assert "tied" in format_memory_report(report)


@pytest.mark.parametrize("tied", [True, False])
def test_hf_llama_model_has_the_counted_parameters(tmp_path: Path, tied: bool) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    hf = LlamaConfig(
        vocab_size=1_000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        tie_word_embeddings=tied,
    )
    hf.to_json_file(tmp_path / "config.json")
    cfg = load_table_config(tmp_path)
    model = LlamaForCausalLM(hf)
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert (emb is head) is tied
    unique = {id(emb): emb.numel(), id(head): head.numel()}
    assert table_parameters(cfg).total == sum(unique.values())


def test_hf_albert_factorized_tied_lexical_head(tmp_path: Path) -> None:
    from transformers import AlbertConfig, AlbertForMaskedLM

    hf = AlbertConfig(
        vocab_size=500,
        embedding_size=16,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=128,
    )
    hf.to_json_file(tmp_path / "config.json")
    cfg = load_table_config(tmp_path / "config.json")
    assert (cfg.factorized, cfg.tied, cfg.lexical_width) == (True, True, 16)
    model = AlbertForMaskedLM(hf)
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight
    counted = table_parameters(
        TableConfig(vocab_size=500, hidden_size=64, embedding_dim=16, tied=True, output_bias=True)
    )
    bridges = (
        model.albert.encoder.embedding_hidden_mapping_in.weight.numel()
        + model.predictions.dense.weight.numel()
    )
    assert counted.total == 500 * 16 + bridges + model.predictions.bias.numel()


def test_multimodal_text_config_and_aliases() -> None:
    cfg = load_table_config(
        {"text_config": {"vocab_size": 262_144, "hidden_size": 2_560, "tie_word_embeddings": True}}
    )
    assert (cfg.vocab_size, cfg.hidden_size, cfg.tied) == (262_144, 2_560, True)
    gpt2 = load_table_config({"vocab_size": 50_257, "n_embd": 768, "tie_word_embeddings": True})
    assert gpt2.hidden_size == 768


@pytest.mark.parametrize(
    "data",
    [
        {"hidden_size": 64, "tie_word_embeddings": True},
        {"vocab_size": 10, "tie_word_embeddings": True},
        {"vocab_size": 10, "hidden_size": 64},
        {"vocab_size": 10, "hidden_size": 64, "tie_word_embeddings": "yes"},
        {"vocab_size": 0, "hidden_size": 64, "tie_word_embeddings": True},
        {"vocab_size": 10.5, "hidden_size": 64, "tie_word_embeddings": True},
    ],
)
def test_invalid_config(data: dict[str, object], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EmbeddingError) as e:
        load_table_config(path)
    assert e.value.code == "INVALID_CONFIG"


def test_unreadable_configs(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    for name in ("bad.json", "list.json"):
        with pytest.raises(EmbeddingError) as e:
            load_table_config(tmp_path / name)
        assert e.value.code == "INVALID_CONFIG"
    with pytest.raises(UsageError) as u:
        load_table_config(tmp_path / "absent.json")
    assert u.value.code == "FILE_NOT_FOUND"
    with pytest.raises(EmbeddingError) as e:
        TableConfig(vocab_size=10, hidden_size=8, tied=False, shared_bridge=True)
    assert e.value.code == "INVALID_CONFIG"
    with pytest.raises(UsageError) as u:
        dtype_bytes("fp4")
    assert u.value.code == "INVALID_ARGUMENT"
    assert math.isclose(dtype_bytes("bfloat16"), 2)


def test_importing_the_calculator_does_not_import_torch() -> None:
    # The calculator lives in measure (never torch), so `tokembed memory` and the report
    # stay torch-free. (That tokembed.embedding's names resolve is tests/test_public_surface.py's.)
    code = (
        "import sys\n"
        "import tokembed.measure.memory\n"
        "from tokembed.measure import TableConfig, load_table_config\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
