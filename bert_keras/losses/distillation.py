"""Soft-target losses of knowledge distillation (`bert_keras.tasks.distillation`), per batch.

Each returns a float32 scalar: a (weighted) mean over rows, or over real tokens.

>>> import numpy as np
>>> teacher = np.array([[2.0, 0.0], [0.0, 1.0]], np.float32)
>>> float(soft_cross_entropy(teacher, teacher, temperature=2.0))
0.0
>>> float(soft_cross_entropy(teacher, -teacher, temperature=1.0)) > 0
True
"""

import tensorflow as tf


def kl_divergence(teacher_logits, student_logits, temperature):
    """Per row `T^2 * KL(softmax(t / T) || softmax(s / T))` over the last axis (Hinton et al.)."""
    t = tf.nn.log_softmax(tf.cast(teacher_logits, tf.float32) / temperature, axis=-1)
    s = tf.nn.log_softmax(tf.cast(student_logits, tf.float32) / temperature, axis=-1)
    return tf.reduce_sum(tf.exp(t) * (t - s), axis=-1) * (temperature ** 2)


def weighted_mean(values, weights=None):
    """Mean of `values`, weighted by `weights` (broadcast; None: plain mean)."""
    values = tf.cast(values, tf.float32)
    if weights is None:
        return tf.reduce_mean(values)
    weights = tf.cast(weights, tf.float32) * tf.ones_like(values)
    return tf.reduce_sum(values * weights) / tf.maximum(tf.reduce_sum(weights), 1e-9)


def _row_weights(sample_weight, rank):
    if sample_weight is None:
        return None
    weight = tf.cast(sample_weight, tf.float32)
    return tf.reshape(weight, [-1] + [1] * (rank - 1))


def soft_cross_entropy(teacher_logits, student_logits, temperature, sample_weight=None, mask=None):
    """Mean KL at `temperature` over rows (logits `[B, C]`) or over the real tokens of `mask`
    (`[B, S]`, for per-token logits `[B, S, C]`)."""
    per_row = kl_divergence(teacher_logits, student_logits, temperature)
    weights = None if mask is None else tf.cast(mask > 0, tf.float32)
    rows = _row_weights(sample_weight, len(per_row.shape))
    if rows is not None:
        weights = rows if weights is None else weights * rows
    return weighted_mean(per_row, weights)


def squared_error(teacher_scores, student_scores, sample_weight=None):
    """Mean squared difference (regression scores, `[B]` or `[B, 1]`)."""
    diff = tf.square(tf.cast(student_scores, tf.float32) - tf.cast(teacher_scores, tf.float32))
    diff = tf.reshape(diff, [tf.shape(diff)[0], -1])
    return weighted_mean(tf.reduce_mean(diff, axis=-1), _row_weights(sample_weight, 1))


def vector_distance(teacher_vectors, student_vectors, sample_weight=None):
    """Mean of `1 - cosine + squared error` between vectors `[B, D]` (sentence embeddings)."""
    t = tf.cast(teacher_vectors, tf.float32)
    s = tf.cast(student_vectors, tf.float32)
    cosine = tf.reduce_sum(tf.math.l2_normalize(t, -1) * tf.math.l2_normalize(s, -1), axis=-1)
    per_row = 1.0 - cosine + tf.reduce_mean(tf.square(t - s), axis=-1)
    return weighted_mean(per_row, _row_weights(sample_weight, 1))
