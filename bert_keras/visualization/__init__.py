"""Pictures of what a BERT model does, from numpy arrays (no TensorFlow needed).

>>> from bert_keras.visualization import head_view_html, attention_heatmaps_png  # doctest: +SKIP

`attention_view`: attention as an interactive HTML head view and as PNG heatmaps.
"""

from bert_keras.visualization.attention_view import (
    attention_heatmaps_png,
    head_view_html,
    save_head_view_html,
)

__all__ = ["attention_heatmaps_png", "head_view_html", "save_head_view_html"]
