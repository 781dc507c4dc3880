"""`tf.custom_gradient` for the layers' closed-form gradients, without its memory leak.

Inside a traced function (`tf.function`, Keras' train step), `tf.custom_gradient`
registers every call's gradient function in TensorFlow's process-wide gradient
registry, and never removes it. The function's closure holds the forward
tensors, so every traced graph that calls it stays in memory for the life of
the process (tensorflow#27492, #97697): a leak for every model built or
retraced, which notebooks, hyperparameter searches, test suites and servers
that load models do all the time.

`closed_form_gradient` records the gradient on the active gradient tapes only
(what `tf.GradientTape`, and so Keras' `fit`, use); it goes away with them.
Eagerly it is `tf.custom_gradient`, which registers nothing. TensorFlow's
symbolic `tf.gradients` (TF1-style code, or a nested `tf.function`
differentiated from outside it) does not see the tape: it differentiates the
forward ops automatically, which gives the same values.

Example:

>>> import tensorflow as tf
>>> @closed_form_gradient
... def square(x):
...     return x * x, lambda upstream: upstream * 2.0 * x
>>> x = tf.constant(3.0)
>>> with tf.GradientTape() as tape:
...     tape.watch(x)
...     y = square(x)
>>> float(tape.gradient(y, x))
6.0
"""

import functools

import tensorflow as tf
from tensorflow.python.eager import record  # what tf.custom_gradient itself records with


def closed_form_gradient(forward):
    """Decorates `forward(*tensors) -> (output, gradient)`, with `gradient(upstream)` the
    gradients of the inputs (one tensor, or a tuple of one per input), as `tf.custom_gradient`.

    One output tensor; the inputs are tensors (not variables)."""
    eager = tf.custom_gradient(forward)

    @functools.wraps(forward)
    def call(*inputs):
        if tf.executing_eagerly():
            return eager(*inputs)
        inputs = [tf.convert_to_tensor(value) for value in inputs]
        output, gradient = forward(*inputs)
        # As tf.custom_gradient: the output passes through an identity, whose tape record is
        # then replaced by this one; later ops read the identity's output. (custom_gradient
        # passes the inputs through too, for its registry; on the tape that only costs a
        # zero-filled upstream gradient per input.)
        passed = tf.identity(output)

        def backward(upstream):
            grads = gradient(upstream)
            return [None, *(grads if isinstance(grads, (list, tuple)) else [grads])]

        record.record_operation(forward.__name__, [passed], [output, *inputs], backward)
        return passed

    return call
