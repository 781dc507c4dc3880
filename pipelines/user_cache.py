"""The directory where the project keeps what it computes once per machine.

`$BERT_KERAS_CACHE`, else `$XDG_CACHE_HOME/bert_keras`, else `~/.cache/bert_keras`. It holds the
tokenizer's Unicode tables (`pipelines.tokenizer.unicode_tables`) and TF-Text's compiled
tokenizer models (`pipelines.tokenizer.tf_text_models`). Everything in it may be deleted: it is
computed again when needed. A directory that cannot be written only means nothing is kept.

Example:

>>> import os
>>> os.path.basename(cache_root()) != ""
True
"""

import os


def cache_root():
    """The cache directory (see the module docstring); not created here."""
    return os.environ.get("BERT_KERAS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bert_keras")
