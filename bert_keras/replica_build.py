"""`FirstReplicaBuild`: Keras' build of the compiled loss and metrics at the start of `fit`, from
the first replica's share of the first batch under a distribution strategy.

Keras 3.15 averages that batch over the replicas (`strategy.reduce("MEAN")`) to build them, which
fails with "Inputs to operation AddN ... must have the same size and shape" when the replicas hold
different numbers of rows: a `fit` on two replicas with an odd batch size (or fewer odd examples
than a batch) stopped before its first step. The build needs shapes only; Keras resets the
iterator after it. The tasks (`TextTask`) and the head models (`EncoderHead`: the pretrainer's
`fit(x=dataset)` too) take it; `training.loop` builds from a batch of its own instead.
"""

import tensorflow as tf


class FirstReplicaBuild:
    """Mixin of a `keras.Model`: `fit`'s first build from the first replica's share of the batch."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None and self._distribute_strategy is not None:
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(
                    lambda value: self._distribute_strategy.experimental_local_results(value)[0],
                    next(batches))
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
