"""pipelines: tf.data + TF-Text. Text in, integer tensors out, and back again.

Knows TensorFlow and TF-Text, never Keras models.
"""

from pipelines.environment import check_tf_text_pairing as _check_tf_text_pairing

_check_tf_text_pairing()
