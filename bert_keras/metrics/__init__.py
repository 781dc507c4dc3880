"""Evaluation metrics of the fine-tuning tasks, equal to their reference implementations.

Pure Python / numpy (no TensorFlow), so they run anywhere predictions are written:

* `classification`: accuracy, F1, Matthews correlation, Pearson, Spearman (sklearn / scipy);
* `glue`: each GLUE task's metrics and the GLUE-average table;
* `squad`: SQuAD v1.1 / v2.0 exact match and F1 (the official evaluation scripts);
* `korquad`: KorQuAD 1.0 exact match and character-level F1 (`korquad.evaluate`, the official script);
* `entities`: entity-level NER precision / recall / F1 (conlleval / seqeval);
* `similarity`: STS scoring, Spearman of the cosine similarities of sentence vectors (KorSTS, STS-B).

Example:
    >>> from bert_keras.metrics import glue_metrics
    >>> glue_metrics("sst2", predictions=[1, 0, 1], labels=[1, 1, 1])  # doctest: +ELLIPSIS
    {'accuracy': 0.666...}
"""

from bert_keras.metrics.classification import accuracy, f1, matthews_corrcoef, pearson, spearman
from bert_keras.metrics.entities import entity_classification_report, entity_scores, get_entities
from bert_keras.metrics.glue import format_glue_table, glue_average, glue_metrics
from bert_keras.metrics.similarity import cosine_similarities, similarity_spearman
from bert_keras.metrics.squad import normalize_answer, squad_v1_metrics, squad_v2_metrics

__all__ = [
    "accuracy",
    "cosine_similarities",
    "entity_classification_report",
    "entity_scores",
    "f1",
    "format_glue_table",
    "get_entities",
    "glue_average",
    "glue_metrics",
    "matthews_corrcoef",
    "normalize_answer",
    "pearson",
    "similarity_spearman",
    "spearman",
    "squad_v1_metrics",
    "squad_v2_metrics",
]
