"""TF-Text's compiled tokenizer models are built once and read back from the cache."""

import os

import numpy as np
import pytest

from pipelines.tokenizer import tf_text_models, wordpiece

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "on", "mat", "."]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path))
    return tmp_path / "tf_text_models"


def _build_counter(monkeypatch):
    from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as builder

    calls = []
    real = builder.build_fast_wordpiece_model

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(builder, "build_fast_wordpiece_model", counted)
    return calls


def _ids(tokenizer, texts):
    import tensorflow as tf

    return tokenizer.tokenize(tf.constant(texts)).to_list()


def test_a_wordpiece_model_is_built_once_then_read_and_tokenizes_the_same(cache, monkeypatch):
    calls = _build_counter(monkeypatch)
    texts = ["the cats sat on the mat .", "the dog"]
    first = wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    assert len(calls) == 1 and len(list(cache.iterdir())) == 1
    again = wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    assert len(calls) == 1  # read from the cache
    assert _ids(first, texts) == _ids(again, texts) == [[5, 6, 8, 7, 9, 5, 10, 11], [5, 1]]
    # Any other input is another model: a different vocabulary, byte budget or word splitting.
    wordpiece.fast_wordpiece(VOCAB + ["dog"], unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=50, split_words=True)
    wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=False)
    assert len(calls) == 4 and len(list(cache.iterdir())) == 4


def test_a_damaged_model_file_is_built_again_and_replaced(cache, monkeypatch):
    calls = _build_counter(monkeypatch)
    wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    (path,) = cache.iterdir()
    content = bytearray(path.read_bytes())
    content[-5] ^= 0xFF  # one flipped byte
    path.write_bytes(bytes(content))
    tokenizer = wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    assert len(calls) == 2
    assert _ids(tokenizer, ["the cats"]) == [[5, 6, 8]]
    assert path.read_bytes() != bytes(content)  # replaced by a sound copy
    path.write_bytes(b"short")  # truncated
    wordpiece.fast_wordpiece(VOCAB, unk_token="[UNK]", max_bytes_per_word=100, split_words=True)
    assert len(calls) == 3


def test_an_unwritable_cache_still_gives_the_model(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("BERT_KERAS_CACHE", str(blocked))
    model = tf_text_models.cached_model("example", [1], lambda: b"abc")
    assert bytes(model) == b"abc" and blocked.read_text() == "not a directory"
    assert [path.name for path in tmp_path.iterdir()] == ["a-file"]  # no temporary file left


def test_the_least_recently_used_models_are_pruned(cache, monkeypatch):
    monkeypatch.setattr(tf_text_models, "MAX_MODELS", 3)
    cache.mkdir(parents=True)
    keep = cache / "user-notes.txt"  # not a model: never touched
    keep.write_text("mine")
    interrupted = cache / ".tmp-abc123.part"  # an interrupted write, two hours old: removed
    interrupted.write_bytes(b"partial")
    os.utime(interrupted, (0, 0))
    recent = cache / ".tmp-def456.part"  # another process's write in progress: left alone
    recent.write_bytes(b"partial")
    for index in range(3):
        tf_text_models.cached_model("example", [index], lambda: b"m")
        os.utime(next(cache.glob(f"example-{tf_text_models._key('example', [index])}.bin")),
                 (index, index))  # older first
    tf_text_models.cached_model("example", [0], lambda: b"m")  # a hit: now the most recent
    tf_text_models.cached_model("example", [3], lambda: b"m")  # a fourth: the oldest (1) goes
    names = {path.name for path in cache.iterdir()}
    assert keep.name in names and recent.name in names and interrupted.name not in names
    assert len(names) == 5
    assert f"example-{tf_text_models._key('example', [1])}.bin" not in names
    assert np.asarray(tf_text_models.cached_model("example", [1], lambda: b"n")).tobytes() == b"n"
