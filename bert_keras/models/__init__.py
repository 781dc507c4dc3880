"""Task models built on `BertEncoder` (the backbone): pretraining, fine-tuning heads, embeddings."""

from bert_keras.models.classifier import BertClassifier
from bert_keras.models.embedder import BertEmbedder
from bert_keras.models.finetuning import compile_for_finetuning
from bert_keras.models.multiple_choice import BertMultipleChoice
from bert_keras.models.pretrainer import BertPretrainer
from bert_keras.models.span_qa import BertSpanQA
from bert_keras.models.token_classifier import BertTokenClassifier

__all__ = [
    "BertClassifier",
    "BertEmbedder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanQA",
    "BertTokenClassifier",
    "compile_for_finetuning",
]
