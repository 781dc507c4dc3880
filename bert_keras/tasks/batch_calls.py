"""Keras' `*_on_batch` calls of a task (mixed into `TextTask`), on raw text too.

`train_on_batch` / `test_on_batch` / `predict_on_batch` take what Keras takes (packed inputs)
or one in-memory batch of raw text, which the family packs (`_packed_batch`: its
preprocessor, labels as ids) before Keras' own call.
"""

import numpy as np

from bert_keras.tasks import fit_loop
from bert_keras.tasks.inputs import TaskInputError, is_tokenized, num_rows


class KerasBatchCalls:
    """`predict_on_batch`, `train_on_batch`, `test_on_batch` on raw text or packed inputs."""

    def predict_on_batch(self, x):
        """`predict` on one batch (raw text, or packed inputs as Keras takes them)."""
        if is_tokenized(x):
            return self._from_outputs(np.asarray(super().predict_on_batch(x)))
        return self.predict(x, batch_size=max(1, num_rows(x)))

    def train_on_batch(self, x=None, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One training step on one batch of raw text (packed by the preprocessor) or packed inputs."""
        x, y = self._packed_batch(x, y) if not is_tokenized(x) else (x, self._labels_of_packed(x, y))
        if class_weight is not None:
            class_weight = fit_loop.class_weight_ids(self, class_weight, sample_weight)
        return super().train_on_batch(x, y, sample_weight=sample_weight, class_weight=class_weight,
                                      return_dict=return_dict)

    def test_on_batch(self, x=None, y=None, sample_weight=None, return_dict=False):
        """Keras' loss and compiled metrics on one batch of raw text or packed inputs."""
        x, y = self._packed_batch(x, y) if not is_tokenized(x) else (x, self._labels_of_packed(x, y))
        return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def _labels_of_packed(self, x, y):
        """The labels `y` of packed inputs `x` as the head reads them (a family's names as ids)."""
        return y

    def _packed_batch(self, x, y):
        """`(packed inputs, label ids)` of one in-memory batch of raw text (families with a preprocessor)."""
        raise TaskInputError(f"a {type(self).__name__} takes raw text in fit / evaluate / predict; "
                             "its *_on_batch calls take packed inputs")
