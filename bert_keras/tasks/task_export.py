"""`export_task`: a task as a TF Serving SavedModel, tokenizer inside (what `task.export` calls).

Example:

    >>> from bert_keras import tasks
    >>> task = tasks.load("out/sentiment")                       # doctest: +SKIP
    >>> export_task(task, "models", "sentiment").path            # doctest: +SKIP
    'models/sentiment/1'
"""

import os
import warnings

import tensorflow as tf


def export_task(task, base_path, name=None, version=None, **options):
    """Exports `task` as `<base_path>/<name>/<version>` for TF Serving; returns the
    `serving.exporter.ExportResult` (path, version, signatures, audit, model card, check).

    Raw UTF-8 text in, the task's outputs out (labels and probabilities, entities, answers,
    vectors): tokenization, packing and decoding run inside the graph. With `name=None` (Keras'
    one-argument `task.export("models/sentiment")`), `base_path` is the served model's own
    directory (TF Serving's `--model_base_path`): the version goes to `models/sentiment/1` and the
    name is `sentiment`.

    Args:
        task: a `bert_keras.tasks` task.
        base_path: the model base directory.
        name: the served model's name (None: the last part of `base_path`).
        version: positive int; default the highest existing + 1.
        **options: `serving.exporter.export_saved_model` options (`tokenizer_backend`, `strict`,
            `check`, `overwrite`, `warmup_requests`, `max_batch_size` (the serving batching's: no
            warmup request holds more rows), `release`, `quantize`, ...) and overrides of the
            record's settings (`FinetunedModel.with_settings`): `seq_length`, `lowercase`, and
            the task's own (`text_pair`, `null_score_diff_threshold`, `max_windows`, ...); the task
            itself is left as it is.
    """
    from serving.exporter import export_saved_model

    if name is None:
        model_dir = os.path.abspath(os.fspath(base_path))
        base_path, name = os.path.dirname(model_dir), os.path.basename(model_dir)
    pre_tokenizer = task._record.pre_tokenizer
    if pre_tokenizer:
        warnings.warn(f"this model reads text split by {pre_tokenizer} at its morpheme boundaries "
                      "(pre_tokenizer): the export tokenizes in the graph, where no analyzer runs, so its "
                      f"clients must send split text (bert-keras query/loadtest --pre-tokenizer {pre_tokenizer}, "
                      "or serving.text_requests.split_morphemes in Python); its model card says so",
                      stacklevel=3)
    return export_saved_model(task.to_finetuned(), base_path, name, version=version, **options)


class TaskExport:
    """A task's SavedModel forms (mixed into `TextTask`): `export` (raw text in, tokenizer
    inside, for TF Serving) and what `tf.saved_model.save(task)` writes (the head's own
    signature on packed inputs)."""

    @property
    def _default_save_signature(self):
        """`tf.saved_model.save(task)`'s `serving_default`: the head's, on packed inputs, as Keras
        gives a model. The raw-text signatures, tokenizer inside, are `task.export`'s."""
        head_signature = self.head._default_save_signature
        if head_signature is None:
            return None
        inputs = head_signature.input_signature[0]
        if isinstance(inputs, dict):  # the inputs by their names (Keras' would be inputs, inputs_1, ...)
            inputs = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name) for name, spec in inputs.items()}

        @tf.function(input_signature=[inputs])
        def serving_default(inputs):
            return self.head(inputs, training=False)

        return serving_default

    def export(self, base_path, name=None, version=None, **options):
        """Exports a TF Serving SavedModel, tokenizer inside (as `bert-keras export`); returns its
        version path. `bert_keras.tasks.task_export.export_task` has the arguments and options."""
        return self.export_result(base_path, name, version, **options).path

    def export_result(self, base_path, name=None, version=None, **options):
        """`export`, returning the whole `serving.exporter.ExportResult` (audit, model card, check)."""
        from bert_keras.tasks.task_export import export_task

        return export_task(self, base_path, name, version, **options)

