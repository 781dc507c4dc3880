"""Dynamic loss scaling (float16) whose skip-or-apply choice is the same on every replica.

Keras' `LossScaleOptimizer` checks the gradients for inf / NaN and then either
applies them (unscaled) or skips the step and halves the scale. Under a
distribution strategy it checks each replica's *own* gradients, on the stated
assumption that they were all-reduced before `apply` (true of Keras 2; in Keras 3
the replicas' gradients are summed later, inside the inner optimizer). So when one
replica's part of the batch overflows in float16 and another's does not, the
replicas disagree: the finite one applies a sum that holds the other's inf, and
every weight turns NaN for good. Float16 overflow is routine in the first steps of
a run (the scale starts at 2**15), and "mixed_float16" is the default policy on GPUs
(`training.precision.choose_policy`), so a multi-GPU run could be lost in its
first steps.

`ReplicaConsistentLossScaleOptimizer` counts the replicas whose check failed (an
all-reduce of one number): one overflowing replica skips the step everywhere, as on
one device with the same global batch. `with_loss_scaling` wraps an optimizer in it
where Keras would wrap in its own (and where Keras misses a float16 model), and
`LossScalingCompile` makes a model's `compile` do so.
"""

import inspect

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_keras")
class ReplicaConsistentLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose finite check covers every replica's gradients.

    Example:

    >>> import keras
    >>> optimizer = ReplicaConsistentLossScaleOptimizer(keras.optimizers.Adam())
    >>> float(optimizer.initial_scale)
    32768.0

    Args:
        inner_optimizer, initial_scale, dynamic_growth_steps: as Keras' `LossScaleOptimizer`.
    """

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if tf.distribute.has_strategy() and context is not None and context.num_replicas_in_sync > 1:
            # (ReduceOp has SUM and MEAN only: count the replicas that overflowed)
            overflowed = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(finite), tf.float32))
            finite = tf.equal(overflowed, 0.0)
        return finite


def with_loss_scaling(optimizer, model):
    """`optimizer` wrapped in a dynamic `LossScaleOptimizer` if any layer of `model` computes in float16.

    Keras' `compile` wraps by itself only when the *model's own* policy is
    "mixed_float16", i.e. when the global policy was set before building. A
    functional model built with `dtype="mixed_float16"` keeps a float32 policy
    of its own (Keras 3.15 `Functional` does not take it) while its layers run
    in float16, and would train without loss scaling: this closes that gap.
    Already-wrapped optimizers and bfloat16/float32 models pass through. The wrapper is
    `ReplicaConsistentLossScaleOptimizer`: under a distribution strategy, one replica's
    overflow skips the step on all of them.

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, dtype="mixed_float16")])
    >>> type(with_loss_scaling(keras.optimizers.Adam(), model)).__name__
    'ReplicaConsistentLossScaleOptimizer'

    Args:
        optimizer: a Keras optimizer (or its name, as `compile` takes it).
        model: the model it will train.
    """
    if optimizer is None or isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer
    if any(layer.compute_dtype == "float16" for layer in model._flatten_layers(include_self=True)):
        # Ours, not Keras' (which `compile` would add): the same skip-or-apply choice on every replica.
        return ReplicaConsistentLossScaleOptimizer(keras.optimizers.get(optimizer), name="loss_scale_optimizer")
    return optimizer


class LossScalingCompile:
    """A `keras.Model` mixin: `compile` wraps the optimizer in `ReplicaConsistentLossScaleOptimizer`
    where Keras would wrap it in its own (a float16 model, `auto_scale_loss=True`, the default),
    and `compile_from_config` compiles a loaded model again, as Keras' does for a model whose
    `compile` is not overridden (it skips the others)."""

    def compile(self, *args, **kwargs):
        arguments = inspect.signature(keras.Model.compile).bind(self, *args, **kwargs).arguments
        arguments.pop("self")
        arguments.update(arguments.pop("kwargs", {}))
        if arguments.get("auto_scale_loss", True):
            arguments["optimizer"] = with_loss_scaling(arguments.get("optimizer", "rmsprop"), self)
        super().compile(**arguments)

    def compile_from_config(self, config):
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)
