"""`bert_keras.layers.Dropout`: Keras' inverted dropout with 16-bit draws.

Checked against what dropout must be: the drop frequency is the rate (within
binomial error), survivors are scaled so the expectation is the input, the
gradient is the mask, inference is the identity, the same seed gives the same
mask; and it runs wherever the encoder runs (tf.function with unknown shapes,
XLA, mixed precision, odd and empty sizes).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.layers import Dropout
from bert_keras.layers.dropout import dropout_with_16_bit_draws


def _binomial_bound(n, p, sigmas=5):
    return sigmas * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5, 0.9])
def test_drop_frequency_is_the_rate_and_survivors_keep_the_expectation(rate):
    x = tf.constant(np.random.default_rng(0).uniform(1, 2, size=(400, 501)), tf.float32)
    y = Dropout(rate, seed=3)(x, training=True).numpy()
    dropped = y == 0
    assert abs(dropped.mean() - rate) < _binomial_bound(dropped.size, rate)
    # Survivors are x / (1 - p_used), p_used being the rate at 16-bit resolution.
    threshold = round(rate * 65536)
    np.testing.assert_allclose(y[~dropped], x.numpy()[~dropped] * 65536 / (65536 - threshold), rtol=1e-6)
    assert abs(threshold / 65536 - rate) <= 1e-3 * rate
    # The expectation: the mean over many masks of a constant input is the input.
    ones = tf.ones([200_000])
    assert abs(float(tf.reduce_mean(Dropout(rate, seed=5)(ones, training=True))) - 1.0) < 6 * np.sqrt(
        rate / (1 - rate) / 200_000)


def test_draws_are_independent_across_the_two_halves_of_a_word():
    # Each 32-bit word gives two neighbouring draws: their drop events must not correlate.
    y = Dropout(0.5, seed=1)(tf.ones([1_000_000]), training=True).numpy()
    pairs = (y == 0).reshape(-1, 2)
    both = np.mean(pairs[:, 0] & pairs[:, 1])
    assert abs(both - 0.25) < _binomial_bound(len(pairs), 0.25)


def test_inference_and_rate_zero_are_the_identity():
    x = tf.random.normal([4, 7, 9])
    np.testing.assert_array_equal(Dropout(0.1)(x, training=False), x)
    np.testing.assert_array_equal(Dropout(0.1)(x), x)
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True), x)


def test_the_same_seed_gives_the_same_mask_and_successive_calls_differ():
    x = tf.ones([64, 65])
    first, second = Dropout(0.1, seed=7), Dropout(0.1, seed=7)
    a, b = first(x, training=True), second(x, training=True)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, first(x, training=True))
    keras.utils.set_random_seed(11)
    c = Dropout(0.1)(x, training=True)
    keras.utils.set_random_seed(11)
    np.testing.assert_array_equal(c, Dropout(0.1)(x, training=True))


def test_the_gradient_is_the_mask():
    x = tf.random.normal([33, 17])
    layer = Dropout(0.2, seed=2)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(y * 3.0)
    grad = tape.gradient(loss, x).numpy()
    mask = (y.numpy() / x.numpy())
    np.testing.assert_allclose(grad, 3.0 * mask, rtol=1e-5)
    assert set(np.unique(np.round(mask, 4))) == {0.0, round(65536 / (65536 - 13107), 4)}


@pytest.mark.parametrize("shape", [[0, 4], [1], [3, 5, 7], [2, 0, 3]])
def test_odd_and_empty_sizes(shape):
    x = tf.ones(shape)
    y = Dropout(0.1, seed=0)(x, training=True)
    assert y.shape == x.shape
    assert np.all((y.numpy() == 0) | np.isclose(y.numpy(), 65536 / (65536 - 6554)))


def test_unknown_shapes_in_a_traced_function_and_under_xla():
    layer = Dropout(0.1, seed=0)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def traced(x):
        return layer(x, training=True)

    for rows in (3, 8):
        y = traced(tf.ones([rows, 11]))
        assert y.shape == (rows, 11)
    compiled = tf.function(lambda x: dropout_with_16_bit_draws(x, 6554, tf.constant([1, 2])), jit_compile=True)
    eager = dropout_with_16_bit_draws(tf.ones([5, 9]), 6554, tf.constant([1, 2]))
    np.testing.assert_array_equal(compiled(tf.ones([5, 9])), eager)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_inputs_keep_their_dtype(dtype):
    layer = Dropout(0.1, seed=0, dtype=keras.DTypePolicy(f"mixed_{dtype}"))
    y = layer(tf.ones([16, 16]), training=True)
    assert y.dtype == dtype
    kept = y.numpy().astype("float32")
    assert np.all((kept == 0) | np.isclose(kept, 1 / 0.9, rtol=1e-2))


def test_what_16_bits_cannot_hold_runs_keras_dropout():
    x = tf.ones([2000, 500])
    # 0.001 is not within 0.1% at 16 bits: Keras' own draws, still the right rate.
    y = Dropout(0.001, seed=0)(x, training=True).numpy()
    assert abs((y == 0).mean() - 0.001) < _binomial_bound(y.size, 0.001)
    # noise_shape: one mask shared along the broadcast axis, as Keras does.
    y = Dropout(0.5, noise_shape=(2000, 1), seed=0)(x, training=True).numpy()
    assert np.all((y == 0).all(axis=1) | (y != 0).all(axis=1))


def test_config_round_trip_and_the_encoder_uses_it():
    layer = Dropout(0.1, seed=4, name="d")
    clone = keras.layers.deserialize(keras.layers.serialize(layer))
    assert isinstance(clone, Dropout) and clone.rate == 0.1 and clone.seed == 4
    from bert_keras.layers import BertTransformerBlock

    block = BertTransformerBlock(hidden_size=32, num_heads=2, intermediate_size=64)
    dropouts = [l for l in block._flatten_layers() if isinstance(l, keras.layers.Dropout)]
    assert dropouts and all(isinstance(l, Dropout) for l in dropouts)
