"""Feed-forward activations by `BertConfig.hidden_act` name.

Keeping the name (not a function object) in layer configs makes `.keras` files
readable and the exact/tanh GELU distinction explicit.
"""

import keras


def get_activation(name):
    """Returns the activation function for a `BertConfig.hidden_act` name.

    Example:

    >>> import numpy as np
    >>> fn = get_activation("gelu")
    >>> float(fn(np.array([1.0], "float32"))[0])  # exact erf GELU
    0.8413447...

    Args:
        name: `"gelu"` (exact erf form, as `torch.nn.functional.gelu`),
            `"gelu_approximate"` (tanh form, as google-research `modeling.py`),
            `"relu"` or `"silu"`.
    """
    if name == "gelu":
        return _gelu_exact
    if name == "gelu_approximate":
        return _gelu_tanh
    if name == "relu":
        return keras.activations.relu
    if name == "silu":
        return keras.activations.silu
    raise ValueError(
        f"unknown activation {name!r}; expected 'gelu', 'gelu_approximate', 'relu' or 'silu'"
    )


def _gelu_exact(x):
    return keras.activations.gelu(x, approximate=False)


def _gelu_tanh(x):
    return keras.activations.gelu(x, approximate=True)
