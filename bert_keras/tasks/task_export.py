"""`export_task`: a task as a TF Serving SavedModel, tokenizer inside (what `task.export` calls).

Example:

    >>> from bert_keras import tasks
    >>> task = tasks.load("out/sentiment")                       # doctest: +SKIP
    >>> export_task(task, "models", "sentiment").path            # doctest: +SKIP
    'models/sentiment/1'
"""

import os
import warnings


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
            `check`, `overwrite`, `warmup_requests`, `release`, `quantize`, ...) and overrides of
            the record's settings (`FinetunedModel.with_settings`): `seq_length`, `lowercase`, and
            the task's own (`text_pair`, `null_score_diff_threshold`, `max_windows`, ...); the task
            itself is left as it is.
    """
    from serving.exporter import export_saved_model

    if name is None:
        model_dir = os.path.abspath(os.fspath(base_path))
        base_path, name = os.path.dirname(model_dir), os.path.basename(model_dir)
    pre_tokenizer = task._text.pre_tokenizer
    if pre_tokenizer:
        warnings.warn(f"this model reads text split by {pre_tokenizer} at its morpheme boundaries "
                      "(pre_tokenizer): the export tokenizes in the graph, where no analyzer runs, so its "
                      "clients must send split text (pipelines.tokenizer.morphemes.morpheme_splitter("
                      f"{pre_tokenizer!r}).spaced); its model card says so", stacklevel=3)
    return export_saved_model(task.to_finetuned(), base_path, name, version=version, **options)
