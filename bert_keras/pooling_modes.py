"""The sentence-embedding pooling modes (`bert_keras.models.embedder` documents each one).

Plain data, no TensorFlow or Keras: `bert-keras embed --help` and `export --help` list the
choices without loading a model.

>>> POOLING_MODES[0]
'mean'
"""

POOLING_MODES = ("mean", "cls", "max", "pooled", "concat_last4", "sum_last4", "weighted", "bm25")
