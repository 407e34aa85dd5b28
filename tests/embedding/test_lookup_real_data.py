"""Real ids: r50k_base (tiktoken) on PUD sentences through TokenEmbedding, torch peers and oracles.

The table follows nanoGPT's habit of padding GPT-2's 50,257 ids to V = 50,304 (a
multiple of 64); row 50,257 is never emitted by the tokenizer and serves as PAD, so
no content row (such as <|endoftext|>) is frozen by ``padding_idx``. The address
hash stands in for the tokenizer's: SHA-256 of the rank file it was built from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import assert_within, data_path, pud_text, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.bag import TokenEmbeddingBag
from tokembed.errors import EmbeddingError
from tokembed.tokenizer.patterns import PATTERNS

V, D, PAD = 50_304, 8, 50_257
LANGS = ("en", "ru", "zh")
SENTENCES_PER_LANG = 200


@dataclass(frozen=True)
class _Corpus:
    rows: list[list[int]]
    batch: AddressedIds
    flat: np.ndarray  # every real token id, sentence after sentence
    lengths: list[int]


def _encoding(name: str, path: str, specials: dict[str, int]):  # type: ignore[no-untyped-def]
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    pattern = PATTERNS["r50k"] if name == "r50k_base" else PATTERNS["cl100k"]
    return tiktoken.Encoding(
        name=name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(path), special_tokens=specials
    )


def _file_hash(path: str) -> str:
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def corpus() -> _Corpus:
    path = str(data_path("tokenizers", "r50k_base.tiktoken"))
    enc = _encoding("r50k_base", path, {"<|endoftext|>": 50256})
    sentences = [
        line for lang in LANGS for line in pud_text(lang).splitlines()[:SENTENCES_PER_LANG]
    ]
    rows = enc.encode_ordinary_batch(sentences)
    batch = AddressedIds.from_lists(rows, source=_file_hash(path), pad_id=PAD)
    flat = np.array([i for r in rows for i in r], dtype=np.int64)
    return _Corpus(rows=rows, batch=batch, flat=flat, lengths=[len(r) for r in rows])


def _table(seed: int = 0) -> torch.Tensor:
    table = torch.randn(V, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    table[PAD] = 0
    return table


def _embedding(corpus: _Corpus, **policy: object) -> TokenEmbedding:
    return TokenEmbedding(
        V, D, weight=_table(), padding_idx=PAD, address_hash=corpus.batch.address_hash, **policy
    )  # type: ignore[arg-type]


def test_real_ids_forward_equals_f_embedding_and_oracle(corpus: _Corpus) -> None:
    emb = _embedding(corpus, require_address=True, zero_pad_row=True)
    out = emb(corpus.batch)
    assert out.shape == (len(corpus.rows), max(corpus.lengths), D)
    assert torch.equal(out, F.embedding(corpus.batch.ids, emb.weight))
    weight = emb.weight.detach().numpy()
    assert np.array_equal(out.detach().numpy(), O.gather(weight, corpus.batch.ids.numpy()))
    assert not out[~corpus.batch.attention_mask()].any()  # PAD positions read the zero row


def test_real_ids_backward_frequency_and_sparse_equal_oracles(corpus: _Corpus) -> None:
    ids = corpus.batch.ids
    g = torch.randn(*ids.shape, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    gn = g.numpy()

    dense = _embedding(corpus)
    dense(corpus.batch).backward(g)
    expected = O.scatter_add_backward(ids.numpy(), gn, V, padding_idx=PAD)
    # A row sums the gradients of its occurrences: any two orders agree to n eps sum|g|,
    # n the most occurrences of one id (per-row sum|g| from the oracle on |g|).
    most = int(np.bincount(corpus.flat).max())
    sizes = O.scatter_add_backward(ids.numpy(), np.abs(gn), V, padding_idx=PAD)
    bound = rounding_bound(np.float64, terms=most, magnitude=1.0) * sizes
    assert dense.weight.grad is not None
    assert_within(dense.weight.grad, expected, bound)
    assert not dense.weight.grad[PAD].any()

    freq = _embedding(corpus, scale_grad_by_freq=True, count_scope="invocation")
    freq(corpus.batch).backward(g)
    assert freq.weight.grad is not None
    # The same sums, each divided by its count: one rounding more.
    want = O.frequency_scaled_backward(ids.numpy(), gn, V, padding_idx=PAD)
    assert_within(freq.weight.grad, want, 2 * bound)

    sparse = _embedding(corpus, sparse=True)
    sparse(corpus.batch).backward(g)
    assert sparse.weight.grad is not None
    coalesced = sparse.weight.grad.coalesce()
    unique, values = O.coalesce_rows(ids.numpy(), gn, padding_idx=PAD)
    assert coalesced.indices()[0].tolist() == unique.tolist()
    assert_within(coalesced.values(), values, bound[unique])
    assert unique.size == np.unique(corpus.flat).size  # every touched content row, no PAD


def test_real_sentence_bags_equal_peer_and_oracle(corpus: _Corpus) -> None:
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(corpus.lengths)[:-1]]))
    flat = torch.tensor(corpus.flat)
    table = _table()
    ours = TokenEmbeddingBag(V, D, mode="mean", weight=table)
    peer = nn.EmbeddingBag(V, D, mode="mean", _weight=table)
    out = ours(flat, offsets)
    torch.testing.assert_close(out, peer(flat, offsets))
    expected = O.bag_reduce(table.numpy(), corpus.flat, offsets.numpy(), mode="mean")
    # A sentence's mean: a sum over its tokens and one division, |rows| <= max|table|.
    terms = max(corpus.lengths) + 1
    size = float(table.abs().max())
    assert_within(out, expected, rounding_bound(np.float64, terms=terms, magnitude=size))


def test_real_ids_max_norm_reports_the_oracle_rows(corpus: _Corpus) -> None:
    emb = _embedding(corpus, max_norm=2.5)
    before = emb.weight.detach().numpy().copy()
    emb(corpus.batch)
    expected, changed = O.max_norm_renorm(before, corpus.batch.ids.numpy(), max_norm=2.5)
    assert emb.last_renormalized_rows is not None
    assert emb.last_renormalized_rows.tolist() == changed.tolist()
    assert 0 < changed.size < np.unique(corpus.flat).size  # some, not all, selected rows
    # A norm over D entries, a division and a product per entry, values <= max|table|.
    size = float(np.abs(before).max())
    assert_within(emb.weight, expected, rounding_bound(np.float64, terms=D + 2, magnitude=size))


def test_real_ids_tied_head_gradient_equals_oracle(corpus: _Corpus) -> None:
    ids = torch.tensor(corpus.flat[:256])
    targets = torch.tensor(corpus.flat[1:257])  # next-token targets
    emb = _embedding(corpus)
    x = emb(ids)  # [256, D]
    logits = F.linear(x, emb.weight)  # tied head, contexts = the rows themselves
    F.cross_entropy(logits, targets, reduction="sum").backward()
    contexts = x.detach().numpy()
    residual = O.cross_entropy_residual(logits.detach().numpy(), targets.numpy())
    grad_x = residual @ emb.weight.detach().numpy()  # dL/dX = D E through the head
    expected = O.tied_two_path_gradient(ids.numpy(), grad_x, contexts, residual, V, padding_idx=PAD)
    assert emb.weight.grad is not None
    # One tied step: dot products over D, the softmax sum over V (exp and log an ulp
    # each), and sums over the 256 positions and 2 paths; terms of size |x| |E| <= D m^2.
    size = D * float(emb.weight.detach().abs().max()) ** 2
    bound = rounding_bound(np.float64, terms=D + V + 256 + 2 + 2, magnitude=size)
    assert_within(emb.weight.grad, expected, bound)


def test_other_tokenizer_ids_are_refused(corpus: _Corpus) -> None:
    path = str(data_path("tokenizers", "cl100k_base.tiktoken"))
    enc = _encoding("cl100k_base", path, {"<|endoftext|>": 100257})
    sentences = pud_text("en").splitlines()[:20]
    foreign = AddressedIds.from_lists(
        enc.encode_ordinary_batch(sentences), source=_file_hash(path), pad_id=PAD
    )
    emb = _embedding(corpus)
    with pytest.raises(EmbeddingError) as e:
        emb(foreign)  # stamped: refused before any row is read
    assert e.value.code == "ADDRESS_HASH_MISMATCH"
    with pytest.raises(EmbeddingError) as e:
        emb(foreign.ids)  # bare: some cl100k ids exceed the 50,304 rows
    assert e.value.code == "ID_OUT_OF_RANGE"


def test_binding_to_tokembeds_own_r50k_tokenizer(corpus: _Corpus) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    sentences = pud_text("en").splitlines()[:50]
    rows = [tok.encode_ordinary(s) for s in sentences]
    assert rows == corpus.rows[:50]  # same ids as the tiktoken peer for these sentences
    emb = TokenEmbedding(V, D, weight=_table(), padding_idx=PAD)
    emb.bind_address(tok)  # reads tok.address_hash and checks R = 50,257 <= V
    batch = AddressedIds.from_lists(rows, source=tok, pad_id=PAD)
    assert torch.equal(emb(batch), F.embedding(batch.ids, emb.weight))
    with pytest.raises(EmbeddingError) as e:
        emb(corpus.batch)  # same ids, but stamped with another identity (the file hash)
    assert e.value.code == "ADDRESS_HASH_MISMATCH"
    small = TokenEmbedding(50_000, D)
    with pytest.raises(EmbeddingError) as m:
        small.bind_address(tok)  # the tokenizer emits ids up to 50,256
    assert (m.value.code, m.value.value) == ("ID_OUT_OF_RANGE", 50_256)
