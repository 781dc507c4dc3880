"""Task models built on `BertEncoder` (the backbone): pretraining, and later fine-tuning heads."""

from bert_keras.models.pretrainer import BertPretrainer

__all__ = ["BertPretrainer"]
