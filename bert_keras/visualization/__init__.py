"""Pictures of what a BERT model does, from numpy arrays (no TensorFlow needed).

>>> from bert_keras.visualization import head_view_html, attention_heatmaps_png  # doctest: +SKIP

`attention_view`: attention as an interactive HTML head view and as PNG heatmaps;
`encoder_attention`: an encoder's attention on one text or a pair (runs the model).
"""

from bert_keras.visualization.attention_view import (
    attention_heatmaps_png,
    head_view_html,
    head_view_summary,
    save_head_view_html,
)
from bert_keras.visualization.encoder_attention import EncoderAttention, attention_of, encoder_attention

__all__ = ["EncoderAttention", "attention_heatmaps_png", "attention_of", "encoder_attention", "head_view_html",
           "head_view_summary", "save_head_view_html"]
