"""Under-trained tokens: categories on real tokenizers, planted rows, verification, errors."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from _tiny import (
    BEYOND,
    HOLES,
    PLANTED,
    SPECIAL,
    UNREACHABLE,
    CopyLM,
    V,
    anisotropic_head,
    llama,
    plant,
    tokenizer,
)

from conftest import data_path
from tokembed.audit import AuditConfig, audit_tokens
from tokembed.audit._categories import token_categories
from tokembed.audit._indicators import without_first_component
from tokembed.audit._verify import PROMPTS, max_repeat_probability, prompt_ids
from tokembed.errors import AuditError, UsageError
from tokembed.tokenizer.formats import load_tokenizer

# A corpus in which every byte and merge occurs except the planted ids.
_CORPUS = ["the quick brown fox jumps over a lazy dog, abc bc ab " * 3, "ÿ€ é ü 0123456789"]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte (written out here, independently of ours)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _bpe(chars: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Textbook BPE of one chunk: merge the lowest-ranked adjacent pair until none is left."""
    while len(chars) > 1:
        pairs = [
            (ranks.get((a, b), 1 << 30), k) for k, (a, b) in enumerate(itertools.pairwise(chars))
        ]
        rank, k = min(pairs)
        if rank == 1 << 30:
            break
        chars = [*chars[:k], chars[k] + chars[k + 1], *chars[k + 2 :]]
    return chars


def test_gpt2_categories_match_an_independent_implementation() -> None:
    from tokenizers import Tokenizer as HF
    from tokenizers import decoders, models, pre_tokenizers

    folder = data_path("tokenizers", "gpt2-hf")
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges) if m}
    hf = HF(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges if m]))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    to_byte = {c: b for b, c in _bytes_to_unicode().items()}
    partial, unreachable = set(), set()
    for text, i in vocab.items():
        if text == "<|endoftext|>":
            continue
        raw = bytes(to_byte[c] for c in text)
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            partial.add(i)
            if _bpe(list(text), ranks) != [text]:  # bytes that are no text: one chunk
                unreachable.add(i)
            continue
        if hf.encode(decoded).ids != [i]:
            unreachable.add(i)

    cats = token_categories(load_tokenizer(folder), model_rows=50_257)
    assert cats.counts() == {
        "special": 1,
        "beyond_range": 0,
        "hole": 0,
        "unreachable": 0,
        "partial_utf8": 344,
    }
    assert (set(cats.partial_utf8), set(cats.unreachable)) == (partial, unreachable)
    assert cats.special == (50_256,)
    # The 128 single bytes >= 0x80 are all partial (lead or continuation bytes).
    singles = {vocab[_bytes_to_unicode()[b]] for b in range(0x80, 0x100)}
    assert singles <= set(cats.partial_utf8)
    # GPT-2's own config allocates no spare rows; a padded 50,304-row table has 47.
    assert token_categories(load_tokenizer(folder), model_rows=50_304).beyond_range == tuple(
        range(50_257, 50_304)
    )


def test_tiny_tokenizer_categories_are_exact() -> None:
    cats = token_categories(tokenizer(), model_rows=V)
    assert cats.unreachable == (UNREACHABLE,)
    assert (cats.special, cats.hole, cats.beyond_range) == ((SPECIAL,), HOLES, BEYOND)
    assert cats.partial_utf8 == tuple(range(0x80, 0x100))
    assert (cats.unique_ids, cats.id_range) == (260, 301)
    assert cats.label(UNREACHABLE) == "unreachable"
    assert cats.label(0x80) == "partial_utf8"
    assert cats.label(97, never_seen=True) == "never_seen"
    assert cats.label(97) == "ok"


def test_first_component_is_removed() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=g, dtype=torch.float64)
    x += 5.0 * torch.randn(200, 1, generator=g, dtype=torch.float64) * torch.ones(8)
    centred = x - x.mean(0)
    c = torch.linalg.svd(centred, full_matrices=False).Vh[0]  # independent: SVD, not eigh
    projected = without_first_component(x)
    bound = 64 * torch.finfo(torch.float64).eps * float(x.abs().max())
    assert float((projected @ c).abs().max()) <= bound
    assert torch.allclose(projected, x - torch.outer(x @ c, c), atol=bound, rtol=0)


@pytest.mark.parametrize("tied", [True, False])
def test_planted_rows_rank_first(tied: bool) -> None:
    tok = tokenizer()
    model = llama(tied=tied)
    reference = (UNREACHABLE, *HOLES, *BEYOND)
    anisotropic_head(model.get_output_embeddings().weight, (*reference, *PLANTED), seed=1)
    if not tied:  # untrained input rows keep a small norm
        plant(model.get_input_embeddings().weight, PLANTED, seed=2, scale=1e-3)
    audit = audit_tokens(model, tok, _CORPUS, config=AuditConfig(verify_top=0))
    assert audit.tied is tied
    assert audit.reference == tuple(sorted(reference))
    first = set(audit.ranking[: len(reference) + len(PLANTED)])
    assert first == {*reference, *PLANTED}
    assert {audit.labels[i] for i in PLANTED} == {"never_seen", "partial_utf8"}  # 0xF0 partial
    assert audit.occurrences is not None
    assert all(audit.occurrences[i] == 0 for i in PLANTED)
    if tied:
        assert audit.input_norm is None
    else:
        assert audit.input_norm is not None
        lowest = sorted(range(V), key=lambda i: audit.input_norm[i])[: len(PLANTED)]  # type: ignore[index]
        assert set(lowest) == set(PLANTED)


def test_never_seen_ids_are_the_reference_when_every_row_is_addressed() -> None:
    from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer

    tables = BPETables.byte_level(merges=[(97, 98)])
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("gpt2"), tables=tables, name="full")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=257, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=2)
    ).eval()  # fmt: skip
    with pytest.raises(AuditError) as e:
        audit_tokens(model, tok, config=AuditConfig(verify_top=0))
    assert e.value.code == "AUDIT_NO_REFERENCE"
    audit = audit_tokens(model, tok, ["abab cd"], config=AuditConfig(verify_top=0))
    seen = set(tok.encode_ordinary("abab cd"))
    assert audit.reference == tuple(i for i in range(257) if i not in seen)
    assert audit.reference_source == "ids that never occur in the corpus"


def test_verification_with_cache_equals_full_recomputation() -> None:
    tok = tokenizer()
    model = llama(tied=False, seed=3)
    candidates = [5, 97, 256, UNREACHABLE, SPECIAL]
    got = max_repeat_probability(model, tok, candidates, steps=3, batch_size=2)
    # Independent: every prompt run from scratch at each greedy step, one at a time.
    expected = []
    with torch.no_grad():
        for c in candidates:
            best = 0.0
            for ids in prompt_ids(tok, c):
                seq = list(ids)
                for _ in range(3):
                    logits = model(input_ids=torch.tensor([seq])).logits[0, -1]
                    p = torch.softmax(logits, dim=-1)
                    best = max(best, float(p[c]))
                    seq.append(int(logits.argmax()))
            expected.append(best)
    bound = 1e3 * torch.finfo(torch.float64).eps  # float64 sums over a 16-wide model
    assert got == pytest.approx(expected, abs=bound, rel=0)
    assert len(prompt_ids(tok, 7)) == len(PROMPTS) + 1


_UNTRAINED = (UNREACHABLE, *HOLES, *BEYOND, *PLANTED)


def test_verification_confirms_exactly_the_planted_rows() -> None:
    tok = tokenizer()
    model = CopyLM(planted=_UNTRAINED)
    audit = audit_tokens(model, tok, _CORPUS, config=AuditConfig(verify_top=30, table_rows=V))
    # Verified: the top 30 addressable ids, i.e. the planted rows, the unreachable piece
    # (also untrained) and 24 trained rows, which the copy model repeats.
    assert set(audit.confirmed) == {*PLANTED, UNREACHABLE}
    assert len(audit.verified) == 30
    assert all(p > 0.99 for i, p in audit.verified.items() if i not in audit.confirmed)
    # Holes and rows past R are never verified: no text can address them.
    assert not set(audit.verified) & {*HOLES, *BEYOND}
    assert {r.id for r in audit.rows if r.confirmed} == {*PLANTED, UNREACHABLE}
    data = json.loads(json.dumps(audit.to_dict()))
    assert data["summary"]["confirmed"] == len(PLANTED) + 1
    assert "confirmed" in audit.format()


def test_stricter_threshold_confirms_fewer() -> None:
    tok = tokenizer()
    model = CopyLM(planted=_UNTRAINED)
    loose = audit_tokens(model, tok, _CORPUS, config=AuditConfig(verify_top=30))
    never = audit_tokens(model, tok, _CORPUS, config=AuditConfig(verify_top=30, confirm_below=1e-9))
    assert never.confirmed == []
    assert len(loose.confirmed) == len(PLANTED) + 1


def test_errors_have_codes() -> None:
    tok = tokenizer()
    from transformers import LlamaConfig, LlamaForCausalLM

    small = LlamaForCausalLM(
        LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=2)
    )  # fmt: skip
    with pytest.raises(AuditError) as e:
        audit_tokens(small, tok)
    assert e.value.code == "AUDIT_VOCAB_MISMATCH"
    assert e.value.value == (64, 301)
    with pytest.raises(AuditError) as e:
        audit_tokens(llama(tied=True), tok, config=AuditConfig(reference=(3, V)))
    assert e.value.code == "AUDIT_REFERENCE_INVALID"
    assert e.value.value == [V]
    with pytest.raises(AuditError) as e:
        audit_tokens(torch.nn.Linear(4, 4), tok)
    assert e.value.code == "AUDIT_NOT_A_LANGUAGE_MODEL"
    for bad in ({"verify_top": -1}, {"steps": 0}, {"confirm_below": 0.0}, {"confirm_below": 2}):
        with pytest.raises(UsageError) as u:
            AuditConfig(**bad)  # type: ignore[arg-type]
        assert u.value.code == "INVALID_ARGUMENT"


def test_plot_is_a_png(tmp_path) -> None:  # type: ignore[no-untyped-def]
    audit = audit_tokens(CopyLM(planted=_UNTRAINED), tokenizer(), _CORPUS)
    png = audit.plot(tmp_path / "a.png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert (tmp_path / "a.png").read_bytes() == png


def test_report_section_escapes_pieces_and_takes_only_base64() -> None:
    from tokembed.measure.report import ReportData, render_html

    audit = audit_tokens(CopyLM(planted=_UNTRAINED), tokenizer(), _CORPUS)
    data = audit.to_dict()
    data["rows"][0]["piece"] = "<script>x</script>"
    page = render_html(ReportData(token_audit={**data, "plot_png_base64": "QUJD"}))
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<script>" not in page
    assert 'src="data:image/png;base64,QUJD"' in page
    page = render_html(ReportData(token_audit={**data, "plot_png_base64": '"><b>'}))
    assert "<img" not in page
    assert "<b>" not in page
