"""Korean NER with a vocabulary of morphemes as words (`pre_tokenizer="kiwi"`, docs/korean.md (c)).

Tags are given per word as the user sees them ("서울시에서" B-LOC); the tokenizer splits each
word into morphemes (서울시 + 에서). The export reads text the client split (`bert-keras query
--pre-tokenizer kiwi`, `serving.text_requests.split_morphemes`), where every morpheme is a word
of its own: so `fit` trains each later morpheme with the continuation tag, and the served
entities are whole words at the raw text's offsets, as `predict`'s. Tiny random models: the
offsets and the alignment are checked, not accuracy.
"""

import os

import sys

import pytest

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "korean")
VOCAB = os.path.join(DATA, "koelectra_vocab.txt")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
WORDS = [["김철수는", "서울시에서", "일한다", "."], ["이영희가", "부산에", "갔다"]]
TAGS = [["B-PER", "B-LOC", "O", "O"], ["B-PER", "B-LOC", "O"]]


def kiwi_tokenizer():
    from pipelines import BertTokenizer

    pytest.importorskip("kiwipiepy")
    return BertTokenizer(VOCAB, lowercase=True, strip_accents=False, pre_tokenizer="kiwi")


def tiny_kiwi_checkpoint(tmp_path, hidden_size=16, intermediate_size=16, max_position_embeddings=32):
    """`hf:` spec of a random one-layer encoder whose vocabulary records kiwi (morphemes as words)."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    config = BertConfig(vocab_size=sum(1 for _ in open(VOCAB, encoding="utf-8")), hidden_size=hidden_size,
                        num_layers=1, num_heads=2, intermediate_size=intermediate_size,
                        max_position_embeddings=max_position_embeddings)
    directory = str(tmp_path / "bert")
    save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=VOCAB,
                    tokenizer_settings={"lowercase": True, "strip_accents": False, "pre_tokenizer": "kiwi"})
    return f"hf:{directory}"


def test_later_morphemes_of_a_word_are_trained_with_the_continuation_tag():
    """"서울시에서" B-LOC is 서울시 + 에서: 에서 starts a word where the export reads the split text,
    and was trained on nothing (-100), so the served model tagged it at random ("에서" PER beside
    "서울시" LOC). Now it carries I-LOC (an O word's morphemes O); `##` pieces stay unlabelled."""
    from pipelines.datasets.conll import Sentence, encode_sentences

    tokenizer = kiwi_tokenizer()
    sentence = Sentence(WORDS[0] + ["뷁뷁스키에게"], TAGS[0] + ["B-PER"])
    features = encode_sentences([sentence], tokenizer, LABELS, seq_length=32)
    n = int(features.padding_mask[0].sum())
    pieces = [tokenizer.id_to_token(int(i)) for i in features.token_ids[0][:n]]
    assert pieces == ["[CLS]", "김", "##철", "##수", "는", "서울시", "에서", "일", "한다", ".",
                      "뷁", "##뷁", "##스키", "에게", "[SEP]"]
    tag = {None: -100, **{name: i for i, name in enumerate(LABELS)}}
    assert features.labels[0][:n].tolist() == [tag[t] for t in (
        None, "B-PER", None, None, "I-PER", "B-LOC", "I-LOC", "O", "O", "O", "B-PER", None, None, "I-PER", None)]
    assert features.word_ids[0][:n].tolist() == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 4, 4, -1]

    # the tf.data preprocessor (`TokenClassifier.preprocessor`) labels the same pieces
    import tensorflow as tf

    from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor

    preprocessor = TokenClassifierPreprocessor(tokenizer, seq_length=32, labels=LABELS)
    x, y = preprocessor(tf.ragged.constant([sentence.words]), tf.ragged.constant([sentence.tags]))
    assert x["token_ids"].numpy()[0][:n].tolist() == features.token_ids[0][:n].tolist()
    assert y.numpy()[0][:n].tolist() == features.labels[0][:n].tolist()


def test_words_are_split_into_morphemes_in_their_text_as_the_export_s_clients_split_it():
    """kiwi analyses a word alone otherwise than in its sentence ("심오한" alone is one morpheme, in
    "심오한 영화" 심오 + 한; "왜케" the other way round: 4% of NSMC's words). Each word was tokenized
    alone, at `fit` and `predict`, while `split_morphemes` (and every other task) splits the whole
    text: the tagger trained and predicted on other pieces than its export was sent. Now the pieces
    of a text's words are the pieces of the text, for raw texts and for word lists."""
    from pipelines.datasets.conll import Sentence, encode_sentences, split_words

    tokenizer = kiwi_tokenizer()
    texts = ["왜케 재미없어지냐", "심오한 영화는 서울시에서 봤다."]
    whole = tokenizer.tokenize(texts).to_list()
    split = split_words(texts, tokenizer)
    for spans in (split, None):  # raw texts (the words split_words makes of them); word lists
        if spans is None:
            words = [text.split() for text in texts]
            whole = tokenizer.tokenize([" ".join(w) for w in words]).to_list()
        else:
            words = [w for w, _, _ in split]
            spans = [(text, starts, ends) for text, (_, starts, ends) in zip(texts, split)]
        features = encode_sentences([Sentence(w, ["O"] * len(w)) for w in words], tokenizer, LABELS,
                                    seq_length=32, spans=spans)
        for row, want in zip(range(len(texts)), whole):
            n = int(features.padding_mask[row].sum())
            assert features.token_ids[row][1:n - 1].tolist() == want
    assert [tokenizer.id_to_token(i) for i in whole[1][:4]] == ["심", "##오", "한", "영화"]  # 심오 + 한



def test_the_tf_data_preprocessor_splits_words_in_their_text_as_fit_does():
    """`TokenClassifierPreprocessor` (a `tf.data` map, `fit` of a dataset) ran kiwi on each word
    alone, where `encode_sentences` (`fit` of lists) and the export's clients split the whole text:
    "심오한" alone stays whole, in "심오한 영화는 ..." it is 심오 + 한, so the two paths trained
    other pieces (and labels) for the same sentence. Both now split the text in context."""
    import tensorflow as tf

    from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor
    from pipelines.datasets.conll import Sentence, encode_sentences

    tokenizer = kiwi_tokenizer()
    sentences = [Sentence(["심오한", "영화는", "서울시에서", "봤다."], ["O", "O", "B-LOC", "O"]),
                 Sentence(["왜케", "재미없어지냐"], ["O", "O"]), Sentence(WORDS[0], TAGS[0])]
    alone = tokenizer.tokenize(["심오한"]).to_list()[0]
    assert [tokenizer.id_to_token(i) for i in alone] != ["심", "##오", "한"]  # the word alone: otherwise
    features = encode_sentences(sentences, tokenizer, LABELS, seq_length=32)
    preprocessor = TokenClassifierPreprocessor(tokenizer, seq_length=32, labels=LABELS)
    words, tags = tf.ragged.constant([s.words for s in sentences]), tf.ragged.constant([s.tags for s in sentences])
    x, y = preprocessor(words, tags)
    width = x["token_ids"].shape[1]
    assert [tokenizer.id_to_token(int(i)) for i in x["token_ids"][0][1:4]] == ["심", "##오", "한"]
    assert x["token_ids"].numpy().tolist() == features.token_ids[:, :width].tolist()
    assert y.numpy().tolist() == features.labels[:, :width].tolist()
    for start, (x, y) in zip((0, 2), tf.data.Dataset.from_tensor_slices((words, tags)).batch(2).map(preprocessor)):
        width, rows = x["token_ids"].shape[1], slice(start, start + 2)
        assert x["token_ids"].numpy().tolist() == features.token_ids[rows, :width].tolist()
        assert y.numpy().tolist() == features.labels[rows, :width].tolist()



def test_an_unknown_tag_is_minus_one_with_a_morpheme_tokenizer_as_without():
    """With a kiwi tokenizer, a tag not in `labels` (id -1) crashed the preprocessor inside
    `tf.data` (`indices[4] = -1 is not in [0, 5)`, from the continuation tag's lookup; naming no
    tag, and on a GPU silently tag 0). It is now -1 as without a morpheme analyzer (on the word's
    first piece, and on its later morphemes: their continuation of an unknown tag)."""
    import tensorflow as tf

    from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor
    from pipelines import BertTokenizer

    words = tf.ragged.constant([WORDS[0]])
    known, unknown = tf.ragged.constant([TAGS[0]]), tf.ragged.constant([["B-PER", "B-XXX", "O", "O"]])
    plain = TokenClassifierPreprocessor(BertTokenizer(VOCAB, lowercase=True, strip_accents=False),
                                        seq_length=32, labels=LABELS)
    _, y_plain = plain(words, unknown)
    assert -1 in y_plain.numpy()[0].tolist()  # the rule without an analyzer: -1 on the word's first piece
    preprocessor = TokenClassifierPreprocessor(kiwi_tokenizer(), seq_length=32, labels=LABELS)
    x, y_known = preprocessor(words, known)
    pieces = [preprocessor.tokenizer.id_to_token(int(i)) for i in x["token_ids"][0][:8]]
    assert pieces == ["[CLS]", "김", "##철", "##수", "는", "서울시", "에서", "일"]
    for y in (preprocessor(words, unknown)[1],
              next(iter(tf.data.Dataset.from_tensor_slices((words, unknown)).batch(1).map(preprocessor)))[1]):
        expected = y_known.numpy()[0].tolist()
        expected[5:7] = [-1, -1]  # 서울시 + 에서 (B-LOC, I-LOC when known)
        assert y.numpy()[0].tolist() == expected


@pytest.mark.slow
def test_served_entities_of_split_text_are_predicts_whole_words_in_the_raw_text(tmp_path):
    """`predict` on raw Korean text and the export queried with kiwi-split text (`split_morphemes`
    + `restore_offsets`, what `bert-keras query --pre-tokenizer kiwi` does) give the same
    entities: whole words ("서울시에서", not "서울시" + "에서" of other types), at offsets into
    the raw text (`text[start:end] == entity`)."""
    pytest.importorskip("kiwipiepy")
    import keras
    import tensorflow as tf

    from bert_keras.tasks import TokenClassifier
    from serving.text_requests import restore_offsets, split_morphemes

    keras.utils.set_random_seed(0)
    checkpoint = tiny_kiwi_checkpoint(tmp_path, hidden_size=32, intermediate_size=37, max_position_embeddings=64)
    tagger = TokenClassifier.from_pretrained(checkpoint, labels=LABELS, seq_length=32,
                                             learning_rate=1e-2, warmup_ratio=0.0)
    tagger.fit(WORDS * 8, TAGS * 8, epochs=8, batch_size=8, verbose=0)
    texts = ["김철수는 서울시에서 일한다.", "이영희가 부산에 갔다"]
    predicted = [[(e["text"], e["type"], e["start_char"], e["end_char"]) for e in row["entities"]]
                 for row in tagger.predict(texts)]
    assert predicted == [[("김철수는", "PER", 0, 4), ("서울시에서", "LOC", 5, 10)],
                         [("이영희가", "PER", 0, 4), ("부산에", "LOC", 5, 8)]]

    with pytest.warns(UserWarning, match="--pre-tokenizer kiwi"):
        tagger.export_result(str(tmp_path / "models"), "ner", check=False, warmup_requests=0)
    serve = tf.saved_model.load(str(tmp_path / "models" / "ner" / "1")).signatures["serving_default"]
    raw = {"text": texts}
    sent, char_maps = split_morphemes(raw, "kiwi")
    assert sent["text"][0] == "김철수 는 서울시 에서 일 한다 ."
    outputs = restore_offsets({k: v.numpy() for k, v in serve(text=tf.constant(sent["text"])).items()},
                              raw, sent, char_maps)
    served = [[(outputs["entity_text"][i][j].decode(), outputs["entity_label"][i][j].decode(),
                int(outputs["start_char"][i][j]), int(outputs["end_char"][i][j]))
               for j in range(int(outputs["num_entities"][i]))] for i in range(len(texts))]
    assert served == predicted
    for text, row in zip(texts, served):
        assert all(text[start:end] == entity for entity, _, start, end in row)


def test_a_kiwi_model_without_kiwipiepy_names_its_vocabulary_and_what_to_install(tmp_path, monkeypatch):
    """A tagger whose vocabulary records kiwi, on a machine without the Korean extra: the error said
    `pre_tokenizer="kiwi" needs the Korean extra`, a flag the user never passed. It now names the
    task, the vocabulary that records the analyzer and the package to install."""
    from bert_keras.tasks import TokenClassifier
    from pipelines.environment import MissingDependencyError

    checkpoint = tiny_kiwi_checkpoint(tmp_path)
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)  # as if not installed
    with pytest.raises(MissingDependencyError) as caught:
        TokenClassifier.from_pretrained(checkpoint, labels=LABELS, seq_length=16).predict(["서울시에서"])
    message = str(caught.value)
    assert message.startswith("this TokenClassifier reads text split by 'kiwi' (its vocabulary "
                              f"{checkpoint.removeprefix('hf:')}/vocab.txt holds morphemes as words")
    assert 'pip install "bert-keras[korean]"' in message


IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def test_iobes_words_split_into_morphemes_keep_one_entity_each():
    """With IOBES tags a later morpheme got the word's own tag back ("서울시에서" S-LOC: 서울시 S-LOC,
    에서 S-LOC), so the export, which reads each morpheme as a word, answered two entities for one
    word (and an E-LOC word: E-LOC E-LOC, an entity of its last morpheme alone). A split S-X word is
    now B-X .. E-X, an E-X word I-X .. E-X, a B-X word B-X I-X ..: one entity, the word's; the tf.data
    preprocessor labels the same pieces."""
    import tensorflow as tf

    from bert_keras.metrics import get_entities
    from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor
    from pipelines.datasets.conll import Sentence, encode_sentences

    tokenizer = kiwi_tokenizer()
    words = ["김철수는", "서울시에서", "일한다", ".", "뷁뷁스키에게", "이영희가"]
    tags = ["S-PER", "S-LOC", "O", "O", "B-PER", "E-PER"]
    features = encode_sentences([Sentence(words, tags)], tokenizer, IOBES, seq_length=32)
    n = int(features.padding_mask[0].sum())
    pieces = [tokenizer.id_to_token(int(i)) for i in features.token_ids[0][:n]]
    assert pieces[:15] == ["[CLS]", "김", "##철", "##수", "는", "서울시", "에서", "일", "한다", ".",
                           "뷁", "##뷁", "##스키", "에게", "이영"]
    tag = {None: -100, **{name: i for i, name in enumerate(IOBES)}}
    labelled = [(p, IOBES[t]) for p, t in zip(pieces, features.labels[0][:n].tolist()) if t != -100]
    assert labelled == [("김", "B-PER"), ("는", "E-PER"), ("서울시", "B-LOC"), ("에서", "E-LOC"),
                        ("일", "O"), ("한다", "O"), (".", "O"), ("뷁", "B-PER"), ("에게", "I-PER"),
                        ("이영", "I-PER"), ("가", "E-PER")]
    # the export's entities over the morphemes are the words' entities
    assert get_entities([t for _, t in labelled]) == [("PER", 0, 1), ("LOC", 2, 3), ("PER", 7, 10)]
    preprocessor = TokenClassifierPreprocessor(tokenizer, seq_length=32, labels=IOBES)
    x, y = preprocessor(tf.ragged.constant([words]), tf.ragged.constant([tags]))
    width = x["token_ids"].shape[1]
    assert x["token_ids"].numpy().tolist() == features.token_ids[:, :width].tolist()
    assert y.numpy().tolist() == features.labels[:, :width].tolist()
    assert tag["S-PER"] not in y.numpy().tolist()[0]


def test_predict_gives_iobes_tags_to_words_whose_first_morpheme_reads_b(tmp_path):
    """A one-word IOBES entity split into morphemes is trained B-X .. E-X, so `predict`, which reads
    a word by its first morpheme, read it `B-LOC` (and a last word `I-PER`): tags of no IOBES file.
    The words' tags are now IOBES again (`S-LOC`, `E-PER`), the entities unchanged."""
    import numpy as np

    from bert_keras.tasks import TokenClassifier

    pytest.importorskip("kiwipiepy")
    checkpoint = tiny_kiwi_checkpoint(tmp_path)
    tagger = TokenClassifier.from_pretrained(checkpoint, labels=IOBES, seq_length=32)
    read = ["B-PER", "I-PER", "B-LOC", "O"]  # what each word's first morpheme answers
    word_logits = tagger._word_logits

    def first_morphemes(sentences, batch_size, spans=None):
        _, features = word_logits(sentences, batch_size, spans)
        return [np.eye(len(IOBES))[[IOBES.index(t) for t in read]]], features

    tagger._word_logits = first_morphemes
    row = tagger.predict(["김철수는 이영희가 서울시에서 일한다"])[0]
    assert row["tags"] == ["B-PER", "E-PER", "S-LOC", "O"]
    assert [(e["text"], e["type"]) for e in row["entities"]] == [("김철수는 이영희가", "PER"), ("서울시에서", "LOC")]


def test_distillation_reads_raw_texts_as_the_student_s_export_is_sent_them(tmp_path):
    """`distill` on raw texts (no tags) re-joined each text's words with spaces before the kiwi
    split: "됐어요. 소소한" read as "됐어요 . 소소한", which kiwi cuts otherwise (소 ##소한 there, 소
    ##소 한 here; 4% of NSMC's reviews): the student learned on other pieces than `fit`, `predict`
    and its export's clients read. The texts now stay as given."""
    from bert_keras.tasks import TokenClassifier

    pytest.importorskip("kiwipiepy")
    checkpoint = tiny_kiwi_checkpoint(tmp_path)
    tagger = TokenClassifier.from_pretrained(checkpoint, labels=LABELS, seq_length=32)
    text = "발견하게 됐어요. 소소한 일탈이"
    whole = tagger.tokenizer.tokenize([text]).to_list()[0]
    dataset, _ = tagger._distillation_dataset([text], None, batch_size=1, seed=0)
    x, _ = next(iter(dataset))
    n = int(x["padding_mask"][0].numpy().sum())
    assert x["token_ids"][0][1:n - 1].numpy().tolist() == whole


def test_a_word_that_is_not_utf8_is_read_as_without_kiwi_in_the_tf_data_preprocessor():
    """A word of cp949 bytes in a `tf.data` pipeline (a file read without decoding) crashed the kiwi
    preprocessor with a UnicodeDecodeError traceback from inside `tf.py_function`, while the same
    preprocessor without kiwi (and `BertTokenizer(pre_tokenizer="kiwi")` itself) reads it as [UNK].
    It is now read as without an analyzer, its tag on its [UNK]; the other words split in context."""
    import tensorflow as tf

    from bert_keras.tasks.preprocessor import TokenClassifierPreprocessor
    from pipelines import BertTokenizer

    words = tf.ragged.constant([["서울시에서".encode(), "한글".encode("cp949"), "일한다".encode()]])
    tags = tf.ragged.constant([["B-LOC", "B-PER", "O"]])
    tokenizer = kiwi_tokenizer()
    preprocessor = TokenClassifierPreprocessor(tokenizer, seq_length=16, labels=LABELS)
    for x, y in (preprocessor(words, tags),
                 next(iter(tf.data.Dataset.from_tensor_slices((words, tags)).batch(1).map(preprocessor)))):
        pieces = [tokenizer.id_to_token(int(i)) for i in x["token_ids"][0] if i != 0]
        assert pieces == ["[CLS]", "서울시", "에서", "[UNK]", "일", "한다", "[SEP]"]
        assert y.numpy()[0][:7].tolist() == [-100, 3, 4, 1, 0, 0, -100]
    plain = TokenClassifierPreprocessor(BertTokenizer(VOCAB, lowercase=True, strip_accents=False),
                                        seq_length=16, labels=LABELS)
    assert tokenizer.special_tokens.unk in plain(words, tags)[0]["token_ids"].numpy()[0].tolist()
