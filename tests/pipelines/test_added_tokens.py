"""Added tokens (HF's `add_tokens` / `additional_special_tokens`) are found whole, as transformers'
`BertTokenizerFast` finds them: the same ids and character offsets on the same vocabulary, in both
backends, and in a SavedModel's tokenizer."""

import json
import random
import re

import pytest
import tensorflow as tf

from pipelines import BertTokenizer
from pipelines.tokenizer.added_tokens import AddedTokenError
from pipelines.tokenizer.char_offsets import byte_to_char_offsets

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "new", "[", "]", "<", ">", "e",
              "##1", "a", "b", "ab", "x", "!", ",", "##s", "cafe", "café", "中", "文", "한국", "##어", "서울",
              "covid", "##19", "hel", "##lo", "E", "N", "##EW", "NEW", "Hello"]

ADDED = [
    tokenizers.AddedToken("[NEW]", normalized=True),             # punctuation: split by BERT's rules
    tokenizers.AddedToken("<E2>", normalized=False),             # matched as written
    tokenizers.AddedToken("covid19", normalized=True),           # letters and digits, inside words too
    tokenizers.AddedToken("ab", single_word=True),               # not inside a word
    tokenizers.AddedToken("hel", lstrip=True, rstrip=True),      # takes the whitespace around it
    tokenizers.AddedToken("new", normalized=True),               # already a word piece
]
SPECIAL = [tokenizers.AddedToken("[SPEC]", normalized=False, special=True)]

PIECES = ["[NEW]", "[new]", "[New]", "<E2>", "<e2>", "covid19", "COVID19", "xcovid19x", "ab", "xab", "abx",
          "ab!", "hel", "Hello", "hello", "world", "new", "NEW", "[SPEC]", "[spec]", "[SEP]", "[CLS]", "[",
          "]", "<", ">", "!", ",", "中文", "한국어", "서울", "café", "Café", "CAFÉ", "e\u0301", "a\u00adb",
          " ", "  ", "\t", "\n", "\u3000", "\u00a0", "x", "\u200b", "\u0301", "\x00", "\ufeff"]


def _hf(lowercase):
    """transformers' fast tokenizer with the added tokens, and (vocabulary, added tokens) as its
    tokenizer.json holds them (what a checkpoint directory gives)."""
    import tempfile

    folder = tempfile.mkdtemp()
    with open(f"{folder}/vocab.txt", "w") as f:
        f.write("\n".join(WORDPIECES) + "\n")
    hf = transformers.BertTokenizerFast(f"{folder}/vocab.txt", do_lower_case=lowercase)
    hf.add_tokens(list(ADDED))
    hf.add_special_tokens({"additional_special_tokens": list(SPECIAL)})
    spec = json.loads(hf.backend_tokenizer.to_str())
    vocabulary = [t for t, _ in sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])]
    for entry in sorted(spec["added_tokens"], key=lambda e: e["id"]):
        if entry["id"] >= len(vocabulary):
            assert entry["id"] == len(vocabulary)
            vocabulary.append(entry["content"])
    return hf, vocabulary, spec["added_tokens"]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request):
    hf, vocabulary, added = _hf(request.param)
    ours = {backend: BertTokenizer(vocabulary=vocabulary, lowercase=request.param, added_tokens=added,
                                   backend=backend, max_input_chars_per_word=100)
            for backend in ("tf_text", "core")}
    return hf, ours


def _hf_tokens(hf, text):
    encoding = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    return encoding["input_ids"], [list(span) for span in encoding["offset_mapping"]]


def _our_tokens(tokenizer, texts):
    ids, begin, end = (t.to_list() for t in tokenizer.tokenize_with_offsets(texts))
    plain = tokenizer.tokenize(texts).to_list()
    result = []
    for row, text in enumerate(texts):
        chars = byte_to_char_offsets(text)
        assert plain[row] == ids[row]
        result.append((ids[row], [[int(chars[b]), int(chars[e])] for b, e in zip(begin[row], end[row])]))
    return result


def test_known_cases_match_transformers(pair):
    hf, ours = pair
    texts = ["Hello [NEW] [new]x <E2> <e2> [SPEC] [spec] [SEP] ab xab ab! hello  hel  world",
             "xcovid19x COVID19 中文[NEW]한국어 café", "", "  ", "x  hel  y", "plain words only",
             # what the normalizer drops is not there for lstrip / rstrip and single_word either
             "x \u200b hel \x00\ufeff y", "new  \u0301\tHello", "abx\ufeffa\u00adb ab\u200bx ab"]
    for tokenizer in ours.values():
        assert _our_tokens(tokenizer, texts) == [_hf_tokens(hf, text) for text in texts]


def _mixed_text(draw_piece, draw_gap, count):
    return "".join(draw_piece() + draw_gap() for _ in range(count))


def _comparable(text):
    # HF's lstrip / rstrip also take the spaces its normalizer puts around a CJK character (its
    # offsets then overlap the character's), past the characters it drops: here only the text's own
    # whitespace is taken.
    return not re.search("[中文][\\s\u200b\u0301\x00\ufeff]*hel|hel[\\s\u200b\u0301\x00\ufeff]*[中文]", text,
                         re.IGNORECASE)


def test_many_mixed_texts_match_transformers_in_one_batch(pair):
    hf, ours = pair
    rng = random.Random(26)
    texts = [_mixed_text(lambda: rng.choice(PIECES), lambda: rng.choice(["", " ", "", "  "]), rng.randrange(15))
             for _ in range(400)]
    texts = [text for text in texts if _comparable(text)]
    expected = [_hf_tokens(hf, text) for text in texts]
    for backend, tokenizer in ours.items():
        got = _our_tokens(tokenizer, texts)
        assert [text for text, a, b in zip(texts, got, expected) if a != b] == [], backend


@pytest.mark.slow
@hypothesis.settings(max_examples=150, deadline=None, derandomize=True)
@hypothesis.given(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(["", " ", "", "  "])), max_size=14))
def test_mixed_texts_match_transformers(pair, parts):
    hf, ours = pair
    text = "".join(piece + gap for piece, gap in parts)
    hypothesis.assume(_comparable(text))
    expected = _hf_tokens(hf, text)
    for backend, tokenizer in ours.items():
        assert _our_tokens(tokenizer, [text])[0] == expected, (backend, text)


def test_special_tokens_not_matched_ignoring_case():
    hf, vocabulary, added = _hf(True)
    tokenizer = BertTokenizer(vocabulary=vocabulary, added_tokens=added)
    ids = tokenizer.tokenize(["[SPEC] [Spec] [SEP] [sep]"]).to_list()[0]
    assert ids == hf("[SPEC] [Spec] [SEP] [sep]", add_special_tokens=False)["input_ids"]
    assert ids[0] == vocabulary.index("[SPEC]") and vocabulary.index("[SEP]") in ids
    assert ids.count(vocabulary.index("[")) == 2  # [Spec] and [sep] are text


def test_without_added_tokens_the_original_rules_split_them():
    tokenizer = BertTokenizer(vocabulary=WORDPIECES + ["[NEW]"])
    assert tokenizer.tokenize(["[NEW]"]).to_list() == [[8, 7, 9]]
    assert tokenizer._added is None and tokenizer.added_tokens == []  # the default path is untouched


def test_added_tokens_are_plain_json_and_take_tokenizers_added_token():
    tokenizer = BertTokenizer(vocabulary=WORDPIECES + ["[NEW]"],
                              added_tokens=[tokenizers.AddedToken("[NEW]", single_word=True), "ab"])
    assert json.loads(json.dumps(tokenizer.added_tokens)) == [
        {"content": "[NEW]", "id": 37, "special": False, "normalized": True, "lstrip": False, "rstrip": False,
         "single_word": True},
        {"content": "ab", "id": 16, "special": False, "normalized": True, "lstrip": False, "rstrip": False,
         "single_word": False}]
    assert tokenizer.tokenize(["x[NEW] [NEW] ab"]).to_list() == [[17, 8, 7, 9, 37, 16]]


def _both_backends_as_hf(words, added_tokens, texts, lowercase, strip_accents):
    """`(vocabulary, HF's tokens of texts)` for HF's tokenizer of `words` with `added_tokens` added,
    once both our backends are checked to tokenize `texts` as it does."""
    hf = transformers.BertTokenizerFast(vocab=dict((w, i) for i, w in enumerate(words)), do_lower_case=lowercase,
                                        strip_accents=strip_accents)
    hf.add_tokens(added_tokens)
    added = json.loads(hf.backend_tokenizer.to_str())["added_tokens"]
    vocabulary = words + [entry["content"] for entry in added if entry["id"] >= len(words)]
    expected = [_hf_tokens(hf, text) for text in texts]
    for backend in ("tf_text", "core"):
        ours = BertTokenizer(vocabulary=vocabulary, lowercase=lowercase, strip_accents=strip_accents,
                             added_tokens=added, backend=backend, max_input_chars_per_word=100)
        got = _our_tokens(ours, texts)
        assert [(text, a, b) for text, a, b in zip(texts, got, expected) if a != b] == [], backend
    return vocabulary, expected


@pytest.mark.parametrize("lowercase, strip_accents", [(True, None), (False, None), (True, False), (False, True)])
def test_normalized_added_tokens_match_where_only_accents_differ_as_transformers(lowercase, strip_accents):
    """HF matches a normalized token in the normalized text: with accents stripped, "cafe" and "CAFÉ"
    are the added "café", and "naïve" is found in "NAIVE". They were read by the WordPiece rules
    ("cafe": its own id) where only the case was folded."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "cafe", "##x", "y", "naive", "한국", "##어", "u"]
    texts = ["cafe", "CAFÉ x", "xcafé y", "cafex", "NAIVE naïve naive", "한국어", "über ÜBER uber", "e\u0301 Café"]
    vocabulary, expected = _both_backends_as_hf(
        words, [tokenizers.AddedToken("café", normalized=True), tokenizers.AddedToken("naïve", normalized=True),
                "한국어", tokenizers.AddedToken("Über", normalized=True)], texts, lowercase, strip_accents)
    if lowercase if strip_accents is None else strip_accents:  # accents stripped
        assert expected[0][0] == [vocabulary.index("café")]


@pytest.mark.parametrize("lowercase, strip_accents", [(True, None), (False, None), (True, False), (False, True)])
def test_normalized_added_tokens_match_through_what_the_normalizer_drops_as_transformers(lowercase, strip_accents):
    """HF matches a normalized token in the text its normalizer leaves: control and format characters
    (U+200B, U+0000, U+FFFD) dropped, whitespace a space, decomposed accents stripped. "[NE\u200bW]",
    "[N\u0301EW]" and "a\tb" were split by the WordPiece rules, "ca\u200bfé" read as "cafe", and
    "cafe\u0301" matched "café" with the stripped mark inside its offsets (HF's end before it)."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "[", "]", "new", "cafe", "中", "文", "a", "b"]
    texts = ["[N\u0301EW]", "[NE\u200bW]", "\u200b[NEW]\u200b", "[NEW]\u0301", "\u0301[NEW]", "cafe\u0301 x",
             "CAFE\u0301x", "ca\u200bfé", "中文", "中\u200b文", "a\tb", "a b", "a\u00a0b", "a\u3000b", "[N\x00EW]",
             "[N\ufffdEW]", "[N\U000e0001EW]", "[n\u0300\u0301ew]", "x [ne\u00adw] x", "\u200b", "e\u0301"]
    vocabulary, expected = _both_backends_as_hf(
        words, [tokenizers.AddedToken(token, normalized=True) for token in ("[NEW]", "café", "中文", "a b")], texts,
        lowercase, strip_accents)
    assert expected[1][0] == [vocabulary.index("[NEW]")]  # the case the test is about, in every rule


def test_added_token_not_in_vocabulary_is_refused_by_name():
    with pytest.raises(AddedTokenError, match=r"added_tokens\[1\] \('<e1>'\) is not in the vocabulary"):
        BertTokenizer(vocabulary=WORDPIECES, added_tokens=["new", "<e1>"])
    with pytest.raises(AddedTokenError, match="lstrip must be true or false"):
        BertTokenizer(vocabulary=WORDPIECES, added_tokens=[{"content": "new", "lstrip": "yes"}])
    with pytest.raises(AddedTokenError, match="non-empty"):
        BertTokenizer(vocabulary=WORDPIECES, added_tokens=[""])


def test_saved_model_tokenizer_gives_the_python_ids(tmp_path, pair):
    hf, ours = pair
    texts = ["Hello [NEW] <E2> covid19x ab xab  hel  [SPEC] 中文", "", "no added token here"]
    for backend, tokenizer in ours.items():
        if backend == "core":
            continue  # the same graph code; the default backend's export is the one checked here
        module = tf.Module()
        module.tokenizer = tokenizer
        module.run = tf.function(lambda s: tokenizer.tokenize_with_offsets(s)[0].to_tensor(-1),
                                 input_signature=[tf.TensorSpec([None], tf.string)])
        tf.saved_model.save(module, str(tmp_path / backend))
        loaded = tf.saved_model.load(str(tmp_path / backend))
        expected = tokenizer.tokenize(texts).to_tensor(-1).numpy().tolist()
        assert loaded.run(tf.constant(texts)).numpy().tolist() == expected
        assert tokenizer.vocabulary.index("[NEW]") in expected[0]


def test_lstrip_whitespace_does_not_beat_a_longer_token_found_after_it():
    """The lstrip token's whitespace was part of its regex, so " abc" matched " ab" (starting one
    character earlier) where transformers finds "abc" first, by content, and only then lets a chosen
    lstrip / rstrip token take the whitespace around it: [ab] c instead of [abc]."""
    import tempfile

    folder = tempfile.mkdtemp()
    with open(f"{folder}/vocab.txt", "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "c", "y"]) + "\n")
    added = [tokenizers.AddedToken("ab", lstrip=True), tokenizers.AddedToken("abc"),
             tokenizers.AddedToken("bc", rstrip=True), tokenizers.AddedToken("c", single_word=True, lstrip=True),
             tokenizers.AddedToken("<M>", lstrip=True, rstrip=True, normalized=False, special=True)]
    rng = random.Random(3)
    parts = ["ab", "abc", "bc", "c", "x", "<M>", "<m>", "AB", " ", "  ", "\t", "y"]
    texts = [" abc", "x abc", "ab  <M>  bc  c", "\u3000ab\u00a0abc"] + [
        "".join(rng.choice(parts) for _ in range(rng.randrange(8))) for _ in range(150)]
    for lowercase in (True, False):
        hf = transformers.BertTokenizerFast(f"{folder}/vocab.txt", do_lower_case=lowercase)
        hf.add_tokens(added[:4])
        hf.add_special_tokens({"additional_special_tokens": added[4:]})
        spec = json.loads(hf.backend_tokenizer.to_str())
        vocabulary = [t for t, _ in sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])]
        vocabulary += [e["content"] for e in sorted(spec["added_tokens"], key=lambda e: e["id"])
                       if e["id"] >= len(vocabulary)]
        tokenizer = BertTokenizer(vocabulary=vocabulary, lowercase=lowercase, added_tokens=spec["added_tokens"])
        got = _our_tokens(tokenizer, texts)
        assert got[:2] == [([vocabulary.index("abc")], [[1, 4]]), ([5, vocabulary.index("abc")], [[0, 1], [2, 5]])]
        assert [text for text, ours in zip(texts, got) if ours != _hf_tokens(hf, text)] == []


def test_tokenize_split_finds_added_tokens_as_tokenize_does():
    """`tokenize_split` is `tokenize` without a pre_tokenizer (its docstring), but it ran BERT's rules
    alone: a tokenizer given added tokens split "[NEW]" into [, new, ] there."""
    tokenizer = BertTokenizer(vocabulary=WORDPIECES + ["[NEW]"], added_tokens=["[NEW]"])
    texts = ["hello[NEW] world", "[NEW]", ""]
    assert tokenizer.tokenize_split(texts).to_list() == [[5, 37, 6], [37], []]
    assert tokenizer.tokenize_split(texts).to_list() == tokenizer.tokenize(texts).to_list()
    graph = tf.function(lambda s: tokenizer.tokenize_split(s).to_tensor(-1))
    assert graph(tf.constant(texts)).numpy().tolist() == [[5, 37, 6], [37, -1, -1], [-1, -1, -1]]


_MANY_SCRIPT = """
import json, sys
from pipelines import BertTokenizer
spec = json.load(open(sys.argv[1]))
tokenizer = BertTokenizer(vocabulary=spec["vocabulary"], lowercase=spec["lowercase"], added_tokens=spec["added"])
ids, begin, end = (t.to_list() for t in tokenizer.tokenize_with_offsets(spec["texts"]))
print(json.dumps([ids, begin, end]))
"""


@pytest.mark.parametrize("count", [5000, pytest.param(40000, marks=pytest.mark.slow)])
def test_many_added_tokens_match_transformers_without_re2_running_out_of_memory(tmp_path, count):
    """One RE2 alternation of all the tokens outgrew RE2's memory (thousands of "DFA out of memory"
    lines on stderr, 7.6 s for 256 short texts with 40,000 tokens): the tokens are now looked up by
    hash at every character, whatever their number."""
    import os
    import subprocess
    import sys

    rng = random.Random(count)
    letters = "abcdefghijklmnopqrstuvwxyz"  # HF matches uncased tokens after stripping accents: not here
    words = sorted({"".join(rng.choice(letters) for _ in range(rng.randrange(2, 9))) for _ in range(count)})
    added = ([tokenizers.AddedToken(f"<e{i}>", normalized=False) for i in range(count // 4)]
             + [tokenizers.AddedToken(w, lstrip=i % 5 == 0, rstrip=i % 7 == 0) for i, w in enumerate(words)])
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(WORDPIECES) + "\n")
    hf = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    hf.add_tokens(added)
    spec = json.loads(hf.backend_tokenizer.to_str())
    vocabulary = [t for t, _ in sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])]
    vocabulary += [e["content"] for e in sorted(spec["added_tokens"], key=lambda e: e["id"])
                   if e["id"] >= len(vocabulary)]
    pool = words[:200] + [f"<e{i}>" for i in range(0, count // 4, 37)] + ["<E1>", "Hello", " ", "x", ",", "한국어"]
    texts = ["".join(rng.choice(pool) + rng.choice(["", " ", " "]) for _ in range(rng.randrange(20)))
             for _ in range(40)] + ["", " ".join(words[-5:]).upper(), "<e1><e12>x<e1>"]
    (tmp_path / "spec.json").write_text(json.dumps(
        {"vocabulary": vocabulary, "lowercase": True, "added": spec["added_tokens"], "texts": texts}))
    run = subprocess.run([sys.executable, "-c", _MANY_SCRIPT, str(tmp_path / "spec.json")], capture_output=True,
                         text=True, timeout=400, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "out of memory" not in run.stderr
    ids, begin, end = json.loads(run.stdout.strip().splitlines()[-1])
    got = []
    for row, text in enumerate(texts):
        chars = byte_to_char_offsets(text)
        got.append((ids[row], [[int(chars[b]), int(chars[e])] for b, e in zip(begin[row], end[row])]))
    expected = [_hf_tokens(hf, text) for text in texts]
    assert [text for text, a, b in zip(texts, got, expected) if a != b] == []
    assert sum(len(i) for i in ids) > 200
