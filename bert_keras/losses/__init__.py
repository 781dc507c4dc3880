"""Keras losses of the fine-tuning tasks that Keras does not ship."""

from bert_keras.losses.labelled_positions import LabelledTokenAccuracy, on_labelled_positions
from bert_keras.losses.masked_sparse_categorical_crossentropy import (
    IGNORE_INDEX,
    MaskedSparseCategoricalCrossentropy,
)
from bert_keras.losses.score_squared_error import ScoreMeanSquaredError

__all__ = ["IGNORE_INDEX", "LabelledTokenAccuracy", "MaskedSparseCategoricalCrossentropy", "ScoreMeanSquaredError",
           "on_labelled_positions"]
