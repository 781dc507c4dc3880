"""Fine-tuning tasks for `bert-keras finetune / evaluate / predict`: the one place that composes them.

A task spec names the data, the model head and the metrics:

* `glue/NAME` (`glue/mrpc`, `glue/stsb`, ...): TFDS GLUE, `BertClassifier`, the GLUE metric(s).
* `csv:PATH`: your CSV / TSV / JSONL file (`text`/`sentence`, optional `text_b`/`sentence2`,
  `label`), `BertClassifier`, accuracy (+ F1 for two classes).
* `conll2003`: CoNLL-2003 NER (TFDS, or `--train/--eval` files), `BertTokenClassifier`,
  seqeval entity P/R/F1.
* `swag`: SWAG CSV files (`--train/--eval`), `BertMultipleChoice`, accuracy.
* `squad/v1.1`, `squad/v2.0`: SQuAD (TFDS, or `--train/--eval` JSON), `BertSpanQA`,
  official EM/F1 (v2: HasAns/NoAns and the best no-answer threshold).

Each task class answers: `labels_from_training`, `train_dataset`, `build_model`,
`evaluate` (metrics dict), `format_metrics` (a readable table). Data readers are
in `pipelines.tasks`, models in `bert_keras.models`, metrics in `bert_keras.metrics`.
"""

import csv
import json
import math
import os

TASK_FORMS = ("glue/NAME (" + ", ".join(
    ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli")) + ")",
              "csv:PATH", "conll2003", "swag", "squad/v1.1", "squad/v2.0")


class TaskError(ValueError):
    """An unknown task spec or missing task data (a user error)."""


def parse_task(spec, **options):
    """The task object of `spec` (see the module docstring); `options` are its settings."""
    spec = (spec or "").strip()
    lowered = spec.lower()
    if lowered.startswith("glue/"):
        from pipelines.tasks.glue import glue_task

        try:
            glue_task(lowered)
        except KeyError as error:
            raise TaskError(f"{error.args[0]} Valid task forms: {', '.join(TASK_FORMS)}") from None
        return GlueClassification(lowered, **options)
    if lowered.startswith("csv:") and len(spec) > 4:
        return CsvClassification(spec, **options)
    if lowered in ("conll2003", "conll"):
        return ConllNer("conll2003", **options)
    if lowered == "swag":
        return Swag("swag", **options)
    if lowered in ("squad/v1.1", "squad/v2.0", "squad"):
        return Squad("squad/v1.1" if lowered == "squad" else lowered, **options)
    raise TaskError(f"unknown task {spec!r}; valid forms: {', '.join(TASK_FORMS)}")


def _steps(num_examples, batch_size):
    return max(1, math.ceil(num_examples / batch_size))


class Task:
    """Common settings; subclasses fill in data, model and metrics."""

    default_seq_length = 128
    kind = "?"

    def __init__(self, spec, *, train_path=None, eval_path=None, text_column=None,
                 text_b_column=None, label_column="label", data_dir=None):
        self.spec = spec
        self.train_path = train_path
        self.eval_path = eval_path
        self.text_column = text_column
        self.text_b_column = text_b_column
        self.label_column = label_column
        self.data_dir = data_dir
        self.labels = None  # class names (classification / NER)

    # -- saved beside the model (task.json) -------------------------------
    def to_json(self):
        return {"task": self.spec, "kind": self.kind, "labels": self.labels,
                "text_column": self.text_column, "text_b_column": self.text_b_column,
                "label_column": self.label_column,
                "train_path": self.train_path and os.path.abspath(self.train_path),
                "eval_path": self.eval_path and os.path.abspath(self.eval_path)}

    def restore(self, info):
        self.labels = info.get("labels")
        self.text_column = info.get("text_column") or self.text_column
        self.text_b_column = info.get("text_b_column") or self.text_b_column
        self.label_column = info.get("label_column") or self.label_column
        self.eval_path = self.eval_path or info.get("eval_path")

    def label_file(self):
        """Name of the label vocabulary file written beside the model, or None."""
        return None

    def format_metrics(self, metrics):
        width = max(len(k) for k in metrics) if metrics else 0
        data = getattr(self, "_scored", None) or self.spec
        lines = [f"{self.spec}: {data} ({metrics.get('num_examples', '?')} examples)"]
        for key, value in metrics.items():
            if key == "num_examples":
                continue
            shown = f"{value:.4f}" if isinstance(value, float) else str(value)
            lines.append(f"  {key:<{width}}  {shown}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# Sentence (pair) classification: GLUE and your own files
# ---------------------------------------------------------------------------


class _Classification(Task):
    kind = "classification"
    regression = False

    def build_model(self, encoder):
        from bert_keras.models import BertClassifier

        return BertClassifier(encoder, num_classes=1 if self.regression else len(self.labels))

    def _score(self, predictions, labels):
        raise NotImplementedError

    def evaluate(self, model, tokenizer, *, seq_length, batch_size, path=None):
        import numpy as np

        dataset = self.eval_dataset(tokenizer, seq_length=seq_length, batch_size=batch_size, path=path)
        outputs, gold = [], []
        for x, y in dataset:
            outputs.append(np.asarray(model(x, training=False)))
            gold.append(y.numpy())
        outputs, gold = np.concatenate(outputs), np.concatenate(gold)
        predictions = outputs if self.regression else outputs.argmax(-1)
        metrics = self._score(predictions, gold)
        metrics["num_examples"] = int(len(gold))
        return metrics

    def predict_texts(self, model, tokenizer, texts, *, seq_length, batch_size=32):
        """[(label, {label: probability})] for `texts` (str, or (a, b) pairs)."""
        import numpy as np
        import tensorflow as tf

        from pipelines.tasks import batching

        pairs = [t if isinstance(t, tuple) else (t,) for t in texts]
        if len({len(p) for p in pairs}) > 1:
            raise TaskError("mix of single texts and (text, text_b) pairs")
        columns = tuple(tf.constant([p[i] for p in pairs]) for i in range(len(pairs[0])))
        dataset = tf.data.Dataset.from_tensor_slices((columns, tf.zeros(len(pairs), tf.int32)))
        dataset = batching.batch(batching.encode_texts(dataset, tokenizer, seq_length=seq_length),
                                 batch_size, seq_length=seq_length)
        outputs = np.concatenate([np.asarray(model(x, training=False)) for x, _ in dataset])
        if self.regression:
            return [(float(v), {}) for v in outputs]
        exp = np.exp(outputs - outputs.max(-1, keepdims=True))
        probs = exp / exp.sum(-1, keepdims=True)
        return [(self.labels[int(p.argmax())], {name: float(v) for name, v in zip(self.labels, p)})
                for p in probs]


class GlueClassification(_Classification):
    def __init__(self, spec, **options):
        from pipelines.tasks.glue import glue_task

        super().__init__(spec, **options)
        self.glue = glue_task(spec)
        self.regression = self.glue.is_regression
        self.labels = list(self.glue.label_names)

    @property
    def dev_split(self):
        return "validation_matched" if self.glue.name == "mnli" else "validation"

    def labels_from_training(self):
        return self.labels

    def train_dataset(self, tokenizer, *, seq_length, batch_size, seed=None):
        from pipelines.tasks.glue import load_glue

        dataset = load_glue(self.glue.name, "train", tokenizer, seq_length=seq_length,
                            batch_size=batch_size, shuffle=True, data_dir=self.data_dir, seed=seed)
        return dataset, _count_batches(dataset)

    def eval_dataset(self, tokenizer, *, seq_length, batch_size, path=None):
        from pipelines.tasks.glue import load_glue

        if path:
            raise TaskError(f"{self.spec} reads its dev split from TFDS; --data/--eval files are "
                            "for csv:, conll2003, swag and squad tasks")
        return load_glue(self.glue.name, self.dev_split, tokenizer, seq_length=seq_length,
                         batch_size=batch_size, shuffle=False, data_dir=self.data_dir)

    def _score(self, predictions, labels):
        from bert_keras.metrics import glue_metrics

        return {k: float(v) for k, v in glue_metrics(self.glue.name, predictions, labels).items()}

    def format_metrics(self, metrics):
        from bert_keras.metrics import format_glue_table

        scores = {k: v for k, v in metrics.items() if k != "num_examples"}
        return (f"{self.spec} dev ({metrics.get('num_examples', '?')} examples)\n"
                + format_glue_table({self.glue.name: scores}))


def _count_batches(dataset):
    """Batches in a finite dataset (cardinality when known, else one pass)."""
    import tensorflow as tf

    cardinality = int(dataset.cardinality())
    if cardinality >= 0:
        return cardinality
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))


def _peek_columns(path):
    """Column names of a CSV/TSV header or the first JSONL object (for column auto-detection)."""
    from pipelines.tasks.text_files import FORMATS

    file_format = FORMATS.get(os.path.splitext(path)[1].lower())
    with open(path, encoding="utf-8", newline="") as f:
        if file_format == "jsonl":
            for line in f:
                if line.strip():
                    try:
                        return list(json.loads(line))
                    except (ValueError, TypeError):
                        return []
            return []
        header = next(csv.reader(f, delimiter="\t" if file_format == "tsv" else ","), [])
        return [c.strip() for c in header]


class CsvClassification(_Classification):
    """`csv:PATH`: classes from the training file's labels (sorted), saved as labels.txt."""

    TEXT_COLUMNS = ("text", "sentence", "sentence1", "question", "premise")
    TEXT_B_COLUMNS = ("text_b", "sentence2", "hypothesis")

    def __init__(self, spec, *, regression=False, **options):
        super().__init__(spec, **options)
        self.path = spec[4:]
        self.train_path = self.train_path or self.path
        self.regression = regression

    def to_json(self):
        return dict(super().to_json(), regression=self.regression)

    def restore(self, info):
        super().restore(info)
        self.regression = bool(info.get("regression"))

    def label_file(self):
        return None if self.regression else "labels.txt"

    def _read(self, path):
        from pipelines.tasks.text_files import read_text_file

        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        columns = _peek_columns(path)
        text = self.text_column or next((c for c in self.TEXT_COLUMNS if c in columns), "text")
        text_b = self.text_b_column or next((c for c in self.TEXT_B_COLUMNS if c in columns),
                                            "text_b")
        self.text_column, self.text_b_column = text, text_b
        return read_text_file(path, text_column=text, text_b_column=text_b,
                              label_column=self.label_column, regression=self.regression)

    def labels_from_training(self):
        from pipelines.tasks.text_files import build_label_vocabulary

        self._train = self._read(self.train_path)
        if not self.regression:
            self.labels = build_label_vocabulary(self._train)
            if len(self.labels) < 2:
                raise TaskError(f"{self.train_path}: only one label {self.labels}; "
                                "classification needs at least two")
        return self.labels

    def train_dataset(self, tokenizer, *, seq_length, batch_size, seed=None):
        from pipelines.tasks.text_files import text_dataset

        examples = self._train
        dataset = text_dataset(examples, tokenizer, labels=self.labels, regression=self.regression,
                               seq_length=seq_length, batch_size=batch_size, shuffle=True, seed=seed)
        return dataset, _steps(len(examples), batch_size)

    def eval_dataset(self, tokenizer, *, seq_length, batch_size, path=None):
        from pipelines.tasks.text_files import label_ids, text_dataset

        path = path or self.eval_path
        if not path:
            raise TaskError(f"{self.spec}: no evaluation file; pass --eval PATH (or --data PATH)")
        examples = self._read(path)
        self._scored = path
        if not self.regression:
            label_ids(examples, self.labels)  # unknown label -> error naming file:line
        return text_dataset(examples, tokenizer, labels=self.labels, regression=self.regression,
                            seq_length=seq_length, batch_size=batch_size, shuffle=False)

    def _score(self, predictions, labels):
        from bert_keras.metrics import accuracy, f1, pearson, spearman

        if self.regression:
            return {"pearson": float(pearson(predictions, labels)),
                    "spearman": float(spearman(predictions, labels))}
        metrics = {"accuracy": float(accuracy(labels, predictions))}
        if len(self.labels) == 2:
            metrics["f1"] = float(f1(labels, predictions))
        else:
            metrics["macro_f1"] = float(f1(labels, predictions, average="macro"))
        return metrics


# ---------------------------------------------------------------------------
# Token classification: CoNLL-2003 NER
# ---------------------------------------------------------------------------


class ConllNer(Task):
    kind = "ner"

    def label_file(self):
        return "labels.txt"

    def _sentences(self, path, split):
        from pipelines.tasks import conll

        if path:
            sentences = conll.read_conll(path)
            # CoNLL-2003 files are IOB1; train and score in IOB2 (BIO), as TFDS.
            return [s.with_tags(conll.convert_tags(s.tags, "IOB1", "IOB2")) for s in sentences]
        return conll.conll_from_tfds(split, data_dir=self.data_dir)

    def labels_from_training(self):
        from pipelines.tasks import conll

        self._train = self._sentences(self.train_path, "train")
        seen = {t for s in self._train for t in s.tags}
        self.labels = list(conll.CONLL2003_NER_LABELS)
        self.labels += sorted(seen - set(self.labels))
        return self.labels

    def build_model(self, encoder):
        from bert_keras.models import BertTokenClassifier

        return BertTokenClassifier(encoder, num_labels=len(self.labels))

    def train_dataset(self, tokenizer, *, seq_length, batch_size, seed=None):
        from pipelines.tasks import conll

        features = conll.encode_sentences(self._train, tokenizer, self.labels, seq_length=seq_length)
        return (conll.token_dataset(features, batch_size=batch_size, shuffle=True, seed=seed),
                _steps(len(self._train), batch_size))

    def _tag(self, model, tokenizer, sentences, seq_length, batch_size):
        import numpy as np

        from pipelines.tasks import conll

        # Prediction needs no gold tags: give every word "O" for the encoder.
        blank = [s.with_tags([self.labels[0]] * len(s.words)) for s in sentences]
        features = conll.encode_sentences(blank, tokenizer, self.labels, seq_length=seq_length)
        x = {"token_ids": features.token_ids, "segment_ids": features.segment_ids,
             "padding_mask": features.padding_mask}
        logits = model.predict(x, batch_size=batch_size, verbose=0)
        ids = conll.aggregate_word_predictions(np.asarray(logits), features.word_ids, "first")
        tags = []
        for sentence, row in zip(sentences, ids):
            row = [self.labels[i] for i in row]
            tags.append(row + ["O"] * (len(sentence.words) - len(row)))  # truncated words
        return tags

    def evaluate(self, model, tokenizer, *, seq_length, batch_size, path=None):
        from bert_keras.metrics import entity_classification_report, entity_scores

        sentences = self._sentences(path or self.eval_path, "validation")
        predicted = self._tag(model, tokenizer, sentences, seq_length, batch_size)
        gold = [s.tags for s in sentences]
        metrics = {k: float(v) for k, v in entity_scores(gold, predicted).items()}
        metrics["num_examples"] = len(sentences)
        self._report = entity_classification_report(gold, predicted)
        return metrics

    def format_metrics(self, metrics):
        text = super().format_metrics(metrics)
        report = getattr(self, "_report", None)
        if isinstance(report, str):
            text += "\n" + report
        return text

    def predict_texts(self, model, tokenizer, texts, *, seq_length, batch_size=32):
        """Per text: its words, their tags and the entities, with code point offsets.

        Words are the tokenizer's (punctuation split off: "Paris." is "Paris", "."),
        the words the exported model decodes, so both give the same entities:
        `{"type", "text", "start_char", "end_char", "start_word", "end_word"}` with
        `text == input[start_char:end_char]`.
        """
        from bert_keras.metrics import get_entities
        from pipelines.tasks.conll import Sentence, split_words

        split = split_words(texts, tokenizer)
        sentences = [Sentence(words, ["O"] * len(words)) for words, _, _ in split]
        results = []
        for text, (words, starts, ends), tags in zip(
                texts, split, self._tag(model, tokenizer, sentences, seq_length, batch_size)):
            entities = []
            for entity in get_entities(tags):
                kind, first, last = entity[0], entity[1], entity[2]
                entities.append({"type": kind, "text": text[starts[first]:ends[last]],
                                 "start_char": starts[first], "end_char": ends[last],
                                 "start_word": first, "end_word": last})
            results.append({"words": words, "tags": tags, "entities": entities})
        return results


# ---------------------------------------------------------------------------
# Multiple choice: SWAG
# ---------------------------------------------------------------------------


class Swag(Task):
    kind = "multiple_choice"

    def labels_from_training(self):
        from pipelines.tasks.swag import read_swag_csv

        if not self.train_path:
            raise TaskError("swag: pass --train train.csv (and --eval val.csv), the SWAG CSV files")
        self._train = read_swag_csv(self.train_path)
        self.labels = ["0", "1", "2", "3"]
        return self.labels

    def build_model(self, encoder):
        from bert_keras.models import BertMultipleChoice

        return BertMultipleChoice(encoder, num_choices=4)

    def train_dataset(self, tokenizer, *, seq_length, batch_size, seed=None):
        from pipelines.tasks.swag import swag_dataset

        return (swag_dataset(self._train, tokenizer, seq_length=seq_length, batch_size=batch_size,
                             shuffle=True, seed=seed), _steps(len(self._train), batch_size))

    def evaluate(self, model, tokenizer, *, seq_length, batch_size, path=None):
        import numpy as np

        from bert_keras.metrics import accuracy
        from pipelines.tasks.swag import read_swag_csv, swag_dataset

        path = path or self.eval_path
        if not path:
            raise TaskError("swag: no evaluation file; pass --eval val.csv")
        examples = read_swag_csv(path)
        dataset = swag_dataset(examples, tokenizer, seq_length=seq_length, batch_size=batch_size)
        predictions, gold = [], []
        for x, y in dataset:
            predictions.append(np.asarray(model(x, training=False)).argmax(-1))
            gold.append(y.numpy())
        gold, predictions = np.concatenate(gold), np.concatenate(predictions)
        return {"accuracy": float(accuracy(gold, predictions)), "num_examples": int(len(gold))}

    def predict_texts(self, model, tokenizer, items, *, seq_length, batch_size=32):
        """[{"choice": i, "ending": text, "probabilities": [p0..p3]}] for (context, endings) items.

        Each item's endings complete its context (SWAG's `sent2` start left empty), the
        same pairs `swag_dataset` builds from a CSV row.
        """
        import numpy as np

        from pipelines.tasks.swag import SwagExample, swag_dataset

        examples = []
        for number, (context, endings) in enumerate(items, 1):
            if len(endings) != 4:
                raise TaskError(f"input {number}: a SWAG model scores exactly 4 endings, got "
                                f"{len(endings)} (give 'context ||| e1 ||| e2 ||| e3 ||| e4')")
            examples.append(SwagExample(context, "", tuple(endings), None, f"input {number}"))
        dataset = swag_dataset(examples, tokenizer, seq_length=seq_length, batch_size=batch_size)
        logits = np.concatenate([np.asarray(model(x, training=False)) for x, _ in dataset])
        exp = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities = exp / exp.sum(-1, keepdims=True)
        return [{"choice": int(p.argmax()), "ending": endings[int(p.argmax())],
                 "probabilities": [float(v) for v in p]}
                for (_, endings), p in zip(items, probabilities)]


# ---------------------------------------------------------------------------
# Extractive QA: SQuAD v1.1 / v2.0
# ---------------------------------------------------------------------------


class Squad(Task):
    kind = "squad"
    default_seq_length = 384

    def __init__(self, spec, *, doc_stride=128, max_query_length=64, **options):
        super().__init__(spec, **options)
        self.version = spec.split("/v")[-1]
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    @property
    def version_2(self):
        return self.version == "2.0"

    def to_json(self):
        return dict(super().to_json(), doc_stride=self.doc_stride,
                    max_query_length=self.max_query_length)

    def restore(self, info):
        super().restore(info)
        self.doc_stride = info.get("doc_stride", self.doc_stride)
        self.max_query_length = info.get("max_query_length", self.max_query_length)

    def _examples(self, path, split, is_training):
        from pipelines.tasks.squad import read_squad_json, squad_examples_from_tfds

        if path:
            return read_squad_json(path, is_training=is_training)
        return squad_examples_from_tfds(self.spec, split, is_training=is_training,
                                        data_dir=self.data_dir)

    def labels_from_training(self):
        self._train = self._examples(self.train_path, "train", True)
        return None

    def build_model(self, encoder):
        from bert_keras.models import BertSpanQA

        return BertSpanQA(encoder)

    def _features(self, examples, tokenizer, seq_length, is_training):
        from pipelines.tasks.squad import build_squad_features

        return build_squad_features(examples, tokenizer, is_training=is_training,
                                    max_seq_length=seq_length, doc_stride=self.doc_stride,
                                    max_query_length=self.max_query_length)

    def train_dataset(self, tokenizer, *, seq_length, batch_size, seed=None):
        features = self._features(self._train, tokenizer, seq_length, True)
        dataset = features.as_dataset().shuffle(len(features), seed=seed).batch(batch_size)
        return dataset, _steps(len(features), batch_size)

    def predict_file(self, model, tokenizer, path, *, seq_length, batch_size, n_best_size=20,
                     max_answer_length=30, null_score_diff_threshold=0.0):
        """(examples, predictions, nbest, null_odds) for a SQuAD JSON file."""
        from pipelines.tasks.squad import decode_predictions, read_squad_json

        examples = read_squad_json(path, is_training=False) if path else self._examples(
            None, "validation", False)
        return (examples,) + self._decode(model, tokenizer, examples, seq_length, batch_size,
                                          n_best_size, max_answer_length, null_score_diff_threshold,
                                          decode_predictions)

    def _decode(self, model, tokenizer, examples, seq_length, batch_size, n_best_size,
                max_answer_length, threshold, decode_predictions):
        import numpy as np

        features = self._features(examples, tokenizer, seq_length, False)
        outputs = model.predict(features.inputs, batch_size=batch_size, verbose=0)
        return decode_predictions(examples, features, np.asarray(outputs["start_logits"]),
                                  np.asarray(outputs["end_logits"]), n_best_size=n_best_size,
                                  max_answer_length=max_answer_length, version_2=self.version_2,
                                  null_score_diff_threshold=threshold)

    def evaluate(self, model, tokenizer, *, seq_length, batch_size, path=None):
        from bert_keras.metrics import squad_v1_metrics, squad_v2_metrics

        path = path or self.eval_path
        examples, predictions, _, null_odds = self.predict_file(
            model, tokenizer, path, seq_length=seq_length, batch_size=batch_size)
        dataset = path if path else _dataset_json(examples)
        if self.version_2:
            metrics = squad_v2_metrics(dataset, predictions, na_probs=null_odds)
        else:
            metrics = squad_v1_metrics(dataset, predictions)
        metrics = {k: (float(v) if isinstance(v, float) else v) for k, v in metrics.items()}
        metrics["num_examples"] = len(examples)
        return metrics


def _dataset_json(examples):
    """A SQuAD-format dict of examples (TFDS questions) for the official metrics."""
    paragraphs = [{"context": e.context, "qas": [{"id": e.id, "question": e.question,
                                                  "answers": e.answers,
                                                  "is_impossible": e.is_impossible}]}
                  for e in examples]
    return {"data": [{"title": "", "paragraphs": paragraphs}]}
