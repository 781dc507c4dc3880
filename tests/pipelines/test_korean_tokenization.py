"""Korean text through `BertTokenizer(strip_accents=False)`, against HF's `BertTokenizer`.

A Korean vocabulary holds whole syllables; the uncased rules of the original BERT NFD-decompose
every syllable into conjoining jamo, so Korean models are used with `lowercase=True,
strip_accents=False` (or cased). The reference no one here wrote: HF transformers'
`BertTokenizer(do_lower_case=..., strip_accents=False)`, with KoELECTRA's WordPiece vocabulary
(`tests/data/korean/koelectra_vocab.txt`, Apache-2.0, monologg/KoELECTRA `pretrain/vocab.txt`).

The texts are real: NSMC movie reviews and Korean Wikipedia paragraphs from `../shared/data/korean`
(a 600-line sample shipped in `tests/data/korean/korean_texts_sample.txt` when that is absent).
"""

import os
import unicodedata

import numpy as np
import pytest

from pipelines import BertTokenizer
from pipelines.tokenizer.char_offsets import byte_to_char_offsets

transformers = pytest.importorskip("transformers")

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "..", "data", "korean")
VOCAB = os.path.join(DATA, "koelectra_vocab.txt")
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data", "korean")
HF_MAX_CHARS = 100  # HF's WordPiece limit; ours defaults to the original's 200


def korean_texts():
    """5,000+ real texts: every 50th NSMC review and the first paragraphs of each Wikipedia file."""
    if not os.path.isdir(SHARED):
        with open(os.path.join(DATA, "korean_texts_sample.txt"), encoding="utf-8") as f:
            return f.read().splitlines()
    with open(os.path.join(SHARED, "nsmc", "ratings_train.txt"), encoding="utf-8") as f:
        reviews = [line.split("\t")[1] for line in f.read().splitlines()[1:]][::50]
    paragraphs = []
    pretrain = os.path.join(SHARED, "pretrain")
    for name in sorted(os.listdir(pretrain)):
        with open(os.path.join(pretrain, name), encoding="utf-8") as f:
            paragraphs += [line for line in f.read().splitlines() if line.strip()][:30]
    return reviews + paragraphs


TEXTS = korean_texts()


def hf_tokenizer(lowercase):
    return transformers.BertTokenizer(VOCAB, do_lower_case=lowercase, strip_accents=False)


def ours(lowercase, backend):
    return BertTokenizer(VOCAB, lowercase=lowercase, strip_accents=False, backend=backend,
                         max_input_chars_per_word=HF_MAX_CHARS)


def test_the_texts_are_many_and_korean():
    hangul = sum(any("\uac00" <= c <= "\ud7a3" for c in text) for text in TEXTS)
    assert len(TEXTS) >= (5000 if os.path.isdir(SHARED) else 600)
    assert hangul / len(TEXTS) > 0.95


@pytest.mark.parametrize("backend", ["tf_text", "core"])
@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
def test_ids_and_offsets_equal_hf(lowercase, backend):
    reference = hf_tokenizer(lowercase)(TEXTS, add_special_tokens=False, return_offsets_mapping=True)
    ids, begin, end = (t.to_list() for t in ours(lowercase, backend).tokenize_with_offsets(TEXTS))
    assert ours(lowercase, backend).tokenize(TEXTS).to_list() == ids  # the ids-only fast paths too
    mismatched = [i for i, want in enumerate(reference["input_ids"]) if ids[i] != want]
    assert not mismatched, (TEXTS[mismatched[0]], ids[mismatched[0]], reference["input_ids"][mismatched[0]])
    for row, text in enumerate(TEXTS):
        chars = byte_to_char_offsets(text)
        spans = list(zip(chars[begin[row]].tolist(), chars[end[row]].tolist()))
        assert spans == [tuple(span) for span in reference["offset_mapping"][row]], text


def test_hangul_syllables_stay_whole_and_pieces_are_the_lowercased_text():
    """Each piece but [UNK] is its source span, lowercased: no jamo from a syllable, no shifted offset."""
    tokenizer = ours(True, "tf_text")
    ids, begin, end = (t.to_list() for t in tokenizer.tokenize_with_offsets(TEXTS))
    jamo = 0
    for row, text in enumerate(TEXTS):
        raw = text.encode("utf-8")
        for token_id, b, e in zip(ids[row], begin[row], end[row]):
            token = tokenizer.id_to_token(token_id)
            if token == "[UNK]":
                continue
            piece = token[2:] if token.startswith("##") else token
            source = raw[b:e].decode("utf-8")
            assert piece == source.lower(), (text, token, source)
            jamo += any(0x1100 <= ord(c) <= 0x11FF for c in piece)
    assert jamo == 0


def test_the_uncased_rule_still_decomposes_as_the_original():
    """`strip_accents` unset follows `lowercase`: Hangul becomes jamo, as HF's default and the original."""
    texts = TEXTS[:300]
    hf = transformers.BertTokenizer(VOCAB, do_lower_case=True)
    want = hf(texts, add_special_tokens=False)["input_ids"]
    for backend in ("tf_text", "core"):
        tokenizer = BertTokenizer(VOCAB, lowercase=True, backend=backend, max_input_chars_per_word=HF_MAX_CHARS)
        assert tokenizer.strip_accents is True
        assert tokenizer.tokenize(texts).to_list() == want
    sentence = "오늘은 2024년 3월 5일입니다."
    uncased = BertTokenizer(VOCAB)
    assert uncased.tokenize([sentence]).to_list() == [[1, 1, 1, 1, uncased.token_to_id(".")]]  # jamo: [UNK]
    kept = BertTokenizer(VOCAB, strip_accents=False)
    tokens = [kept.id_to_token(i) for i in kept.tokenize([sentence]).to_list()[0]]
    assert "[UNK]" not in tokens and "".join(t.lstrip("#") for t in tokens) == sentence.replace(" ", "")


@pytest.mark.parametrize("backend", ["tf_text", "core"])
def test_lowercase_keeping_accents_on_latin_and_greek(backend, tmp_path):
    """Latin is lowercased, accents and decomposed marks kept as written; HF agrees (no capital sigma,
    whose final form HF does not apply)."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "école", "éco", "##le", "café", "naïve", "istanbul",
             "i\u0307stanbul", "ελλάδα", "한국어", "e\u0301cole"]
    texts = ["ÉCOLE École école", "Café NAÏVE naïve", "İstanbul", "Ελλάδα 한국어", "e\u0301cole"]
    path = str(tmp_path / "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(path, lowercase=True, strip_accents=False, backend=backend)
    want = transformers.BertTokenizer(path, do_lower_case=True, strip_accents=False)(
        texts, add_special_tokens=False)["input_ids"]
    assert tokenizer.tokenize(texts).to_list() == want
    # NFD text keeps its marks; nothing is composed or dropped.
    assert tokenizer.tokenize(["e\u0301cole"]).to_list() == [[vocab.index("e\u0301cole")]]
    assert unicodedata.normalize("NFD", "é") != "é"


def test_cased_with_accents_stripped(tmp_path):
    """`lowercase=False, strip_accents=True`: case kept, marks dropped (HF's rule too)."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "Ecole", "ecole", "cafe", "Cafe"]
    path = str(tmp_path / "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    texts = ["École école Café"]
    want = transformers.BertTokenizer(path, do_lower_case=False, strip_accents=True)(
        texts, add_special_tokens=False)["input_ids"]
    for backend in ("tf_text", "core"):
        assert BertTokenizer(path, lowercase=False, strip_accents=True, backend=backend).tokenize(
            texts).to_list() == want == [[4, 5, 7]]


def test_strip_accents_must_be_a_boolean():
    with pytest.raises(ValueError, match="strip_accents"):
        BertTokenizer(VOCAB, strip_accents="no")
    assert BertTokenizer(VOCAB, strip_accents=np.bool_(False)).strip_accents is False


@pytest.mark.parametrize("backend", ["tf_text", "core"])
def test_a_kiwi_pre_tokenizer_splits_on_the_host_with_offsets_in_the_raw_text(backend):
    """`pre_tokenizer="kiwi"`: the ids of the kiwi-spaced text, the offsets of the raw one (real reviews
    and paragraphs), in eager calls and inside `tf.data`."""
    pytest.importorskip("kiwipiepy")
    import tensorflow as tf

    from pipelines.tokenizer.morphemes import morpheme_splitter

    texts = TEXTS[:300] + ["", "   ", "hello World", "갔다왔어요!!", "e\u0301cole 한국어"]
    spaced = morpheme_splitter("kiwi").spaced(texts)[0]
    split = BertTokenizer(VOCAB, strip_accents=False, backend=backend, pre_tokenizer="kiwi")
    plain = BertTokenizer(VOCAB, strip_accents=False, backend=backend)
    ids, begin, end = (t.to_list() for t in split.tokenize_with_offsets(texts))
    assert ids == plain.tokenize(spaced).to_list() == split.tokenize(texts).to_list()
    for row, text in enumerate(texts):
        raw = text.encode("utf-8")
        for token_id, b, e in zip(ids[row], begin[row], end[row]):
            token = split.id_to_token(token_id)
            if token != "[UNK]":
                assert raw[b:e].decode("utf-8").lower() == token.removeprefix("##"), (text, token)
    batches = tf.data.Dataset.from_tensor_slices(texts).batch(64).map(split.tokenize)
    assert [row for batch in batches for row in batch.to_list()] == ids


# -- decomposed Hangul (NFD conjoining jamo: macOS file names, HFS+ copies, some web scrapes) --------


def test_decomposed_hangul_reads_as_unk_as_in_hf_and_warns_once_naming_nfc():
    """Text read as given (the original's and HF's rule: neither composes): NFD Hangul is [UNK] with a
    vocabulary of syllables, as in HF's `BertTokenizer` / `BertTokenizerFast`; a warning says so, once."""
    import warnings

    composed = TEXTS[:40]
    decomposed = [unicodedata.normalize("NFD", text) for text in composed]
    tokenizer = BertTokenizer(VOCAB, lowercase=True, strip_accents=False, max_input_chars_per_word=HF_MAX_CHARS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tokenizer.tokenize(composed).to_list() == [hf_tokenizer(True)(t, add_special_tokens=False)["input_ids"]
                                                          for t in composed]
        assert caught == []  # composed text: nothing to say
        ids = tokenizer.tokenize(decomposed).to_list()
        tokenizer.tokenize(decomposed)
        tokenizer.tokenize_with_offsets(decomposed)
    fast = transformers.BertTokenizerFast(VOCAB, do_lower_case=True, strip_accents=False)
    assert ids == [fast(t, add_special_tokens=False)["input_ids"] for t in decomposed]
    unk = tokenizer.special_tokens.unk
    assert sum(i == unk for row in ids for i in row) > 10 * sum(i == unk for row in tokenizer.tokenize(composed).to_list()
                                                                for i in row)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and 'unicode_normalization="NFC"' in messages[0], messages
    assert "unicodedata.normalize" in messages[0] and caught[0].filename == __file__


def test_no_warning_where_nfc_would_not_help():
    """Stripped accents (NFD anyway), a vocabulary that holds the jamo, or one with no Hangul: no warning."""
    import warnings

    jamo = unicodedata.normalize("NFD", "오늘")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘"], lowercase=False,
                      strip_accents=True).tokenize([jamo])
        BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘", jamo], strip_accents=False).tokenize([jamo])
        BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "today"], strip_accents=False).tokenize([jamo])


def test_unicode_normalization_nfc_composes_with_offsets_into_the_original_text(tmp_path):
    """`unicode_normalization="NFC"`: NFD text gives the NFC text's ids (HF's on the composed text), the
    offsets slice the original (decomposed) string; in eager calls, in `tf.data`, and in a SavedModel."""
    import tensorflow as tf

    composed = TEXTS[:200] + ["", "e\u0301cole 한국어", "오늘은 2024년 3월 5일입니다."]
    texts = [unicodedata.normalize("NFD", text) for text in composed]
    nfc = BertTokenizer(VOCAB, lowercase=True, strip_accents=False, max_input_chars_per_word=HF_MAX_CHARS,
                        unicode_normalization="NFC")
    assert nfc.unicode_normalization == "NFC"
    want = ours(True, "tf_text").tokenize(composed).to_list()
    assert want == [hf_tokenizer(True)(t, add_special_tokens=False)["input_ids"] for t in composed]
    ids, begin, end = (t.to_list() for t in nfc.tokenize_with_offsets(texts))
    assert ids == want == nfc.tokenize(texts).to_list()
    for row, text in enumerate(texts):
        raw = text.encode("utf-8")
        for token_id, b, e in zip(ids[row], begin[row], end[row]):
            token = nfc.id_to_token(token_id)
            if token != "[UNK]":
                assert unicodedata.normalize("NFC", raw[b:e].decode("utf-8")).lower() == token.removeprefix("##")
    assert nfc.token_records([texts[-1]])[0][0] == {"token": "오늘은", "id": want[-1][0], "start": 0, "end": 24,
                                                    "start_char": 0, "end_char": 8, "text": texts[-1][:8]}
    assert nfc.tokenize([]).to_list() == [] and nfc.tokenize_with_offsets([])[1].to_list() == []
    batches = tf.data.Dataset.from_tensor_slices(texts).batch(64).map(nfc.tokenize)
    assert [row for batch in batches for row in batch.to_list()] == want

    module = tf.Module()
    module.tokenizer = nfc
    module.f = tf.function(lambda s: nfc.tokenize_with_offsets(s)[2].to_tensor(-1),
                           input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    assert loaded.f(tf.constant(texts[-3:])).numpy().tolist() == tf.ragged.constant(end[-3:]).to_tensor(-1).numpy().tolist()


def test_unicode_normalization_is_checked_and_refused_by_the_core_backend():
    with pytest.raises(ValueError, match="'NFKD' is not a Unicode normalization.*NFC"):
        BertTokenizer(VOCAB, strip_accents=False, unicode_normalization="NFKD")
    with pytest.raises(ValueError, match='"core" backend.*backend="tf_text"'):
        BertTokenizer(VOCAB, strip_accents=False, unicode_normalization="NFC", backend="core")
    assert BertTokenizer(VOCAB, strip_accents=False, unicode_normalization="none").unicode_normalization is None
