"""Korean morpheme boundaries (`pipelines.tokenizer.morphemes`, kiwi) and the vocabularies learned on them.

The boundaries are what kiwi (`kiwipiepy`, the extra `korean`) says, kept only where they are
surface boundaries of the raw text; the texts are real: NSMC movie reviews and Korean Wikipedia
paragraphs from `../shared/data/korean` (the 600-line sample `tests/data/korean/korean_texts_sample.txt`
when that is absent). Tests that need kiwi skip, saying so, when it is not installed.
"""

import collections
import json
import os
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from pipelines.tokenizer import continuation_learner, morphemes
from pipelines.tokenizer.bert_tokenizer import BertTokenizer
from pipelines.tokenizer.char_offsets import byte_to_char_offsets
from pipelines.tokenizer.morphemes import MARKER, MissingAnalyzerError, fold_marked_words, morpheme_splitter
from pipelines.tokenizer.normalize import BertPreTokenizer
from pipelines.tokenizer.vocab import build_vocabulary, count_words

HERE = os.path.dirname(__file__)
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data", "korean")
SAMPLE = os.path.join(HERE, "..", "data", "korean", "korean_texts_sample.txt")


@pytest.fixture(scope="module")
def kiwi():
    pytest.importorskip("kiwipiepy", reason='kiwi is not installed: pip install "bert-keras[korean]"')
    pytest.importorskip("kiwipiepy_model", reason='kiwi\'s model is not installed: pip install "bert-keras[korean]"')
    return morpheme_splitter("kiwi").load()


def nsmc_reviews(count):
    if os.path.isdir(SHARED):
        with open(os.path.join(SHARED, "nsmc", "ratings_train.txt"), encoding="utf-8") as f:
            return [line.split("\t")[1] for line in f.read().splitlines()[1 : count + 1]]
    if os.path.isfile(SAMPLE):
        with open(SAMPLE, encoding="utf-8") as f:
            return f.read().splitlines()[:count]
    pytest.skip("no Korean texts: neither ../shared/data/korean nor tests/data/korean/korean_texts_sample.txt")


def real_lines():
    """1,500 NSMC reviews and 1,500 Wikipedia paragraphs (or the shipped sample)."""
    if not os.path.isdir(SHARED):
        return nsmc_reviews(600)
    with open(os.path.join(SHARED, "pretrain", "AA_wiki_00.txt"), encoding="utf-8") as f:
        wiki = [line for line in f.read().splitlines() if line.strip()][:1500]
    return nsmc_reviews(1500) + wiki


def pieces_of(text, cuts):
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


# --------------------------------------------------------------------------
# Boundaries
# --------------------------------------------------------------------------


def test_boundaries_of_a_date_sentence_are_surface_boundaries(kiwi):
    text = "오늘은 2024년 3월 5일입니다."
    # kiwi: 오늘 은 | 2024 년 | 3 월 | 5 일 이(15,1) ᆸ니다(15,3) .(18): 이 and ᆸ니다 overlap, so no cut
    # inside 입니다; both start at 15, where the cut is.
    assert kiwi.boundaries(text) == [2, 8, 11, 14, 15, 18]
    assert kiwi.split(text) == [["오늘", "은"], ["2024", "년"], ["3", "월"], ["5", "일", "입니다", "."]]
    assert kiwi.spaced(text)[0] == "오늘 은 2024 년 3 월 5 일 입니다 ."


def test_boundaries_of_the_seed_sentence(kiwi):
    text = "신용 대출을 신청하고 싶어요"
    assert kiwi.split(text) == [["신용"], ["대출", "을"], ["신청", "하", "고"], ["싶", "어요"]]
    assert kiwi.boundaries(text) == [5, 9, 10, 13]


def test_overlapping_and_non_surface_morphemes_give_surface_cuts_only(kiwi):
    # 갔 = 가 + 었 (both at 0), 왔 = 오 + 었; 어욥 = 어요 + a Z_CODA ᆸ inside it.
    assert kiwi.split("갔다왔어요") == [["갔", "다", "왔", "어요"]]
    assert kiwi.split("먹었어욥") == [["먹", "었", "어욥"]]


@pytest.mark.parametrize("text", ["", " ", "  \t\n ", "a", "가"])
def test_empty_and_tiny_texts(kiwi, text):
    assert kiwi.boundaries(text) == []
    spaced, char_map = kiwi.spaced(text)
    assert spaced == text and char_map.tolist() == list(range(len(text) + 1))


def test_a_batch_answers_per_text_in_order(kiwi):
    texts = ["오늘은", "", "신용 대출을", "  "]
    assert kiwi.boundaries(texts) == [kiwi.boundaries(text) for text in texts] == [[2], [], [5], []]
    spaced, maps = kiwi.spaced(texts)
    assert spaced == ["오늘 은", "", "신용 대출 을", "  "] and len(maps) == 4


def test_mixed_scripts_emoji_and_marks_stay_whole(kiwi):
    text = "e\u0301 café 👨\u200d👩\u200d👧 👍🏻좋아요 Hello世界 ㅋㅋ"
    words = kiwi.split(text)
    assert ["e\u0301"] in words and ["café"] in words and ["👨\u200d👩\u200d👧"] in words
    assert ["👍🏻", "좋", "아요"] in words  # no cut inside the emoji + skin tone, the surface 아요 kept


def test_decomposed_hangul_is_analysed_and_cut_between_syllables(kiwi):
    composed = "오늘은 5일입니다."
    decomposed = unicodedata.normalize("NFD", composed)
    assert len(decomposed) > len(composed)
    cuts = kiwi.boundaries(decomposed)
    assert [unicodedata.normalize("NFC", piece) for piece in pieces_of(decomposed, cuts)] == \
        pieces_of(composed, kiwi.boundaries(composed))


def test_long_texts_are_analysed_in_chunks_with_the_same_cuts(kiwi):
    line = "신용 대출을 신청하고 싶어요. 오늘은 2024년 3월 5일입니다.\n"
    text = line * 200  # 8,000+ characters, several chunks
    cuts = kiwi.boundaries(text)
    one = kiwi.boundaries(line)
    assert cuts == [i * len(line) + c for i in range(200) for c in one]
    no_spaces = "가나다라마바사" * 500  # no whitespace at all: hard cuts, still spans of the text
    spaced, char_map = kiwi.spaced(no_spaces)
    assert spaced.replace(" ", "") == no_spaces and char_map[-1] == len(no_spaces)


def test_the_chunker_cuts_at_whitespace_within_the_limit():
    text = "가나다 " * 1000
    chunks = morphemes._chunks(text, 100)
    assert "".join(chunk for _, chunk in chunks) == text
    assert all(len(chunk) <= 100 and chunk.endswith(" ") for _, chunk in chunks[:-1])
    assert [offset for offset, _ in chunks] == list(np.cumsum([0] + [len(c) for _, c in chunks[:-1]]))


def test_offsets_are_exact_on_real_lines(kiwi):
    texts = real_lines()
    assert len(texts) >= (3000 if os.path.isdir(SHARED) else 600)
    spaced, maps = kiwi.spaced(texts)
    cut_count = 0
    for text, spaced_text, char_map in zip(texts, spaced, maps):
        assert "".join(spaced_text.split()) == "".join(text.split())
        assert spaced_text.replace(" ", "") == text.replace(" ", "")
        assert len(char_map) == len(spaced_text) + 1 and char_map[-1] == len(text)
        assert np.all(np.diff(char_map) >= 0)
        for char, position in zip(spaced_text, char_map.tolist()):
            assert text[position] == char or (char == " " and not text[position].isspace())  # inserted
        cut_count += len(spaced_text) - len(text)
    assert cut_count > sum(map(len, texts)) // 10  # Korean text: many morphemes per word


def test_token_offsets_of_spaced_text_map_back_to_the_raw_text(kiwi):
    text = "오늘은 2024년 3월 5일입니다!"
    spaced, char_map = kiwi.spaced(text)
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘", "은", "2024", "년", "3", "월", "5", "일", "입니다", "!"]
    _, begin, end = BertTokenizer(vocabulary=vocabulary, lowercase=False).tokenize_with_offsets([spaced])
    to_chars = byte_to_char_offsets(spaced)
    starts, ends = char_map[to_chars[begin[0].numpy()]], char_map[to_chars[end[0].numpy()]]
    assert [text[a:b] for a, b in zip(starts, ends)] == ["오늘", "은", "2024", "년", "3", "월", "5", "일", "입니다", "!"]


# --------------------------------------------------------------------------
# Counting and learning
# --------------------------------------------------------------------------


def test_fold_marked_words():
    counts = {f"오늘{MARKER}은": 3, "오늘": 1, f"5{MARKER}일{MARKER}입니다{MARKER}": 2, MARKER: 5, f"{MARKER}진짜": 1}
    assert fold_marked_words(counts) == collections.Counter(
        {"오늘": 4, "##은": 3, "5": 2, "##일": 2, "##입니다": 2, "진짜": 1})


def test_the_marker_is_a_letter_to_the_pre_tokenizer():
    """Marked text splits into the raw text's words, each with its markers inside (the marker is
    not whitespace, punctuation, control, accent or CJK to the pre-tokenizer)."""
    raw = "영화...진짜요 漢字를 ÀBC's 5일입니다! ﬁne"
    marked = f"영화{MARKER}...{MARKER}진짜{MARKER}요 漢字{MARKER}를 ÀBC{MARKER}'s 5{MARKER}일{MARKER}입니다{MARKER}! ﬁ{MARKER}ne"
    for lowercase in (True, False):
        pre_tokenizer = BertPreTokenizer(lowercase=lowercase)
        marked_words = [w.decode() for w in pre_tokenizer.split(tf.constant([marked])).flat_values.numpy()]
        raw_words = [w.decode() for w in pre_tokenizer.split(tf.constant([raw])).flat_values.numpy()]
        assert [w.replace(MARKER, "") for w in marked_words if w != MARKER] == raw_words
        composed = [unicodedata.normalize("NFC", w) for w in marked_words]  # uncased rules NFD Hangul
        assert f"{MARKER}진짜{MARKER}요" in composed and f"{MARKER}를" in composed


def test_the_continuation_learner_is_tf_texts_learner_without_continuation_words():
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as tf_text_learner

    words = "the cat sat on the mat a dog barked at the cat catalog dogma " * 3
    counts = collections.Counter(words.split())
    counts.update({"playing": 7, "played": 5, "player": 4, "plays": 9})
    options = dict(vocab_size=60, reserved_tokens=["[PAD]", "[UNK]"], lower_thresh=1, max_unique_chars=100)
    for size in (40, 60, 90):
        options["vocab_size"] = size
        assert continuation_learner.learn(dict(counts), **options) == \
            tf_text_learner.learn(dict(counts), include_joiner_token=True, **options)


def test_continuation_words_become_joined_pieces_only():
    counts = {"오늘": 10, "##입니다": 50, "학교": 10, "##에서": 40, "##은": 30}
    vocab = build_vocabulary(counts, vocab_size=40)
    assert {"##입니다", "##에서", "오늘", "학교"} <= set(vocab)
    assert "입니다" not in vocab and "에서" not in vocab  # never seen at a word's start
    assert not any("#" in token.replace("##", "", 1) for token in vocab if token.startswith("##"))
    tokenizer = BertTokenizer(vocabulary=vocab, lowercase=False)
    assert [tokenizer.id_to_token(i) for i in tokenizer.tokenize(["학교에서"])[0].numpy()] == ["학교", "##에서"]


def test_morpheme_suffixes_need_an_analyzer():
    with pytest.raises(ValueError, match="morpheme analyzer"):
        count_words(tf.data.Dataset.from_tensor_slices(["a"]), BertPreTokenizer(), morpheme_suffixes=True)


@pytest.fixture(scope="module")
def reviews_counts(kiwi):
    """Word counts of 400 NSMC reviews: plain, morphemes as words (c), morpheme suffixes (b)."""
    lines = tf.data.Dataset.from_tensor_slices(nsmc_reviews(400))
    pre_tokenizer = BertPreTokenizer(lowercase=False)
    return {
        "plain": count_words(lines, pre_tokenizer),
        "c": count_words(lines, pre_tokenizer, morphemes=kiwi),
        "b": count_words(lines, pre_tokenizer, batch_size=64, morphemes="kiwi", morpheme_suffixes=True),
    }


def test_morphemes_as_words_counts_each_morpheme(kiwi, reviews_counts):
    plain, c = reviews_counts["plain"], reviews_counts["c"]
    assert sum(c.values()) > sum(plain.values()) * 1.3  # more, shorter words
    assert not any(word.startswith("##") for word in c)
    reviews = nsmc_reviews(400)
    expected = collections.Counter()
    for words in BertPreTokenizer(lowercase=False).split(tf.constant(kiwi.spaced(reviews)[0])).to_list():
        expected.update(word.decode() for word in words)
    assert c == expected


def test_morpheme_suffixes_counts_later_morphemes_as_continuations(reviews_counts):
    plain, b = reviews_counts["plain"], reviews_counts["b"]
    assert all(b[particle] > 5 for particle in ("##은", "##는", "##을", "##이", "##도"))
    # Every word of the raw text is its first morpheme plus continuations: as many word starts.
    assert sum(n for w, n in b.items() if not w.startswith("##")) == sum(plain.values())
    assert not any(MARKER in word for word in b)


def test_a_private_use_character_of_the_corpus_is_counted_not_taken_for_a_boundary(kiwi):
    """The marker was U+E000, which Korean word processors write into text (old Hangul, symbols):
    a corpus's own U+E000 was folded away as a morpheme boundary, never learned, and its words
    became [UNK]. The marker is a noncharacter now; the corpus's U+E000 is counted as a letter."""
    lines = tf.data.Dataset.from_tensor_slices(["\ue000표시 글자"] * 3)
    counts = count_words(lines, BertPreTokenizer(lowercase=False), morphemes="kiwi", morpheme_suffixes=True)
    assert sum(n for word, n in counts.items() if "\ue000" in word) == 3, counts
    assert unicodedata.category(MARKER) == "Cn"


def test_a_morpheme_suffix_vocabulary_cuts_raw_words_at_morphemes(kiwi, reviews_counts):
    b_vocab = build_vocabulary(reviews_counts["b"], vocab_size=1800)
    c_vocab = build_vocabulary(reviews_counts["c"], vocab_size=1800)
    assert len(b_vocab) <= 1800 and len(c_vocab) <= 1800
    assert {"##은", "##는", "##을"} <= set(b_vocab)
    learned_suffixes = {t for t in b_vocab if t.startswith("##") and len(t) > 3}
    assert learned_suffixes & {"##에서", "##는데", "##네요", "##지만", "##으로", "##습니다"}, sorted(learned_suffixes)
    tokenizer = BertTokenizer(vocabulary=b_vocab, lowercase=False)
    for word in ("오늘은", "영화는", "배우들의"):
        pieces = [tokenizer.id_to_token(i) for i in tokenizer.tokenize([word])[0].numpy()]
        piece_starts = set(np.cumsum([0] + [len(p.removeprefix("##")) for p in pieces])[:-1])
        assert set(kiwi.boundaries(word)) <= piece_starts, (word, pieces, kiwi.split(word))
    assert [tokenizer.id_to_token(i) for i in tokenizer.tokenize(["영화는"])[0].numpy()] == ["영화", "##는"]


# --------------------------------------------------------------------------
# The command, and the missing extra
# --------------------------------------------------------------------------


def test_bert_keras_vocab_with_kiwi_end_to_end(kiwi, tmp_path):
    from cli_subprocess import run_bert_keras

    (tmp_path / "reviews.txt").write_text("\n".join(nsmc_reviews(300)) + "\n", encoding="utf-8")
    result = run_bert_keras(["vocab", "reviews.txt", "-o", "vocab.txt", "--size", "3000", "--cased",
                             "--pre-tokenizer", "kiwi", "--morpheme-suffixes"], tmp_path)
    assert "pre-tokenizer kiwi, morpheme suffixes: reads raw text as is" in result.stdout.splitlines()[-1]
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and "##는" in vocab
    assert not any(MARKER in token for token in vocab)
    tokenizer = BertTokenizer(vocabulary=vocab, lowercase=False)  # what `bert-keras tokenize --cased` runs
    assert [tokenizer.id_to_token(i) for i in tokenizer.tokenize(["영화는"])[0].numpy()] == ["영화", "##는"]


def test_bert_keras_vocab_morphemes_as_words(kiwi, tmp_path, capsys):
    from bert_keras.cli.main import main

    (tmp_path / "reviews.txt").write_text("\n".join(nsmc_reviews(200)) + "\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    assert main(["vocab", str(tmp_path / "reviews.txt"), "-o", str(out), "--size", "3000", "--cased",
                 "--pre-tokenizer", "kiwi"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("next: bert-keras tokenize") and "morphemes as words: tokenize, finetune" in last
    assert "영화" in out.read_text(encoding="utf-8").splitlines()


def test_a_vocabulary_of_morphemes_as_words_records_kiwi_and_is_read_with_it(kiwi, tmp_path, capsys):
    """(c) `vocab --pre-tokenizer kiwi` records the analyzer in its tokenizer_config.json, so that
    `load_tokenizer` and `bert-keras tokenize` split raw text with it ("대출을" is 대출 + 을, not the
    eojeol); (b) `--morpheme-suffixes` reads raw text and records none."""
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.cli.main import main
    from pipelines.tokenizer.tokenizer_config import PRE_TOKENIZER_KEY, read_tokenizer_settings

    corpus = tmp_path / "reviews.txt"
    corpus.write_text("\n".join(nsmc_reviews(200) + ["신용 대출을 신청하고 싶어요", "대출은 어떻게 하나요?"] * 10) + "\n",
                      encoding="utf-8")
    for variant, flags in (("c", []), ("b", ["--morpheme-suffixes"])):
        (tmp_path / variant).mkdir()
        assert main(["vocab", str(corpus), "-o", str(tmp_path / variant / "vocab.txt"), "--size", "3000",
                     "--no-strip-accents", "--pre-tokenizer", "kiwi", *flags]) == 0
    capsys.readouterr()
    with open(tmp_path / "c" / "tokenizer_config.json", encoding="utf-8") as f:
        assert json.load(f)[PRE_TOKENIZER_KEY] == "kiwi"
    with open(tmp_path / "b" / "tokenizer_config.json", encoding="utf-8") as f:
        assert PRE_TOKENIZER_KEY not in json.load(f)
    assert read_tokenizer_settings(str(tmp_path / "c" / "vocab.txt")) == {
        "lowercase": True, "strip_accents": False, "pre_tokenizer": "kiwi"}

    def pieces(tokenizer, text="대출을"):
        return [tokenizer.id_to_token(i) for i in tokenizer.tokenize([text])[0].numpy()]

    c_vocab = str(tmp_path / "c" / "vocab.txt")
    assert load_tokenizer(None, vocab_file=c_vocab).morpheme_analyzer == "kiwi"
    assert pieces(load_tokenizer(None, vocab_file=c_vocab)) == ["대출", "을"]
    assert pieces(load_tokenizer(None, vocab_file=c_vocab, pre_tokenizer="none")) == ["대출", "##을"]  # split already
    assert load_tokenizer(None, vocab_file=str(tmp_path / "b" / "vocab.txt")).morpheme_analyzer is None
    assert main(["tokenize", "--vocab", c_vocab, "대출을"]) == 0
    shown = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert shown == ["대출", "을"]


@pytest.mark.parametrize("flags, message", [
    (["--pre-tokenizer", "kiwi", "--runner", "DirectRunner"], "does not run with a runner (--runner)"),
    (["--morpheme-suffixes"], "(--morpheme-suffixes) needs a morpheme analyzer: add pre_tokenizer='kiwi' (--pre-tokenizer kiwi)"),
    (["--pre-tokenizer", "mecab"], "unknown pre-tokenizer 'mecab': choose one of kiwi"),
])
def test_bert_keras_vocab_refuses_what_does_not_go_together(tmp_path, capsys, flags, message):
    from bert_keras.cli.main import main

    (tmp_path / "c.txt").write_text("오늘은 좋다\n", encoding="utf-8")
    assert main(["vocab", str(tmp_path / "c.txt"), "-o", str(tmp_path / "v.txt"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "v.txt").exists()


def test_a_missing_kiwi_says_which_extra_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)  # `import kiwipiepy` raises ImportError
    splitter = morpheme_splitter("kiwi")
    with pytest.raises(MissingAnalyzerError, match=r'pre_tokenizer="kiwi" needs the Korean extra: '
                                                   r'pip install "bert-keras\[korean\]"'):
        splitter.boundaries("오늘은")
    assert issubclass(MissingAnalyzerError, ImportError)

    from bert_keras.cli.main import main

    (tmp_path / "c.txt").write_text("오늘은 좋다\n", encoding="utf-8")
    assert main(["vocab", str(tmp_path / "c.txt"), "-o", str(tmp_path / "v.txt"), "--pre-tokenizer", "kiwi"]) == 2
    err = capsys.readouterr().err
    assert 'pip install "bert-keras[korean]"' in err and "Traceback" not in err


def test_a_vocabulary_that_records_kiwi_without_kiwi_says_which_extra_and_why(tmp_path, capsys, monkeypatch):
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.cli.main import main
    from pipelines.tokenizer.tokenizer_config import write_tokenizer_settings

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n대출\n을\n##을\n", encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, strip_accents=False, pre_tokenizer="kiwi")
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)  # `import kiwipiepy` raises ImportError
    with pytest.raises(MissingAnalyzerError, match=r"tokenizer_config.json records bert_keras_pre_tokenizer 'kiwi' "
                                                   r".*pip install \"bert-keras\[korean\]\".*pre_tokenizer='none'"):
        load_tokenizer(None, vocab_file=str(vocab))
    assert load_tokenizer(None, vocab_file=str(vocab), pre_tokenizer="none").tokenize(["대출 을"]).to_list() == [[5, 6]]
    assert main(["tokenize", "--vocab", str(vocab), "대출을"]) == 2
    err = capsys.readouterr().err
    assert 'records bert_keras_pre_tokenizer \'kiwi\'' in err and 'pip install "bert-keras[korean]"' in err
    assert "Traceback" not in err


def test_random_mixed_texts_keep_every_character_in_place(kiwi):
    """Seeded random strings of Hangul syllables, conjoining and compatibility jamo, Latin, digits,
    CJK, emoji (with ZWJ and skin tones), combining marks, controls and odd whitespace."""
    rng = np.random.default_rng(7)
    alphabet = (list("가나다라마바사아자차카타파하은는을를이가에서입니다했었다요") + list("\u1100\u1161\u11a8\u1112\u1175")
                + list("ㄱㅋㅎㅠㅜ") + list("abcXYZ019") + list("漢字日本") + ["😀", "👍", "\U0001f3fb", "\u200d", "\ufe0f"]
                + ["\u0301", "\u0308", "\x00", "\x1f", "\ufffd", "\u200b"] + [" ", "  ", "\t", "\n", "\u3000", "\xa0"]
                + list(".,!?~'\"()"))
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 80))) for _ in range(300)]
    spaced, maps = kiwi.spaced(texts)
    for text, spaced_text, char_map, cuts in zip(texts, spaced, maps, kiwi.boundaries(texts)):
        assert len(spaced_text) == len(text) + len(cuts)
        assert "".join(spaced_text.split()) == "".join(text.split())
        assert np.all(np.diff(char_map) >= 0) and char_map[-1] == len(text)
        for char, position in zip(spaced_text, char_map.tolist()):
            assert text[position] == char or (char == " " and not text[position].isspace())
        for cut in cuts:
            assert not text[cut - 1].isspace() and not text[cut].isspace()
            assert not unicodedata.category(text[cut]).startswith("M") and "\u200d" not in text[cut - 1 : cut + 1]


def test_every_kiwi_splitter_of_a_process_shares_one_loaded_analyzer(kiwi):
    # Each kiwi load holds ~450 MB: a tokenizer, task or served version of a kiwi vocabulary loading
    # its own grew a process by that much each time (one test module's worker by 5 GB).
    again = morpheme_splitter("kiwi").load()
    assert again.kiwi is kiwi.kiwi
    assert again.split(["오늘은 날씨가 좋다"]) == kiwi.split(["오늘은 날씨가 좋다"])
    threaded = morpheme_splitter("kiwi", num_workers=1).load()
    assert threaded.kiwi is not kiwi.kiwi and threaded.kiwi is morpheme_splitter("kiwi", num_workers=1).kiwi
    assert threaded.split(["오늘은 날씨가 좋다"]) == kiwi.split(["오늘은 날씨가 좋다"])
