"""BERT's weight initializer, and leaving it out where pretrained weights overwrite it anyway.

Every encoder weight starts from a truncated normal of stddev `initializer_range` (0.02), as in
google-research `modeling.py` and HF `BertPreTrainedModel._init_weights`. Drawing those values for
a 6-layer encoder costs about 0.5 s of a `from_pretrained`, for numbers the checkpoint then
replaces. Inside `weights_from_checkpoint()` (what `load_pretrained` builds the encoder in) the
initializer fills zeros instead; the loader gives any weight the checkpoint lacks its random
start afterwards, so the result is the one of a random start overwritten.

Example:

>>> init = truncated_normal(0.02)
>>> round(float(init((1000,)).numpy().std()), 2)
0.02
>>> with weights_from_checkpoint():
...     float(abs(init((1000,)).numpy()).max())
0.0
"""

import contextlib
import contextvars

import keras

_WEIGHTS_FROM_CHECKPOINT = contextvars.ContextVar("weights_from_checkpoint", default=False)


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTruncatedNormal(keras.initializers.TruncatedNormal):
    """`keras.initializers.TruncatedNormal` that fills zeros inside `weights_from_checkpoint()`."""

    def __call__(self, shape, dtype=None):
        if _WEIGHTS_FROM_CHECKPOINT.get():
            return keras.ops.zeros(shape, dtype=dtype or "float32")
        return super().__call__(shape, dtype=dtype)


def truncated_normal(stddev):
    """BERT's initializer of every kernel and embedding: truncated normal, `stddev` (`initializer_range`)."""
    return BertTruncatedNormal(stddev=stddev)


@contextlib.contextmanager
def weights_from_checkpoint():
    """Within the block, `truncated_normal` weights start as zeros: every one of them is about to
    be assigned, from a checkpoint or another model's weights (the caller re-initializes any the
    checkpoint lacks)."""
    token = _WEIGHTS_FROM_CHECKPOINT.set(True)
    try:
        yield
    finally:
        _WEIGHTS_FROM_CHECKPOINT.reset(token)
