"""`pipelines.windowing`: the sliding windows of every family, against run_squad.py's own loops.

The reference functions below are google-research/bert `run_squad.py`'s doc-span loop and
`_check_is_max_context`, transcribed; the vectorised windows must agree with them on every
size, and SQuAD features (`build_squad_features`) must keep exactly those windows.
"""

import collections
import os

import numpy as np
import pytest

from pipelines import windowing
from run_squad_reference import reference_is_max_context, reference_spans
from pipelines.datasets import conll, squad


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    """The real uncased BERT vocabulary (all-MiniLM-L6-v2's)."""
    from pipelines import BertTokenizer

    return BertTokenizer(os.path.join(minilm_dir, "vocab.txt"), lowercase=True)


def test_spans_and_max_context_equal_run_squad_on_every_small_size():
    for num_tokens in range(0, 41):
        for window in range(1, 13):
            for stride in range(1, 15):
                spans = reference_spans(num_tokens, window, stride)
                starts, lengths = windowing.window_spans(num_tokens, window, stride)
                assert list(zip(starts.tolist(), lengths.tolist())) == spans
                best = windowing.max_context_windows(num_tokens, window, stride)
                for t in range(num_tokens):
                    assert reference_is_max_context(spans, int(best[t]), t), (num_tokens, window, stride, t)


def test_stride_is_the_step_between_window_starts():
    starts, lengths = windowing.window_spans(1000, window=126, stride=63)
    assert np.all(np.diff(starts) == 63) and starts[-1] + lengths[-1] == 1000
    assert len(starts) == windowing.num_windows(1000, 126, 63) == 1 + -(-(1000 - 126) // 63)
    # Overlap = window - stride; a stride above the window acts as the window (no gap).
    wide, _ = windowing.window_spans(1000, window=126, stride=500)
    assert np.all(np.diff(wide) == 126)
    with pytest.raises(ValueError, match="stride"):
        windowing.window_spans(10, window=4, stride=0)


def test_a_batch_of_texts_gives_flat_windows_and_one_max_context_window_per_token():
    lengths, window, stride = [0, 3, 50, 17, 200], 8, 3
    windows = windowing.Windows.of(lengths, window=window, stride=stride, max_length=100)
    assert windows.truncated.tolist() == [False, False, False, False, True]
    assert windows.num_kept.tolist() == [0, 3, 50, 17, 100]
    # A text's windows are consecutive, in order, and equal the one-text windows.
    for d, n in enumerate(windows.num_kept):
        rows = slice(windows.window_splits[d], windows.window_splits[d + 1])
        assert (windows.document[rows] == d).all()
        starts, spans = windowing.window_spans(int(n), window, stride)
        assert windows.start[rows].tolist() == starts.tolist()
        assert windows.length[rows].tolist() == spans.tolist()
        best = windowing.max_context_windows(int(n), window, stride) + windows.window_splits[d]
        tokens = windows.token_window[windows.token_splits[d]:windows.token_splits[d + 1]]
        assert tokens[:n].tolist() == best.tolist() and (tokens[n:] == -1).all()
    # Every kept token is at its max context in exactly one window position.
    assert windows.is_max_context.sum() == windows.num_kept.sum()
    flat = np.arange(sum(lengths)) * 10
    taken = windows.take(flat, pad=-7)
    assert taken.shape == (len(windows), window)
    assert (taken[windows.length[:, None] <= np.arange(window)] == -7).all()
    back = windows.per_token(taken, fill=-1)
    kept = windows.token_window >= 0
    assert (back[kept] == flat[kept]).all() and (back[~kept] == -1).all()
    # Per-window values with a trailing dimension (a model's logits) come back the same way.
    logits = np.stack([taken, -taken], axis=-1).astype(np.float32)
    assert windows.per_token(logits).shape == (sum(lengths), 2)


def test_a_tiny_stride_on_a_long_text_is_chunked_and_still_exact():
    best = windowing.max_context_windows(20_000, window=510, stride=1)
    # Stride 1: a token (away from the ends) is central in the window centred on it: 255
    # tokens left, 254 right, or 254 / 255 (a tie: the first window wins).
    assert best[5000] == 5000 - 255 and np.all(np.diff(best) >= 0)
    spans = reference_spans(20_000, 510, 1)
    for t in (0, 300, 8223, 8224, 8225, 16_500, 19_999):  # around the chunk edges too
        assert reference_is_max_context(spans, int(best[t]), t)


def test_squad_features_keep_run_squads_windows(tokenizer):
    context = " ".join(["The oil crisis began in October 1973, when OPEC proclaimed an embargo."] * 12)
    examples = squad.examples_from_records(
        [dict(id="q", question="When did the oil crisis begin?", context=context, title="",
              answers=[{"text": "October 1973", "answer_start": 24}], is_impossible=False)],
        is_training=False, version="1.1")
    features = squad.build_squad_features(examples, tokenizer, is_training=False, max_seq_length=64,
                                          stride=20, max_query_length=16)
    num_context = int((features.token_char_spans[0, :, 0] >= 0).sum())
    offset = int(features.context_offset[0])
    total = int(features.window_start[-1]) + int((features.token_char_spans[-1, :, 0] >= 0).sum())
    spans = reference_spans(total, num_context, 20)
    assert len(features) == len(spans) > 5
    assert features.window_start.tolist() == [s for s, _ in spans]
    for w, (start, length) in enumerate(spans):
        expected = [reference_is_max_context(spans, w, start + j) for j in range(length)]
        assert features.token_is_max_context[w, offset:offset + length].tolist() == expected


# -- NER windows (conll.encode_sentences / word_scores) ----------------------------------------

LABELS = conll.CONLL2003_NER_LABELS


def long_sentence():
    """All of conll2003_mini.txt's sentences as one document (IOB2), three times."""
    path = os.path.join(os.path.dirname(__file__), "..", "data", "tasks", "conll2003_mini.txt")
    words, tags = [], []
    for sentence in conll.read_conll(path) * 3:
        words += sentence.words
        tags += conll.convert_tags(sentence.tags, "IOB1", "IOB2")
    return conll.Sentence(words, tags, "doc")


def test_windows_label_each_word_once_where_it_is_predicted(tokenizer):
    doc, short = long_sentence(), conll.Sentence(["Peter", "visits"], ["B-PER", "O"])
    for label_all in (False, True):
        features = conll.encode_sentences([short, doc], tokenizer, LABELS, seq_length=10, max_length=1000,
                                          stride=3, label_all_tokens=label_all)
        assert features.document.tolist()[:2] == [0, 1] and features.truncated.tolist() == [False, False]
        assert features.words_read.tolist() == [2, len(doc.words)]
        rows = features.document == 1
        labelled = features.labels[rows] != conll.IGNORE_LABEL
        words = features.word_ids[rows][labelled]
        if not label_all:  # each word once, on its first piece, in its max-context window
            assert sorted(words.tolist()) == list(range(len(doc.words)))
            assert (features.is_max_context[rows][labelled]).all()
            assert [LABELS[i] for i in features.labels[rows][labelled]] == doc.tags
        else:  # the pieces of a word are labelled in one window: its first piece's max-context one
            rows_of_word = collections.defaultdict(set)
            for row, position in zip(*np.nonzero(labelled)):
                rows_of_word[int(features.word_ids[rows][row, position])].add(int(row))
            assert sorted(rows_of_word) == list(range(len(doc.words)))
            assert all(len(r) == 1 for r in rows_of_word.values())
    # [CLS] window [SEP]: a window may start inside a word (exact piece boundaries).
    assert (features.token_ids[:, 0] == tokenizer.special_tokens.cls).all()
    ends = features.padding_mask.sum(axis=1) - 1
    assert (features.token_ids[np.arange(len(features)), ends] == tokenizer.special_tokens.sep).all()


def test_default_is_one_window_per_sentence_and_truncation_is_reported(tokenizer):
    doc = long_sentence()
    features = conll.encode_sentences([doc], tokenizer, LABELS, seq_length=16)
    assert len(features) == 1 and features.num_truncated == 1 and features.truncated.tolist() == [True]
    assert features.words_read[0] == len(set(features.word_ids[0][features.word_ids[0] >= 0].tolist()))
    capped = conll.encode_sentences([doc], tokenizer, LABELS, seq_length=16, max_length=40, stride=7)
    assert capped.truncated.tolist() == [True] and int(capped.is_max_context.sum()) == 40
    with pytest.raises(ValueError, match="stride 20 exceeds the window"):
        conll.encode_sentences([doc], tokenizer, LABELS, seq_length=16, max_length=40, stride=20)


def test_word_scores_take_each_word_from_its_max_context_window(tokenizer):
    doc = long_sentence()
    features = conll.encode_sentences([doc, doc], tokenizer, LABELS, seq_length=9, max_length=1000, stride=2)
    rng = np.random.default_rng(0)
    scores = rng.normal(size=features.token_ids.shape + (len(LABELS),))
    for strategy in conll.STRATEGIES:
        got = conll.word_scores(scores, features, strategy)
        assert [len(g) for g in got] == [len(doc.words)] * 2
        # Reference: gather each piece from its max-context window, word by word.
        pieces = collections.defaultdict(list)
        for w, p in zip(*np.nonzero(features.is_max_context)):
            word = features.word_ids[w, p]
            if word >= 0:
                pieces[(int(features.document[w]), int(word))].append(
                    (int(features.window_start[w]) + p, scores[w, p]))
        for (d, word), rows in pieces.items():
            values = np.stack([v for _, v in sorted(rows, key=lambda r: r[0])])
            expected = {"first": values[0], "average": values.mean(0), "max": values.max(0)}[strategy]
            np.testing.assert_allclose(got[d][word], expected, rtol=1e-12)


def test_pipelines_reuse_the_tokenizers_traced_map_steps_and_read_the_same(tokenizer):
    # Every fit / evaluate / predict builds a new pipeline; its tokenize-window-pack step is the
    # tokenizer's kept trace (one per settings and input signature), not a new trace per pipeline,
    # and a pipeline with other settings gets its own step, not a stale one.
    import tensorflow as tf

    from pipelines.datasets import batching

    class Uncached:  # the tokenizer's methods without its cache: every map traced as given
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            if name == "pipeline_function":
                raise AttributeError(name)
            return getattr(self.inner, name)

    def windows(tok, texts, stride):
        dataset = tf.data.Dataset.from_tensor_slices(((texts,), list(range(len(texts)))))
        encoded = batching.encode_text_windows(dataset, tok, seq_length=16, stride=stride, max_length=60)
        return [(x["token_ids"].numpy().tolist(), int(y), {k: int(v) for k, v in marks.items()})
                for x, y, marks in encoded]

    long_text = " ".join(["lighthouse keepers count the ships at night"] * 4)
    for texts in (["a short one", long_text], [long_text, "another", "and a third text"]):
        for stride in (4, 7):
            assert windows(tokenizer, texts, stride) == windows(Uncached(tokenizer), texts, stride)
    step = tokenizer.pipeline_function(("encode_text_windows", 16, 4, 60, False), None)
    assert step.experimental_get_tracing_count() == 1
    assert windows(tokenizer, [long_text], 4) != windows(tokenizer, [long_text], 7)


def test_encoders_read_now_give_the_streamed_elements_without_the_tokenizer_in_the_pipeline(tokenizer,
                                                                                           monkeypatch):
    # `read_now` (predict / evaluate of texts in memory) encodes the rows at once with eager calls
    # of the kept step: the same elements and element spec as the streamed map, in chunks of any
    # size (one trace), with no tokenizer op left for a new iterator to instantiate; past the
    # value budget it streams.
    import tensorflow as tf

    from pipelines.datasets import batching

    monkeypatch.setattr(batching, "ENCODE_CHUNK", 2)  # 5 rows: chunks of 2, 2 and 1
    long_text = " ".join(["lighthouse keepers count the ships at night"] * 4)
    texts = ["a short one", long_text, "", "ünïcode and 한국어 too", long_text + " and more"]
    labels = [0, 1, 2, 3, 4]
    singles = tf.data.Dataset.from_tensor_slices(((texts,), labels))
    pairs = tf.data.Dataset.from_tensor_slices(((texts, texts[::-1]), labels))
    encoders = {
        "pairs": lambda read_now: batching.encode_texts(pairs, tokenizer, seq_length=24, read_now=read_now),
        "windows": lambda read_now: batching.encode_text_windows(
            singles, tokenizer, seq_length=16, stride=5, max_length=60, read_now=read_now),
        "training windows": lambda read_now: batching.encode_text_windows(
            singles, tokenizer, seq_length=16, stride=5, max_length=60, training=True, read_now=read_now),
        "documents": lambda read_now: batching.encode_text_documents(
            singles, tokenizer, seq_length=16, stride=5, max_length=60, read_now=read_now),
    }

    def elements(dataset):
        return [tf.nest.map_structure(lambda v: v.numpy().tolist(), element) for element in dataset]

    def runs_the_tokenizer(dataset):
        return b"FastWordpiece" in dataset._as_serialized_graph().numpy()

    for name, encode in encoders.items():
        streamed, read = encode(False), encode(True)
        assert read.element_spec == streamed.element_spec, name
        assert elements(read) == elements(streamed), name
        assert runs_the_tokenizer(streamed) and not runs_the_tokenizer(read), name
    step = tokenizer.pipeline_function(("encode_text_windows", 16, 5, 60, False), None)
    assert step.experimental_get_tracing_count() == 1  # chunks of 2 and 1, streamed and read: one trace

    monkeypatch.setattr(batching, "READ_NOW_MAX_VALUES", 100)
    over_budget = encoders["windows"](True)
    assert runs_the_tokenizer(over_budget)
    assert elements(over_budget) == elements(encoders["windows"](False))


def test_a_tokenizer_keeps_its_most_recently_used_map_steps_only(tokenizer, monkeypatch):
    # A process that predicts with ever new settings keeps a bounded number of traced steps:
    # the least recently used key goes first, a key used again is kept, an evicted key is rebuilt.
    import tensorflow as tf

    from pipelines.tokenizer import bert_tokenizer

    monkeypatch.setattr(bert_tokenizer, "PIPELINE_STEPS_KEPT", 3)
    made = []

    def step_for(key):
        def step(x):
            return x + key[1]
        made.append(key)
        return tokenizer.pipeline_function(key, step)

    first = step_for(("bounded test", 1))
    step_for(("bounded test", 2))
    step_for(("bounded test", 3))
    assert tokenizer.pipeline_function(("bounded test", 1), None) is first  # used again: newest
    step_for(("bounded test", 4))  # evicts 2, the least recently used
    kept = [key for key in tokenizer._eager_functions.pipeline_steps if key[0] == "bounded test"]
    assert kept == [("bounded test", 3), ("bounded test", 1), ("bounded test", 4)]
    rebuilt = step_for(("bounded test", 2))
    assert int(rebuilt(tf.constant(40))) == 42 and ("bounded test", 3) not in \
        tokenizer._eager_functions.pipeline_steps
