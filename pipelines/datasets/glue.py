"""GLUE (and IMDB) from TensorFlow Datasets as batched `(x, y)` for `model.fit`.

`GLUE_TASKS` is the table of the nine GLUE tasks: TFDS name, text field(s),
label names (none for STS-B: a float similarity score, regression), the
metric(s) GLUE reports, and the splits. `load_glue` reads one split with
`tfds.load`, tokenizes, packs and batches it (see `pipelines.datasets.batching`).
`load_imdb` does the same for `imdb_reviews` (one text field, neg/pos).

GLUE test splits carry no labels (TFDS stores -1): use them for prediction
only.

Example:
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import glue
    >>> tokenizer = BertTokenizer("vocab.txt")
    >>> glue.glue_task("mrpc").metrics
    ('accuracy', 'f1')
    >>> train = glue.load_glue("mrpc", "train", tokenizer, seq_length=128, batch_size=32)  # TFDS download  # doctest: +SKIP
    >>> x, y = next(iter(train))  # TFDS download  # doctest: +SKIP
    >>> sorted(x), y.dtype  # TFDS download  # doctest: +SKIP
    (['padding_mask', 'segment_ids', 'token_ids'], tf.int32)
"""

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf

from pipelines.datasets import batching


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task.

    Args:
        name: short name (`"mrpc"`).
        tfds_name: TFDS dataset name (`"glue/mrpc"`).
        text_fields: one or two TFDS feature names, packed as segment A (and B).
        label_names: class names in label-id order; empty for regression.
        metrics: names of the metrics GLUE reports for the task
            (`matthews_corrcoef`, `accuracy`, `f1`, `pearson`,
            `spearman`).
        splits: TFDS split names.
    """

    name: str
    tfds_name: str
    text_fields: Tuple[str, ...]
    label_names: Tuple[str, ...]
    metrics: Tuple[str, ...]
    splits: Tuple[str, ...] = ("train", "validation", "test")

    @property
    def is_regression(self):
        return not self.label_names

    @property
    def num_classes(self):
        """Number of classes; 1 (one output) for regression."""
        return len(self.label_names) or 1


_ENTAILMENT2 = ("entailment", "not_entailment")

GLUE_TASKS = {task.name: task for task in (
    GlueTask("cola", "glue/cola", ("sentence",), ("unacceptable", "acceptable"), ("matthews_corrcoef",)),
    GlueTask("sst2", "glue/sst2", ("sentence",), ("negative", "positive"), ("accuracy",)),
    GlueTask("mrpc", "glue/mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"),
             ("accuracy", "f1")),
    GlueTask("qqp", "glue/qqp", ("question1", "question2"), ("not_duplicate", "duplicate"),
             ("accuracy", "f1")),
    GlueTask("stsb", "glue/stsb", ("sentence1", "sentence2"), (), ("pearson", "spearman")),
    GlueTask("mnli", "glue/mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
             ("accuracy",), splits=("train", "validation_matched", "validation_mismatched",
                                    "test_matched", "test_mismatched")),
    GlueTask("qnli", "glue/qnli", ("question", "sentence"), _ENTAILMENT2, ("accuracy",)),
    GlueTask("rte", "glue/rte", ("sentence1", "sentence2"), _ENTAILMENT2, ("accuracy",)),
    # TFDS's WNLI order is the reverse of RTE/QNLI: 0 = not_entailment.
    GlueTask("wnli", "glue/wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), ("accuracy",)),
)}

IMDB = GlueTask("imdb", "imdb_reviews", ("text",), ("neg", "pos"), ("accuracy",),
                splits=("train", "test", "unsupervised"))


def glue_task(name):
    """The `GlueTask` of `name` (`"mrpc"` or `"glue/mrpc"`, any case).

    Example:
        >>> glue_task("glue/stsb").is_regression
        True

    Raises:
        KeyError: unknown task; the message lists the known ones.
    """
    key = name.lower().removeprefix("glue/")
    if key not in GLUE_TASKS:
        raise KeyError(f"Unknown GLUE task {name!r}; known tasks: {', '.join(sorted(GLUE_TASKS))}.")
    return GLUE_TASKS[key]


def load_glue(name, split, tokenizer, *, seq_length=128, batch_size=32, shuffle=None,
              static_shapes=False, bucket_boundaries=None, data_dir=None, seed=None):
    """One GLUE split as a batched dataset of `(x, y)`.

    Example:
        >>> dev = load_glue("mnli", "validation_matched", tokenizer, batch_size=64)  # TFDS download  # doctest: +SKIP

    Args:
        name: task name (`glue_task`).
        split: one of the task's `splits` (TFDS slicing such as
            `"train[:10%]"` works too).
        tokenizer: a `pipelines.BertTokenizer`.
        seq_length: maximum packed length (longer pairs are truncated
            longest-first, as original BERT).
        batch_size: examples per batch.
        shuffle: shuffle examples (buffer 10,000) and files; default: True for
            `"train"` splits only.
        static_shapes, bucket_boundaries: padding mode, see
            `pipelines.datasets.batching.batch`.
        data_dir: TFDS data directory (default: TFDS's own).
        seed: shuffle seed.

    Returns:
        `tf.data.Dataset` of `(x, y)`: `x` int32 `token_ids`, `segment_ids`,
        `padding_mask` `[batch, length]`; `y` int32 class ids `[batch]`
        (float32 scores for STS-B).
    """
    return _load(glue_task(name), split, tokenizer, seq_length=seq_length, batch_size=batch_size,
                 shuffle=shuffle, static_shapes=static_shapes, bucket_boundaries=bucket_boundaries,
                 data_dir=data_dir, seed=seed)


def load_imdb(split, tokenizer, *, seq_length=512, batch_size=32, shuffle=None,
              static_shapes=False, bucket_boundaries=None, data_dir=None, seed=None):
    """IMDB reviews (`imdb_reviews`, 0 = neg, 1 = pos) as a batched dataset of `(x, y)`.

    Reviews are long; `seq_length=512` keeps their beginning (truncation cuts
    the end). Arguments and output as `load_glue` (`split`: `"train"`,
    `"test"`, or `"unsupervised"`, labelled -1).

    Example:
        >>> test = load_imdb("test", tokenizer, seq_length=256)  # TFDS download  # doctest: +SKIP
    """
    return _load(IMDB, split, tokenizer, seq_length=seq_length, batch_size=batch_size,
                 shuffle=shuffle, static_shapes=static_shapes, bucket_boundaries=bucket_boundaries,
                 data_dir=data_dir, seed=seed)


def glue_texts(name, split, *, data_dir=None, shuffle=False, seed=None):
    """One GLUE split as raw text: an unbatched dataset of `(text, label)`, or
    `((text, text_b), label)` for pair tasks (what `bert_keras.tasks.TextClassifier` reads).

    Labels are the class NAMES (`label_names`, e.g. b"positive"), float scores for
    regression (STS-B): a classifier built with `labels=task.label_names` reads them.

    Example:
        >>> next(iter(glue_texts("sst2", "validation")))[0].dtype  # TFDS download  # doctest: +SKIP
        tf.string
    """
    task = glue_task(name)
    examples = _raw_examples(task, split, data_dir=data_dir, shuffle=shuffle, seed=seed)
    if task.is_regression:
        return examples
    names = tf.constant(task.label_names)
    # Test splits have no labels (-1): an empty name there.
    return examples.map(lambda text, label: (text, tf.where(label >= 0, tf.gather(names, tf.maximum(label, 0)),
                                                            "")),
                        num_parallel_calls=tf.data.AUTOTUNE)


def _raw_examples(task, split, *, data_dir, shuffle, seed):
    import tensorflow_datasets as tfds  # only loading needs it

    base_split = split.split("[")[0]
    if base_split not in task.splits:
        raise ValueError(f"{task.tfds_name} has no split {split!r}; splits: {', '.join(task.splits)}.")
    dataset = tfds.load(task.tfds_name, split=split, data_dir=data_dir, shuffle_files=shuffle)
    if shuffle:
        dataset = dataset.shuffle(10_000, seed=seed)
    label_dtype = tf.float32 if task.is_regression else tf.int32

    def to_texts(example):
        texts = tuple(example[field] for field in task.text_fields)
        return texts if len(texts) == 2 else texts[0], tf.cast(example["label"], label_dtype)

    return dataset.map(to_texts, num_parallel_calls=tf.data.AUTOTUNE)


def _load(task, split, tokenizer, *, seq_length, batch_size, shuffle: Optional[bool],
          static_shapes, bucket_boundaries, data_dir, seed):
    base_split = split.split("[")[0]
    if shuffle is None:
        shuffle = base_split == "train"
    examples = _raw_examples(task, split, data_dir=data_dir, shuffle=shuffle, seed=seed)
    examples = examples.map(lambda text, label: (text if isinstance(text, tuple) else (text,), label))
    examples = batching.encode_texts(examples, tokenizer, seq_length=seq_length)
    return batching.batch(examples, batch_size, seq_length=seq_length, static_shapes=static_shapes,
                          bucket_boundaries=bucket_boundaries).prefetch(tf.data.AUTOTUNE)
