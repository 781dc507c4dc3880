"""bert_keras: BERT on Keras 3 + TensorFlow.

Keras layers and models only: this package never opens a dataset and never
imports `pipelines` (tokenization) outside `bert_keras.cli`.
"""

from bert_keras.compat import check_environment as _check_environment

_check_environment()

__version__ = "0.1.0"
