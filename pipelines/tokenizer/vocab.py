"""WordPiece vocabularies: read, check, learn and write `vocab.txt` files.

A BERT vocabulary is a text file with one token per line; the line order is the
token id (line 1 is id 0). Word-continuation pieces carry a `##` prefix
(`"play", "##ing"`).

Everything here runs eagerly in Python: vocabularies are read once when a
tokenizer is built and learned once per corpus, never inside a graph.
"""

import collections
import dataclasses
import os
from typing import Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from pipelines.atomic_writes import write_bytes

# The learner's output order is reserved tokens first, so these get ids 0..4.
RESERVED_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

_JOINER = "##"
# Editors on Windows put a byte-order mark at the start of UTF-8 files; left in,
# it would silently become part of token 0.
_UTF8_BOM = b"\xef\xbb\xbf"


class VocabularyError(ValueError):
    """A vocabulary file or token list that cannot be used as-is."""


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def load_vocabulary(path: str) -> List[str]:
    """Reads a `vocab.txt` file: one token per line, line order is the id.

    Local paths and any filesystem `tf.io.gfile` knows (`gs://...`) work.
    Tokens are kept as written apart from the line terminator (`\\n`, `\\r\\n`, `\\r\\r\\n`) and
    whitespace around them, which the original BERT strips too; a newline after the last token
    is optional.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write("[PAD]\\n[UNK]\\nhello\\n##s\\n")
    >>> load_vocabulary(path)
    ['[PAD]', '[UNK]', 'hello', '##s']

    Args:
        path: str. Location of the vocabulary file.

    Returns:
        The tokens, `tokens[i]` being the token with id `i`.

    Raises:
        FileNotFoundError: the file does not exist.
        VocabularyError: the file is empty, is not UTF-8 (a compressed, UTF-16 or cp949 file is
            named as such), has an empty line, a NUL byte or a carriage return inside a line, or
            lists a token twice. The message names the line(s).
    """
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"Vocabulary file not found: {path}. Pass the vocab.txt that ships with "
            "the checkpoint, or learn one from your corpus with count_words() + "
            "build_vocabulary() + write_vocabulary()."
        )
    if tf.io.gfile.isdir(path):
        inside = os.path.join(path, "vocab.txt")
        hint = f": pass {inside}" if tf.io.gfile.exists(inside) else ": pass the vocab.txt file itself"
        raise VocabularyError(f"{path} is a directory, not a vocabulary file{hint}")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    if path.endswith(".json") and data.lstrip(_UTF8_BOM + b" \t\r\n").startswith(b"{"):
        # Read as lines, a JSON file failed on its second "{" or "}" ("token '{' appears twice").
        raise VocabularyError(
            f"{path} is a JSON file, not a vocab.txt (one token per line). HF's tokenizer.json holds "
            "the vocabulary of its directory: load that directory (hf:DIR) instead of --vocab / vocab_file."
        )
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    # What the data-file readers say of such bytes: a compressed file, UTF-16 / UTF-32, cp949 Korean.
    from pipelines.datasets.text_files import legacy_code_page
    from pipelines.file_kinds import packed_or_wide

    refusal = packed_or_wide(data, path, kind="a vocab.txt", kinds="vocabulary files")
    if refusal:
        raise VocabularyError(refusal)

    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # The file ended with a newline: no extra line.
    if not raw_lines:
        raise VocabularyError(f"Vocabulary file {path} is empty.")

    tokens = []
    first_line_of = {}
    for line_number, raw in enumerate(raw_lines, start=1):
        # The CRs before an LF end the line with it (`pipelines.line_ends`: "\r\r\n", a CRLF file written
        # again by Python on Windows, is one end, as the original's strip reads it).
        raw = raw.rstrip(b"\r")
        try:
            token = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            korean = (" It reads as Korean in cp949 (EUC-KR): save it as UTF-8 (iconv -f cp949 -t utf-8 FILE > "
                      "vocab.txt)." if legacy_code_page(data) == "cp949" else "")
            raise VocabularyError(
                f"{path}, line {line_number}: not valid UTF-8 ({e.reason} at byte "
                f"{e.start} of the line: {raw[:60]!r}). Vocabulary files must be UTF-8.{korean}"
            ) from None
        if "\0" in token:  # a crash's tail of zeros, or binary data: a token no text can match
            raise VocabularyError(
                f"{path}, line {line_number}: a NUL byte (0x00) in the token {token[:40]!r}; the file may be "
                "damaged (a crash leaves runs of NUL bytes): check it against the checkpoint's vocab.txt."
            )
        if "\r" in token:  # else a file of \r-ended lines read as one token: "special tokens missing"
            raise VocabularyError(
                f"{path}, line {line_number}: a carriage return (\\r) inside the line; lines end with "
                "\\n, the CRs right before it with it (\\r\\n); convert a file of \\r-ended lines: "
                "tr '\\r' '\\n' < FILE > vocab.txt."
            )
        # The original `load_vocab` strips every token (HF tokenizers trims its end): a stray
        # space after "hello" still gives "hello" its id. A line of whitespace only stays as it
        # is, a token no word matches (the original keeps it as "").
        token = token.strip() or token
        if not token:
            raise VocabularyError(
                f"{path}, line {line_number}: empty line. Every line must hold one "
                "token (its id is the line number minus 1); remove the line or put "
                "a placeholder token such as [unused0] there to keep the ids."
            )
        if token in first_line_of:
            raise VocabularyError(
                f"{path}: token {token!r} appears twice, on line "
                f"{first_line_of[token]} and line {line_number}. Each token needs "
                "exactly one id."
            )
        first_line_of[token] = line_number
        tokens.append(token)
    return tokens


# --------------------------------------------------------------------------
# Special tokens
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """Ids (and the token strings) of the special tokens BERT needs.

    Build it with `special_tokens_from_vocabulary()` rather than by hand, so the
    ids always match the vocabulary file.

    Attributes:
        pad, unk, cls, sep: int. Token ids.
        mask: int or None. Id of the mask token; None when it was not required
            and the vocabulary has none (fine for fine-tuning and inference,
            masked-LM pretraining needs it).
        pad_token, unk_token, cls_token, sep_token, mask_token: str. The token
            strings the ids were looked up with.
    """

    pad: int
    unk: int
    cls: int
    sep: int
    mask: Optional[int]
    pad_token: str = "[PAD]"
    unk_token: str = "[UNK]"
    cls_token: str = "[CLS]"
    sep_token: str = "[SEP]"
    mask_token: str = "[MASK]"


def special_tokens_from_vocabulary(
    tokens: List[str],
    *,
    pad: str = "[PAD]",
    unk: str = "[UNK]",
    cls: str = "[CLS]",
    sep: str = "[SEP]",
    mask: str = "[MASK]",
    require_mask: bool = True,
    source: Optional[str] = None,
) -> SpecialTokens:
    """Looks up the ids of BERT's special tokens in a vocabulary.

    The ids differ between vocabularies (bert-base-uncased: `[PAD]`=0,
    `[UNK]`=100, `[CLS]`=101, `[SEP]`=102, `[MASK]`=103; one made by
    `build_vocabulary()`: 0..4), so they are always read, never assumed.

    Example:

    >>> special_tokens_from_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]).cls
    2

    Args:
        tokens: list of str. The vocabulary, e.g. from `load_vocabulary()`.
        pad, unk, cls, sep, mask: str. The strings this vocabulary uses for each
            special token.
        require_mask: bool. If False, a missing mask token gives `mask=None`
            instead of an error.
        source: str or None. Where `tokens` came from (usually the file path);
            only used in error messages.

    Returns:
        A `SpecialTokens`.

    Raises:
        VocabularyError: some special tokens are not in the vocabulary; the
            message lists all of them.
    """
    ids = {token: i for i, token in enumerate(tokens)}
    wanted = {"pad": pad, "unk": unk, "cls": cls, "sep": sep}
    if require_mask:
        wanted["mask"] = mask
    missing = [f"{token} ({role})" for role, token in wanted.items() if token not in ids]
    if missing:
        where = source if source is not None else "the vocabulary"
        hint = ", or require_mask=False if you will not pretrain" if require_mask else ""
        raise VocabularyError(
            f"Special tokens missing from {where}: {', '.join(missing)}. Add them to the vocabulary, a line "
            "each (BERT's are [PAD] [UNK] [CLS] [SEP] [MASK]); from Python, you may instead pass the strings "
            f"this vocabulary uses (e.g. cls='<s>'){hint}."
        )
    return SpecialTokens(
        pad=ids[pad],
        unk=ids[unk],
        cls=ids[cls],
        sep=ids[sep],
        mask=ids.get(mask),
        pad_token=pad,
        unk_token=unk,
        cls_token=cls,
        sep_token=sep,
        mask_token=mask,
    )


# --------------------------------------------------------------------------
# Learning
# --------------------------------------------------------------------------


def count_words(
    text_dataset: tf.data.Dataset,
    pre_tokenizer,
    batch_size: int = 1024,
    progress=None,
    *,
    morphemes=None,
    morpheme_suffixes: bool = False,
    unicode_normalization=None,
) -> collections.Counter:
    """Counts the words of a text corpus, split exactly as BERT will split them.

    The counts feed `build_vocabulary()`. The words must come from the same
    pre-tokenizer (normalization, accent stripping, punctuation splitting) the
    final tokenizer uses, or the vocabulary will hold pieces that never occur
    and miss ones that do.

    With `morphemes` (Korean: a morpheme analyzer, `pipelines.tokenizer.morphemes`)
    the lines are first split into morphemes on the host, in batches, then split
    by `pre_tokenizer` as usual, so cleaning, punctuation and case rules stay
    those of the final tokenizer:

    - morphemes as words (`morpheme_suffixes=False`): each morpheme is a word
      ("오늘은" counts "오늘" and "은"). For a model that reads text split by the
      same analyzer (`MorphemeSplitter.spaced`) at training and inference.
    - morpheme suffixes (`morpheme_suffixes=True`): the first morpheme of each
      word is a word, each later one `m` the continuation word `"##" + m`
      ("오늘은" counts "오늘" and "##은"). `build_vocabulary()` learns those as
      `##` pieces, so the vocabulary splits RAW words at morpheme boundaries
      ("오늘" + "##은"): the analyzer is needed to learn it, not to use it.

    Example:

    >>> from pipelines.tokenizer.normalize import BertPreTokenizer
    >>> lines = tf.data.Dataset.from_tensor_slices(["Hello, world!", "hello"])
    >>> count_words(lines, BertPreTokenizer(lowercase=True))["hello"]
    2

    Args:
        text_dataset: `tf.data.Dataset` of scalar strings (one line or document
            each), or of string vectors (already batched).
        pre_tokenizer: object with `split(strings) -> RaggedTensor [batch,
            (words)]`, e.g. `pipelines.tokenizer.normalize.BertPreTokenizer`.
        batch_size: int. Lines split per call when the dataset is unbatched.
        progress: optional object with `update(n)` (e.g. a `tqdm` bar), told
            how many lines each batch held.
        morphemes: None, a `pipelines.tokenizer.morphemes.MorphemeSplitter`, or
            the name of one in `morphemes.PRE_TOKENIZERS` ("kiwi").
        morpheme_suffixes: with `morphemes`, count later morphemes as `##` words.
        unicode_normalization: "NFC" composes each line first, before the morpheme
            split and the pre-tokenizer, as `BertTokenizer(unicode_normalization=)`
            does (`composition.NfcStep`): composing the words afterwards put
            syllables in a vocabulary whose tokenizer strips accents into jamo.

    Returns:
        A `collections.Counter` mapping each word (str) to its count; with
        `morpheme_suffixes`, continuation words are written `"##" + morpheme`.

    Raises:
        pipelines.tokenizer.morphemes.MissingAnalyzerError: the analyzer is not
            installed (`pip install "bert-keras[korean]"` for kiwi).
    """
    spec = text_dataset.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
        raise TypeError(
            f"count_words needs a dataset of string tensors, got elements {spec}. "
            "Map it to the text field first, e.g. ds.map(lambda x: x['text'])."
        )
    if spec.shape.rank == 0:
        text_dataset = text_dataset.batch(batch_size)
    elif spec.shape.rank != 1:
        raise TypeError(
            f"count_words needs scalar strings or string vectors, got shape {spec.shape}."
        )
    if morpheme_suffixes and morphemes is None:
        raise ValueError("morpheme_suffixes=True needs a morpheme analyzer: pass morphemes='kiwi'.")
    if unicode_normalization is not None:
        from pipelines.tokenizer.composition import NfcStep

        step = NfcStep(unicode_normalization)
        text_dataset = text_dataset.map(lambda lines: step.compose(lines)[0], num_parallel_calls=tf.data.AUTOTUNE)
    if morphemes is not None:
        from pipelines.tokenizer import morphemes as morphemes_lib

        splitter = morphemes_lib.morpheme_splitter(morphemes)
        separator = morphemes_lib.MARKER if morpheme_suffixes else " "
        text_dataset = _split_on_host(text_dataset, lambda texts: splitter.marked(texts, separator))
    words_dataset = text_dataset.map(
        lambda lines: (pre_tokenizer.split(lines), tf.size(lines)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    counts = _count_word_tensors(words_dataset, progress)
    if morpheme_suffixes:
        counts = morphemes_lib.fold_marked_words(counts)
    return counts


def _split_on_host(text_dataset: tf.data.Dataset, transform) -> tf.data.Dataset:
    """The batches of `text_dataset` (string vectors) passed through `transform` (a Python
    function: list of str -> list of str) as they stream, one batch at a time."""

    def batches():
        for lines in text_dataset.as_numpy_iterator():
            # Bytes that are not UTF-8 become U+FFFD, which the pre-tokenizer drops (as TF's
            # string ops drop such bytes).
            texts = transform([line.decode("utf-8", "replace") for line in lines])
            yield tf.constant(texts, tf.string) if texts else tf.zeros([0], tf.string)

    return tf.data.Dataset.from_generator(
        batches, output_signature=tf.TensorSpec([None], tf.string)
    ).prefetch(1)


def _count_word_tensors(words_dataset: tf.data.Dataset, progress=None) -> collections.Counter:
    """Counts the strings in a dataset of word tensors (dense or ragged, any shape),
    optionally paired with the number of lines they came from."""

    def count_batch(words, lines=None):
        words = getattr(words, "flat_values", words)
        # Count inside the pipeline (parallel, in C++): Python then does one
        # update per distinct word of a batch instead of one per occurrence.
        unique = tf.unique_with_counts(tf.reshape(words, [-1]))
        return unique.y, unique.count, (tf.constant(0) if lines is None else lines)

    counts = collections.Counter()
    batches = words_dataset.map(count_batch, num_parallel_calls=tf.data.AUTOTUNE)
    for words, word_counts, lines in batches.as_numpy_iterator():
        counts.update({w.decode("utf-8"): int(c) for w, c in zip(words, word_counts)})
        if progress is not None:
            progress.update(int(lines))
    return counts


def check_reserved_tokens(reserved_tokens: List[str], vocab_size: int) -> None:
    """The checks `build_vocabulary` makes of its reserved tokens and size, for callers that can
    make them before counting a corpus (which can take hours).

    Raises:
        VocabularyError: a reserved token is empty, holds a line break or is listed twice.
        ValueError: `vocab_size` leaves no room beside the reserved tokens.
    """
    _check_token_list(reserved_tokens, what="reserved_tokens")
    if vocab_size <= len(reserved_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room beside the {len(reserved_tokens)} "
            "reserved tokens."
        )


def build_vocabulary(
    word_counts: Union[Mapping[str, int], Iterable[Tuple[str, int]], tf.data.Dataset],
    *,
    vocab_size: int,
    reserved_tokens: List[str] = RESERVED_TOKENS,
    lower_thresh: int = 1,
    upper_thresh: int = int(1e7),
    num_iterations: int = 4,
    max_input_tokens: Optional[int] = int(5e6),
    max_token_length: int = 50,
    max_unique_chars: Optional[int] = None,
    slack_ratio: float = 0.05,
    character_coverage: float = 1.0,
) -> List[str]:
    """Learns a WordPiece vocabulary from word counts.

    Runs TF-Text's WordPiece learner (the engine behind
    `bert_vocab_from_dataset`): it binary-searches a frequency threshold so the
    vocabulary lands between `vocab_size * (1 - slack_ratio)` and `vocab_size`
    tokens. The result lists `reserved_tokens` first (ids 0, 1, ...), then every
    character of the alphabet alone and with the `##` prefix -- so any word made
    of known characters tokenizes without `[UNK]` -- then the learned pieces,
    most frequent first.

    A word written with the `##` prefix ("##은", what `count_words(...,
    morpheme_suffixes=True)` counts) continues a word: its pieces are all `##`
    pieces (`pipelines.tokenizer.continuation_learner`: the same learner, taught
    such words). The BERT pre-tokenizer never makes such a word itself ('#' is
    punctuation).

    Example:

    >>> counts = {"low": 50, "lower": 20, "newest": 30, "widest": 10}
    >>> vocab = build_vocabulary(counts, vocab_size=40)
    >>> vocab[:5]
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']

    Args:
        word_counts: mapping word -> count, or (word, count) pairs, e.g. from
            `count_words()`; or a `tf.data.Dataset` of string tensors of words
            (dense or ragged, any shape) that are counted first. Words must
            come from the BERT pre-tokenizer the final tokenizer uses.
        vocab_size: int. Maximum size, reserved tokens included; the result
            is within `slack_ratio` below it when the corpus has enough distinct
            pieces. Exceeded only if the reserved tokens and the alphabet
            (every character twice) alone are larger.
        reserved_tokens: list of str. Tokens placed first, in this order. Words
            equal to one of them are not counted.
        lower_thresh: int. Lowest piece frequency the search may try. The
            learner's own default (10) leaves small corpora far below
            `vocab_size`; 1 lets the search go as low as the target needs.
        upper_thresh: int. Highest piece frequency the search may try.
        num_iterations: int. Refinement passes of the learner.
        max_input_tokens: int or None. Only the most frequent this many distinct
            words are learned from (None: all). Their characters still make the
            alphabet.
        max_token_length: int. Longer words are not learned from. Their
            characters still make the alphabet.
        max_unique_chars: int or None. Keep only the most frequent characters in
            the alphabet (None: every character seen); words with other
            characters are skipped and will tokenize to `[UNK]`.
        slack_ratio: float. How far below `vocab_size` is acceptable.
        character_coverage: float in (0, 1]. Keep the most frequent characters that
            make up this share of all character occurrences (SentencePiece's option
            and meaning); the rest, as with `max_unique_chars`, become `[UNK]`. 1.0
            keeps every character. Scripts with thousands of characters (Korean,
            Chinese, Japanese: Korean Wikipedia has ~8,700 distinct characters, whose
            alphabet alone is ~17,400 tokens with their `##` forms) need fewer, or the
            alphabet fills the whole vocabulary and no piece longer than a character is
            learned; SentencePiece's value for them is 0.9995.

    Returns:
        The vocabulary as a list of tokens, index = id. Save it with
        `write_vocabulary()`.
    """
    # Imported here so that reading vocabularies does not load TF-Text's ops.
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

    check_reserved_tokens(reserved_tokens, vocab_size)
    if isinstance(word_counts, tf.data.Dataset):
        word_counts = _count_word_tensors(word_counts)
    if isinstance(word_counts, Mapping):
        word_counts = word_counts.items()
    # Drop empty words (they would crash the learner) and merge duplicate words.
    merged = collections.Counter()
    for word, count in word_counts:
        if word and count > 0:
            merged[word] += int(count)
    if not merged:
        raise ValueError("build_vocabulary got no words to learn from (word_counts is empty).")

    from pipelines.tokenizer import continuation_learner

    if not 0.0 < character_coverage <= 1.0:
        raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}.")
    alphabet = _alphabet(merged, max_unique_chars, character_coverage)
    options = dict(
        vocab_size=vocab_size,
        reserved_tokens=list(reserved_tokens),
        upper_thresh=upper_thresh,
        lower_thresh=lower_thresh,
        num_iterations=num_iterations,
        # The learner understands -1, not None, as "no limit" in one place.
        max_input_tokens=-1 if max_input_tokens is None else max_input_tokens,
        max_token_length=max_token_length,
        # The learner has no "no limit" value here; the alphabet size is one.
        max_unique_chars=len(alphabet),
        slack_ratio=slack_ratio,
        joiner=_JOINER,
    )
    if continuation_learner.has_continuation_words(merged, _JOINER):
        vocab = continuation_learner.learn(dict(merged), **options)
    else:
        vocab = wordpiece_tokenizer_learner_lib.learn(dict(merged), include_joiner_token=True, **options)
    # The learner takes its alphabet from the words it learned from, after the
    # max_input_tokens and max_token_length cuts; a character found only in
    # rare or very long words would then be missing and such words would become
    # [UNK]. Add those characters back.
    present = set(vocab)
    for char in sorted(alphabet):
        for token in (char, _JOINER + char):
            if token not in present:
                vocab.append(token)
                present.add(token)
    return _trim_to_size(vocab, vocab_size, keep=set(reserved_tokens) | _alphabet_tokens(alphabet))


def _alphabet_tokens(alphabet) -> set:
    return set(alphabet) | {_JOINER + char for char in alphabet}


def _trim_to_size(vocab: List[str], vocab_size: int, keep: set) -> List[str]:
    """Drops the rarest learned pieces until `vocab` fits in `vocab_size`.

    When its threshold search runs out of room the learner returns whatever the
    last threshold gave, which can overshoot. Learned pieces come last, most
    frequent first, so dropping from the end removes the rarest ones; reserved
    and alphabet tokens are never dropped, so nothing becomes untokenizable.
    """
    excess = len(vocab) - vocab_size
    if excess <= 0:
        return vocab
    dropped = set()
    for token in reversed(vocab):
        if len(dropped) == excess:
            break
        if token not in keep:
            dropped.add(token)
    return [token for token in vocab if token not in dropped]


def alphabet_share(word_counts: Mapping[str, int], vocab_size: int, character_coverage: float = 1.0) -> float:
    """The share of `vocab_size` the alphabet (each character alone and as `##`) takes: at 1.0
    or more, the vocabulary holds characters only. What `bert-keras vocab` warns about.

    >>> alphabet_share({"가나다": 5, "라": 1}, vocab_size=20)
    0.4
    """
    return 2 * len(_alphabet(word_counts, None, character_coverage)) / vocab_size


def _alphabet(word_counts: Mapping[str, int], max_unique_chars: Optional[int],
              character_coverage: float = 1.0) -> set:
    """The characters of `word_counts`; the most frequent ones if limited (by number, or by the
    share of character occurrences they cover).

    Ranks exactly like the learner (count, then character), so both agree on
    which characters a limit keeps.
    """
    char_counts = collections.Counter()
    for word, count in word_counts.items():
        if word.startswith(_JOINER) and len(word) > len(_JOINER):  # a continuation word
            word = word[len(_JOINER) :]
        for char in word:
            char_counts[char] += count
    ranked = sorted(sorted(char_counts.items()), key=lambda kv: kv[1], reverse=True)
    if max_unique_chars is not None:
        ranked = ranked[:max_unique_chars]
    if character_coverage < 1.0 and ranked:
        covered = np.cumsum([count for _, count in ranked]) / sum(char_counts.values())
        ranked = ranked[: int(np.searchsorted(covered, character_coverage)) + 1]
    return {char for char, _ in ranked}


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def write_vocabulary(tokens: List[str], path: str) -> None:
    """Writes `tokens` to `path`, one per line, UTF-8, so `load_vocabulary()` reads them back.

    The file is written to a temporary file next to `path` and then renamed
    over it, so a crash or a concurrent reader never sees half a vocabulary.
    Missing parent directories are created.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocabulary(["[PAD]", "[UNK]", "a", "##a"], path)
    >>> load_vocabulary(path)
    ['[PAD]', '[UNK]', 'a', '##a']

    Args:
        tokens: list of str. The vocabulary, index = id.
        path: str. Destination; local or any `tf.io.gfile` filesystem.

    Raises:
        VocabularyError: a token is empty, contains a line break, or appears
            twice -- the file would not load back with the same ids.
    """
    path = os.fspath(path)
    _check_token_list(tokens, what="tokens")
    data = "".join(token + "\n" for token in tokens).encode("utf-8")

    write_bytes(path, data)


def _check_token_list(tokens: List[str], *, what: str) -> None:
    """Rejects token lists that cannot round-trip through a vocab.txt file. A token is named by its
    index in the list, which is its id, and by its line of vocab.txt (the id + 1): "at index 0 and 5"
    read as either."""
    def where(i):
        return f"{what}[{i}] (id {i}, line {i + 1} of vocab.txt)"

    seen = {}
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token:
            raise VocabularyError(f"{where(i)} is {token!r}; every token must be a non-empty str.")
        if "\n" in token or "\r" in token:
            raise VocabularyError(f"{where(i)} = {token!r} contains a line break.")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError as bad:  # a lone surrogate: a byte that was not UTF-8 (os.fsdecode)
            code = ord(token[bad.start])
            byte = f"byte 0x{code - 0xDC00:02x} is not valid UTF-8" if 0xDC80 <= code <= 0xDCFF else "not Unicode text"
            raise VocabularyError(f"{where(i)} = {token!r}: {byte}; a vocab.txt is UTF-8 text.") from None
        if token in seen:
            raise VocabularyError(f"{what} lists {token!r} twice: {what}[{seen[token]}] and {what}[{i}] (ids "
                                  f"{seen[token]} and {i}, lines {seen[token] + 1} and {i + 1} of vocab.txt); "
                                  "a token has one id, so list it once.")
        seen[token] = i
