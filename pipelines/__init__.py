"""pipelines: tf.data + TF-Text. Text in, integer tensors out, and back again.

Knows TensorFlow and TF-Text, never Keras models.
"""

from pipelines.environment import check_tf_text_pairing as _check_tf_text_pairing

_check_tf_text_pairing()

from pipelines.packing import BertPacker  # noqa: E402  (after the version check on purpose)
from pipelines.tokenizer import (  # noqa: E402
    BertPreTokenizer,
    BertTokenizer,
    VocabularyError,
    build_vocabulary,
    count_words,
    load_vocabulary,
    write_vocabulary,
)
