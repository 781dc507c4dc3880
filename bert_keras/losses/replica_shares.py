"""A replica's loss under a `tf.distribute` strategy when the replicas hold parts of the batch
of unequal size.

Keras' TensorFlow trainer has each replica return its part's mean loss divided by the replica
count, sums the replicas' gradients, and reports the loss as the replicas' values times the
replica count, weighted by their examples. When the replicas hold different numbers of
examples (an epoch's last, partial batch: 9 examples in batches of 4 leave 1, which one
replica gets, the other none) the mean of the replicas' means weighs the examples of the
smaller part more, and a run on two devices trains differently from the same run on one.
`example_mean_on_replicas` trains on each replica's share of the global batch's mean instead;
`global_mean_on_replicas` reports a loss that is already that share (one that counts its
denominator over the replicas, as the tagger's labelled tokens) as one device would.

A model's own losses (`model.losses`: weight regularizers, `add_loss` terms) are per model, not
per example: every replica computes all of them, so each adds its share, `model_losses_share`
(Keras' `compute_loss` does the same); a `compute_loss` of its own that added them in full
counted them once per replica.
"""

import tensorflow as tf


def example_mean_on_replicas(loss, examples):
    """`loss`, this replica's mean over its `examples` divided by the replica count (Keras' own
    share), with the gradient of `its examples' loss sum / the global batch's examples`. The
    value is kept: Keras' `loss` metric reports the global batch's mean from it."""
    share = _example_share(loss, examples)
    return _valued_as(loss, trained=loss * share) if share is not None else loss


def global_mean_on_replicas(loss, examples):
    """`loss`, this replica's share of the global batch's mean already (its gradient right), valued
    so that Keras' `loss` metric, which weighs each replica's value by its examples, reports that
    mean (it reported the mean of a 1 / 0 split batch twice over, on two replicas)."""
    share = _example_share(loss, examples)
    return _valued_as(tf.math.divide_no_nan(loss, share), trained=loss) if share is not None else loss


def _example_share(loss, examples):
    """`examples * replicas / the global batch's examples` (1 when every replica holds an equal
    part; the shares sum to the replica count), or None on one device."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    examples = tf.cast(examples, loss.dtype)
    return tf.math.divide_no_nan(examples * context.num_replicas_in_sync, context.all_reduce("SUM", examples))


def _valued_as(value, trained):
    """`value`, with the gradient of `trained`."""
    return trained + tf.stop_gradient(value - trained)


def model_losses_share(losses):
    """The sum of `losses` (a model's `losses`: regularizers, `add_loss` terms) as this replica's
    share, 1 / replicas of it (summed over the replicas: the sum once), float32; 0.0 if none."""
    total = tf.constant(0.0)
    for loss in losses:
        total += tf.cast(tf.reduce_sum(loss), "float32")
    return total / _replicas()


def _replicas():
    """How many replicas share the batch this (replica) code sees; 1 outside tf.distribute."""
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync
