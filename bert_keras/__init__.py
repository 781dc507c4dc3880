"""bert_keras: BERT on Keras 3 + TensorFlow.

The core (config, layers, encoder, heads, checkpoints, training) is Keras only
and knows nothing of raw text; `bert_keras.tasks` (raw text in `fit` /
`predict`) and `bert_keras.cli` compose it with `pipelines` (tokenization,
tf.data) and `serving`. `docs/architecture.md` draws the layers.
"""

from bert_keras.compat import check_environment as _check_environment
from bert_keras.keras_registry import register_when_keras_loads as _register_when_keras_loads
from pipelines.tensorflow_import import defer_pyplot_while_keras_loads as _defer_pyplot_while_keras_loads
from pipelines.tensorflow_import import pause_collector_while_loading as _pause_collector_while_loading
from pipelines.tensorflow_logs import quiet_by_default as _quiet_by_default

_quiet_by_default()  # before anything loads TensorFlow: scripts as quiet as the CLI
_pause_collector_while_loading()  # TensorFlow and Keras load without cycle collections
_defer_pyplot_while_keras_loads()  # Keras' import of pyplot runs when something draws

_check_environment()
_register_when_keras_loads()  # `keras.models.load_model` finds bert_keras's classes, imported on use

__version__ = "0.1.0"

# The public front door, imported lazily so that `import bert_keras` (and
# `bert-keras --help`) do not pay for TensorFlow until a model is needed.
_LAZY = {
    "load_pretrained": "bert_keras.checkpoints",
    "save_pretrained": "bert_keras.checkpoints",
    "load_tokenizer": "bert_keras.checkpoints",
    "BertConfig": "bert_keras.config",
    "BertEncoder": "bert_keras.encoder",
    "BertPretrainer": "bert_keras.models",
    "BertClassifier": "bert_keras.models",
    "BertTokenClassifier": "bert_keras.models",
    "BertSpanQA": "bert_keras.models",
    "BertMultipleChoice": "bert_keras.models",
    "BertEmbedder": "bert_keras.models",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bert_keras' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
