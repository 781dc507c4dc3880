"""What distillation asks of a task (mixed into `TextTask`): `distill`, and the per-family hooks.

`bert_keras.tasks.distillation.distill` trains a student on the teacher's outputs; it reads a
family through two hooks, which families override where their outputs or inputs differ:
`_soft_loss` (the soft-target counterpart of the family's own loss) and
`_distillation_dataset` (`fit`'s batches, labels optional). The losses are
`bert_keras.losses.distillation`'s.
"""

import keras
import tensorflow as tf

from bert_keras.families import resolve
from bert_keras.tasks.inputs import num_rows


class DistillationHooks:
    """`distill` and the hooks `bert_keras.tasks.distillation` calls on a task."""

    def distill(self, x, y=None, **options):
        """A smaller student of this task trained on its outputs for `x` (and labels `y`, optional);
        an ordinary task of this class. `bert_keras.tasks.distillation.distill` has the options
        (`layers=`, `temperature=`, `alpha=`, `init=`, `epochs=`, `seed=`, `run_dir=`, ...)."""
        # Resolved by path: the distillation module is a layer above the tasks (it imports them).
        return resolve("bert_keras.tasks.distillation:distill")(self, x, y, **options)

    # -- distillation hooks (`bert_keras.tasks.distillation`); families override them ----------
    def _soft_loss(self, x, teacher_out, student_out, temperature, sample_weight=None):
        """A student's loss against the teacher's outputs on one batch: the soft-target
        counterpart of the task's own loss (KL at `temperature` for logits trained with
        cross-entropy, squared error for regression scores)."""
        from bert_keras.losses import distillation

        if isinstance(self.default_loss(), keras.losses.MeanSquaredError):
            return distillation.squared_error(teacher_out, student_out, sample_weight)
        return distillation.soft_cross_entropy(teacher_out, student_out, temperature, sample_weight)

    def _distillation_dataset(self, x, y, *, batch_size, seed):
        """`(shuffled batches, steps per pass)` to distil on: `fit`'s, with placeholder labels
        (never read: the loss is the teacher's soft targets alone) when `y` is None, and on
        each element of a dataset of `x` alone (not `(x, y)`)."""
        placeholder = self.labels[0] if self.labels else 0
        if isinstance(x, tf.data.Dataset):
            from bert_keras.tasks import dataset_inputs

            layout = self.dataset_layout
            parts = dataset_inputs.element_parts(x.element_spec, x_is_tuple=layout.x_is_tuple)
            if not parts.has_y:  # unbatched rows of x, each with the placeholder
                x = dataset_inputs.unbatched(x, parts, example_rank=layout.example_rank,
                                             is_batched=layout.is_batched).map(lambda row: (row, placeholder))
        elif y is None:
            y = [placeholder] * num_rows(x)
        return self._train_dataset(x, y, batch_size=batch_size, shuffle=True, seed=seed)
