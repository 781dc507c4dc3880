"""pipelines: tf.data + TF-Text. Text in, integer tensors out, and back again.

Knows TensorFlow and TF-Text, never Keras models. The public names load lazily, so
that importing the package (the CLI's `--help`, `bert_keras`) does not load TensorFlow
before its logs are configured (`pipelines.tensorflow_logs`).
"""

import importlib

from pipelines.tensorflow_import import defer_pyplot_while_keras_loads as _defer_pyplot_while_keras_loads
from pipelines.tensorflow_import import pause_collector_while_loading as _pause_collector_while_loading
from pipelines.tensorflow_logs import quiet_by_default as _quiet_by_default

_quiet_by_default()  # before anything loads TensorFlow
_pause_collector_while_loading()  # TensorFlow and Keras load without cycle collections
_defer_pyplot_while_keras_loads()  # Keras' import of pyplot runs when something draws

from pipelines.environment import check_tf_text_pairing as _check_tf_text_pairing  # noqa: E402

_check_tf_text_pairing()

_LAZY = {
    "BertPacker": "pipelines.packing",
    "BertPreTokenizer": "pipelines.tokenizer",
    "BertTokenizer": "pipelines.tokenizer",
    "VocabularyError": "pipelines.tokenizer",
    "build_vocabulary": "pipelines.tokenizer",
    "count_words": "pipelines.tokenizer",
    "load_vocabulary": "pipelines.tokenizer",
    "write_vocabulary": "pipelines.tokenizer",
}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipelines' has no attribute {name!r}")
