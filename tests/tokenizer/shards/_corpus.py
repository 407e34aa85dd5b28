"""A small real corpus for the shard tests: PUD sentences of 13 languages in three forms."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import PUD_LANGS, data_path, pud_text


def write_corpus(folder: Path) -> list[Path]:
    """A text file (one sentence per line), its gzip, and a JSON Lines file of paragraphs."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(pud_text(lang) for lang in PUD_LANGS).splitlines()
    text = "\n".join(lines[:6000]) + "\n"
    plain = folder / "pud.txt"
    plain.write_text(text, encoding="utf-8")
    packed = folder / "pud-rest.txt.gz"
    packed.write_bytes(gzip.compress(("\n".join(lines[6000:]) + "\n").encode()))
    records = folder / "para.jsonl"
    with records.open("w", encoding="utf-8") as f:
        for i in range(0, 3000, 5):
            f.write(json.dumps({"text": " ".join(lines[i : i + 5]), "id": i}, ensure_ascii=False))
            f.write("\n")
    return [plain, packed, records]


def gpt2_path() -> Path:
    return data_path("tokenizers", "gpt2-hf")
