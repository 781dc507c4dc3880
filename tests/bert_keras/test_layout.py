"""Canonical (google-research TF1 names) layout <-> BertEncoder."""

import numpy as np
import pytest

from bert_keras.checkpoints.errors import CheckpointMismatchError
from bert_keras.checkpoints.layout import assign_canonical, canonical_shapes, encoder_to_canonical
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder

CONFIG = BertConfig(
    vocab_size=50, hidden_size=24, num_layers=2, num_heads=3, intermediate_size=40,
    max_position_embeddings=16, type_vocab_size=3,
)


def _inputs():
    ids = np.array([[1, 5, 9, 4, 0, 0], [2, 3, 4, 5, 6, 7]], "int32")
    mask = (ids > 0).astype("int32")
    return {"token_ids": ids, "segment_ids": np.array([[0, 0, 1, 1, 0, 0]] * 2, "int32"), "padding_mask": mask}


@pytest.fixture(scope="module")
def source():
    return BertEncoder(CONFIG)


def test_names_and_shapes(source):
    weights = encoder_to_canonical(source)
    assert {k: v.shape for k, v in weights.items()} == canonical_shapes(CONFIG)
    assert len(weights) == 5 + 16 * CONFIG.num_layers + 2
    assert weights["bert/embeddings/token_type_embeddings"].shape == (3, 24)
    assert weights["bert/encoder/layer_1/intermediate/dense/kernel"].shape == (24, 40)
    assert weights["bert/encoder/layer_1/output/dense/kernel"].shape == (40, 24)
    assert all(v.dtype == np.float32 for v in weights.values())


def test_fused_qkv_split(source):
    """query/key/value are the column blocks of the fused [H, 3H] kernel, in that order."""
    weights = encoder_to_canonical(source)
    kernel = source.transformer_layers[0].attention.qkv.kernel.numpy()
    np.testing.assert_array_equal(weights["bert/encoder/layer_0/attention/self/query/kernel"], kernel[:, :24])
    np.testing.assert_array_equal(weights["bert/encoder/layer_0/attention/self/key/kernel"], kernel[:, 24:48])
    np.testing.assert_array_equal(weights["bert/encoder/layer_0/attention/self/value/kernel"], kernel[:, 48:])


def test_round_trip_same_outputs(source):
    weights = encoder_to_canonical(source)
    target = BertEncoder(CONFIG)
    report = assign_canonical(target, weights)
    assert report == {"missing": [], "unexpected": []}
    a, b = source(_inputs()), target(_inputs())
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(a[name], b[name])
    for name, value in encoder_to_canonical(target).items():
        np.testing.assert_array_equal(value, weights[name])


def test_ignores_non_encoder_names(source):
    weights = dict(encoder_to_canonical(source))
    weights["cls/predictions/output_bias"] = np.zeros(50, np.float32)
    weights["global_step"] = np.array(3)
    assert assign_canonical(BertEncoder(CONFIG), weights) == {"missing": [], "unexpected": []}


def test_mismatch_error_lists_everything(source):
    weights = dict(encoder_to_canonical(source))
    del weights["bert/pooler/dense/bias"]
    del weights["bert/encoder/layer_1/attention/self/key/kernel"]
    weights["bert/encoder/layer_2/output/dense/bias"] = np.zeros(24, np.float32)
    weights["bert/embeddings/LayerNorm/gamma"] = np.zeros(48, np.float32)
    target = BertEncoder(CONFIG)
    before = encoder_to_canonical(target)
    with pytest.raises(CheckpointMismatchError) as info:
        assign_canonical(target, weights)
    error = info.value
    assert isinstance(error, ValueError)
    message = str(error)
    assert "missing: ['bert/encoder/layer_1/attention/self/key/kernel', 'bert/pooler/dense/bias']" in message
    assert "unexpected: ['bert/encoder/layer_2/output/dense/bias']" in message
    assert "shape mismatch: bert/embeddings/LayerNorm/gamma expected (24,) got (48,)" in message
    assert error.missing == ["bert/encoder/layer_1/attention/self/key/kernel", "bert/pooler/dense/bias"]
    # Nothing was assigned.
    for name, value in encoder_to_canonical(target).items():
        np.testing.assert_array_equal(value, before[name])


def test_shape_mismatch_from_wrong_config(source):
    bigger = BertEncoder(BertConfig(**dict(CONFIG.to_dict(), hidden_size=48, num_heads=4)))
    with pytest.raises(CheckpointMismatchError, match=r"word_embeddings expected \(50, 48\) got \(50, 24\)"):
        assign_canonical(bigger, encoder_to_canonical(source))


def test_non_strict_skips_missing_and_unexpected(source):
    weights = dict(encoder_to_canonical(source))
    del weights["bert/encoder/layer_0/attention/self/value/bias"]
    weights["bert/encoder/layer_9/output/dense/bias"] = np.zeros(24, np.float32)
    target = BertEncoder(CONFIG)
    old_value_bias = target.transformer_layers[0].attention.qkv.bias.numpy()[48:]
    report = assign_canonical(target, weights, strict=False)
    assert report == {
        "missing": ["bert/encoder/layer_0/attention/self/value/bias"],
        "unexpected": ["bert/encoder/layer_9/output/dense/bias"],
    }
    bias = target.transformer_layers[0].attention.qkv.bias.numpy()
    np.testing.assert_array_equal(bias[:24], weights["bert/encoder/layer_0/attention/self/query/bias"])
    np.testing.assert_array_equal(bias[48:], old_value_bias)


def test_assign_into_mixed_precision_encoder(source):
    target = BertEncoder(CONFIG, dtype="mixed_bfloat16")
    assign_canonical(target, encoder_to_canonical(source))
    out = np.asarray(target(_inputs())["sequence_output"])
    ref = np.asarray(source(_inputs())["sequence_output"])
    assert np.abs(out - ref).max() < 0.2
