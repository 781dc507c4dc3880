"""Long documents in `TokenClassifier` (issue 23): windows, max context, truncation reported.

The documents are real text: `pipelines/data/sample_corpus.txt` (a few thousand words of
plain prose, one sentence a line) with the CoNLL-2003 sentences of
`tests/data/tasks/conll2003_mini.txt` (and their real entities) between its paragraphs,
as one CoNLL-style document of words and IOB2 tags. The model is a small random encoder
(2 layers, H=32, `initializer_range=0.2`: context changes a logit by 0.5 or more, float32
noise between batch shapes stays near 1e-6) on the
real uncased BERT vocabulary; `slow` repeats the exactness check with the real
all-MiniLM-L6-v2 weights.
"""

import os
import re

import numpy as np
import pytest

from bert_keras import tasks
from bert_keras.tasks import token_classifier
from bert_keras.finetuned_model import read_finetuned
from pipelines.datasets import conll

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LABELS = list(conll.CONLL2003_NER_LABELS)
SEQ_LENGTH = 64  # windows of 62 word pieces


def real_document():
    """(words, IOB2 tags): the sample corpus, a CoNLL sentence after every 20 of its lines."""
    with open(os.path.join(ROOT, "pipelines", "data", "sample_corpus.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    conll_sentences = conll.read_conll(os.path.join(ROOT, "tests", "data", "tasks", "conll2003_mini.txt"))
    words, tags = [], []
    for i, line in enumerate(lines):
        line_words = re.findall(r"\w+|[^\w\s]", line)
        words += line_words
        tags += ["O"] * len(line_words)
        if i % 20 == 19:
            sentence = conll_sentences[(i // 20) % len(conll_sentences)]
            words += sentence.words
            tags += conll.convert_tags(sentence.tags, "IOB1", "IOB2")
    return words, tags


@pytest.fixture(scope="module")
def tagger(minilm_dir):
    import keras

    from bert_keras import models
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    vocab = os.path.join(minilm_dir, "vocab.txt")
    size = sum(1 for _ in open(vocab, encoding="utf-8"))
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(BertConfig(vocab_size=size, hidden_size=32, num_layers=2, num_heads=2,
                                     intermediate_size=64, max_position_embeddings=512,
                                     initializer_range=0.2))
    task = tasks.TokenClassifier(models.BertTokenClassifier(encoder, num_classes=len(LABELS)), labels=LABELS,
                                 vocab_file=vocab, seq_length=SEQ_LENGTH,
                                 settings={"max_length": 100_000, "stride": 31})
    task.predict(["Warm up: the tokenizer and the predict step trace once."])
    return task


@pytest.fixture(scope="module")
def document():
    words, tags = real_document()
    assert len(words) > 3000
    return words, tags


def test_every_word_of_a_long_document_gets_a_tag(tagger, document):
    words, tags = document
    text = " ".join(words)
    row, = tagger.predict([words])
    assert row["words"] == words and len(row["tags"]) == len(words) and set(row["tags"]) <= set(LABELS)
    assert row["truncated"] is False and row["words_read"] == len(words)
    for entity in row["entities"]:
        assert text[entity["start_char"]:entity["end_char"]] == entity["text"]
    # The same text as one raw string (split into the tokenizer's words: "U.S." is four).
    raw, = tagger.predict([text])
    assert len(raw["words"]) == len(raw["tags"]) == raw["words_read"] > len(words) and not raw["truncated"]
    for entity in raw["entities"]:
        assert text[entity["start_char"]:entity["end_char"]] == entity["text"]
    # evaluate scores every word (none truncated).
    metrics = tagger.score([words], [tags])
    assert metrics["num_examples"] == 1 and "num_truncated" not in metrics


def pieces_per_word(tagger, words):
    return np.diff(tagger.tokenizer.tokenize(words).row_splits.numpy())


def test_predictions_far_past_512_tokens_equal_those_of_the_same_window_alone(tagger, document):
    words = document[0]
    sentence = conll.Sentence(words, ["O"] * len(words))
    (logits,), features = tagger._word_logits([sentence], batch_size=32)
    assert logits.shape == (len(words), len(LABELS))
    counts = np.maximum(pieces_per_word(tagger, words), 1)
    word_start = np.concatenate([[0], np.cumsum(counts)])
    checked = 0
    for w in np.flatnonzero(features.window_start > 1500)[:6]:
        start, end = int(features.window_start[w]), int(features.window_start[w]) + SEQ_LENGTH - 2
        if start not in word_start or end not in word_start:
            continue  # this window starts or ends inside a word: no text of its own
        first, last = np.searchsorted(word_start, start), np.searchsorted(word_start, end)
        alone, = tagger._word_logits([conll.Sentence(words[first:last], ["O"] * (last - first))], 32)[0]
        central = [features.word_ids[w, p] for p in range(1, SEQ_LENGTH - 1)
                   if features.is_max_context[w, p] and word_start[features.word_ids[w, p]] == start + p - 1]
        assert central
        np.testing.assert_allclose(logits[central], alone[np.asarray(central) - first], atol=1e-5)
        # Context matters: the first word of the window, predicted from the window before, differs.
        assert np.abs(logits[first] - alone[0]).max() > 1e-3
        checked += 1
    assert checked >= 2


def test_an_entity_across_a_window_edge_comes_out_whole(tagger, document, monkeypatch):
    words = document[0]
    entity = ["Peter", "Kowalczyk"]
    peter, ko = (int(tagger.tokenizer.tokenize([w]).flat_values.numpy()[0]) for w in entity)

    def outputs(dataset):  # a stand-in model: B-PER on "peter", I-PER on "ko" (##wal ##cz ##yk), else O
        ids = np.concatenate([x["token_ids"].numpy() for x, _ in dataset])
        logits = np.zeros(ids.shape + (len(LABELS),), np.float32)
        logits[..., 0] = 1.0
        logits[ids == peter, LABELS.index("B-PER")] = 5.0
        logits[ids == ko, LABELS.index("I-PER")] = 5.0
        return logits

    monkeypatch.setattr(token_classifier, "predicted_outputs", lambda task, dataset: outputs(dataset))
    counts = np.maximum(pieces_per_word(tagger, words), 1)
    for cut in range(2000, 2080):  # the entity after `cut` words: find where its two words split windows
        doc = words[:cut] + entity + words[cut:]
        first_piece = int(counts[:cut].sum())
        features = tagger._features([conll.Sentence(doc, ["O"] * len(doc))])
        owner = [np.flatnonzero((features.is_max_context[:, 1:] &
                                 ((features.window_start[:, None] + np.arange(SEQ_LENGTH - 1)) == p)).any(1))
                 for p in (first_piece, first_piece + 1)]
        if owner[0][0] != owner[1][0]:
            break
    else:
        pytest.fail("no window edge between the two words")
    text = " ".join(doc)
    row, = tagger.predict([doc])
    found = [e for e in row["entities"] if e["type"] == "PER"]
    # Every "Peter Kowalczyk" of the document (the CoNLL sentence's and ours) comes out whole.
    expected = [i for i in range(len(doc) - 1) if doc[i:i + 2] == entity]
    assert cut in expected
    assert [(e["text"], e["start_word"], e["end_word"]) for e in found] == [
        ("Peter Kowalczyk", i, i + 1) for i in expected]
    ours, = (e for e in found if e["start_word"] == cut)
    assert ours["start_char"] == len(" ".join(words[:cut])) + 1
    assert text[ours["start_char"]:ours["end_char"]] == "Peter Kowalczyk"


def test_truncation_is_reported_and_settings_round_trip(tagger, document, tmp_path):
    words = document[0]
    text = " ".join(words)
    row, = tagger.predict([text], max_length=200)  # a per-call override
    assert row["truncated"] is True and 0 < row["words_read"] < 200 < len(words)
    assert len(row["tags"]) == len(row["words"]) and set(row["tags"][row["words_read"]:]) == {"O"}
    assert all(e["end_word"] < row["words_read"] for e in row["entities"])
    assert "truncated: only the first" in tagger.row_text({"text": text, **row})
    short, = tagger.predict(["Peter Kowalczyk visits Lambeth."], max_length=200)
    assert short["truncated"] is False and short["words_read"] == 5
    # The settings' own max_length is back after the call; evaluate reports truncation too.
    assert tagger.window_options() == (SEQ_LENGTH - 2, 31, 100_000)
    saved = tagger.save(str(tmp_path / "ner"))
    settings = read_finetuned(saved, load_model=False).settings
    assert settings["max_length"] == 100_000 and settings["stride"] == 31
    one_window = tasks.TokenClassifier.from_pretrained(saved, max_length=62, stride=20)
    assert one_window.settings["max_length"] == 62
    assert one_window.score([words], [document[1]])["num_truncated"] == 1
    with pytest.raises(tasks.TaskInputError, match="stride 70 exceeds the window"):
        one_window.predict([text], stride=70)


def test_fit_trains_on_every_window_of_a_long_document(tagger, document):
    words, tags = document
    sentences = [conll.Sentence(words, tags)]
    features = tagger._features(sentences)
    dataset, steps = tagger._train_dataset([words], [tags], batch_size=16, shuffle=False, seed=0,
                                           sample_weight=[2.0])
    assert steps == -(-len(features) // 16) and len(features) > 50
    x, y, weights = next(iter(dataset))
    assert x["token_ids"].shape[0] == 16 and set(weights.numpy().tolist()) == {2.0}
    # Every word is labelled once over all windows.
    assert int((features.labels != conll.IGNORE_LABEL).sum()) == len(words)


@pytest.mark.slow
def test_real_minilm_weights_predict_words_past_512_tokens_as_in_their_own_window(minilm_dir):
    words = real_document()[0]
    tagger = tasks.TokenClassifier.from_pretrained(f"hf:{minilm_dir}", labels=LABELS, seq_length=128,
                                                   max_length=100_000, stride=64)
    (logits,), features = tagger._word_logits([conll.Sentence(words, ["O"] * len(words))], 32)
    counts = np.maximum(pieces_per_word(tagger, words), 1)
    word_start = np.concatenate([[0], np.cumsum(counts)])
    checked = 0
    for w in np.flatnonzero(features.window_start > 2000):
        start, end = int(features.window_start[w]), int(features.window_start[w]) + 126
        if start in word_start and end in word_start:
            first, last = np.searchsorted(word_start, start), np.searchsorted(word_start, end)
            alone, = tagger._word_logits([conll.Sentence(words[first:last], ["O"] * (last - first))], 32)[0]
            central = sorted({int(features.word_ids[w, p]) for p in range(1, 127) if features.is_max_context[w, p]
                              and word_start[features.word_ids[w, p]] == start + p - 1})
            np.testing.assert_allclose(logits[central], alone[np.asarray(central) - first], atol=1e-5)
            checked += 1
            if checked == 2:
                break
    assert checked == 2
