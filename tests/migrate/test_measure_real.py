"""SmolLM2-135M with six added specials: our mean migration vs resize_token_embeddings, on real text."""

from __future__ import annotations

import copy

import pytest
import torch
from _smollm2 import ADDED, extended, load_model, tokenizer

from conftest import pud_text
from tokembed.migrate import NewRows, classify_change, migrate_model, row_map
from tokembed.migrate.measure import model_logits, probability_shift


@pytest.mark.slow
def test_smollm2_added_tokens_mean_rows_keep_the_bound_and_logits() -> None:
    old_tok = tokenizer()
    new_tok = extended(old_tok)
    change = classify_change(old_tok, new_tok)
    assert change.kind == "append-only"
    rows = row_map(change)
    assert (rows.old_rows, rows.new_rows) == (49152, 49152 + len(ADDED))

    model = load_model()
    assert model.get_input_embeddings().weight.shape[0] == rows.old_rows
    assert model.lm_head.weight is model.model.embed_tokens.weight  # SmolLM2 is tied
    peer = copy.deepcopy(model)
    text = pud_text("en")[:1500]
    ids = torch.tensor([old_tok.encode_ordinary(text)[:256]])
    before = model_logits(model, ids)

    migrate_model(model, rows, init=NewRows(name="mean"), old_hash=old_tok.address_hash)
    ours = probability_shift(before, model_logits(model, ids), rows)
    torch.manual_seed(0)
    peer.resize_token_embeddings(rows.new_rows, mean_resizing=True)
    theirs = probability_shift(before, model_logits(peer, ids), rows)

    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert ours.logits_preserved
    assert theirs.logits_preserved
    # Mean rows: per context A <= M Z / V0, hence q_new <= M / (V0 + M) and KL <= log(1 + M/V0).
    assert ours.within_mean_bound
    m, v0 = len(ADDED), rows.old_rows
    assert ours.max_new_mass <= m / (v0 + m) * (1 + 64 * torch.finfo(torch.float64).eps)
    assert ours.max_old_prob_change > 0  # preserved logits, moved probabilities
    # transformers adds N(0, 1e-9 cov) noise to the same mean: its KL stays within a hair of ours.
    assert abs(theirs.mean_kl - ours.mean_kl) <= 1e-3 * ours.mean_kl
    print("ours", ours.to_json(), "\ntransformers", theirs.to_json())
