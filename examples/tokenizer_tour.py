"""The tokenizer in Python: train, encode, refuse a special token, load tiktoken's encodings.

    python examples/tokenizer_tour.py

``load_tokenizer("cl100k_base")`` reads the ranks from tiktoken's cache (downloading
them once when online; TIKTOKEN_CACHE_DIR points at another cache folder).
"""

from tokembed.tokenizer import TrainConfig, train
from tokembed.tokenizer.formats import load_tokenizer

text = "низко низко летали ласточки, ласточки летали низко"
tok = train([text], config=TrainConfig(merges=6, specials={"<|endoftext|>": None}, progress=False))
print([tok.piece(r) for _, _, r in tok.tables.merges])
print(f"{len(text.encode())} bytes -> {len(tok.encode(text))} tokens")

try:
    tok.encode("<|endoftext|>")
except ValueError as err:  # a TokembedError, and the ValueError tiktoken raises here
    print(err)
print(tok.encode("<|endoftext|>", allowed_special="all"))

# Any tokenizer file, folder or tiktoken encoding name; tiktoken's names work on it.
enc = load_tokenizer("cl100k_base")
ids = enc.encode("hello world")
print(ids, enc.decode(ids), enc.n_vocab, enc.eot_token)
print(enc.decode_single_token_bytes(ids[1]), enc.decode_with_offsets(enc.encode("Привет, мир")))
