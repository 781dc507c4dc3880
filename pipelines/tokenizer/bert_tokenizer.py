"""`BertTokenizer`: the original BERT tokenization, inside the TensorFlow graph."""

import collections

import numpy as np
import tensorflow as tf

from pipelines import row_ops
from pipelines.tokenizer.core_ops import CoreWordpiece
from pipelines.tokenizer.normalize import BertPreTokenizer, resolved_strip_accents
# tokenization.py's `WordpieceTokenizer(max_input_chars_per_word=200)` (HF tokenizers use 100;
# `resolve_tokenizer_settings` reads a checkpoint's own).
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD
from pipelines.tokenizer.vocab import (
    VocabularyError,
    load_vocabulary,
    special_tokens_from_vocabulary,
)

BACKENDS = ("tf_text", "core")

# How many `pipeline_function` map steps a tokenizer keeps (each holds its traces).
PIPELINE_STEPS_KEPT = 32

# Stands in for words longer than the limit: a code point no vocabulary should
# contain, so the word piece step answers [UNK] for it in one step.
_LONG_WORD_SENTINEL = "\U0010FFFF"


def string_tensor(strings):
    """`strings` (a string, a list or numpy array of them, or a tensor) as a `tf.string` tensor.

    A Python `str` holding an unpaired surrogate (U+D800..U+DFFF, not a character: what
    `json.loads` makes of a lone "\\ud83d" escape, or `errors="surrogateescape"` of an invalid
    byte) cannot be UTF-8 encoded; TensorFlow then said only "Error converting unicode string
    while converting Python sequence to Tensor". It is refused naming the text and the character.

    >>> string_tensor(["ok", "a\\ud83db"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: text 1 holds an unpaired surrogate U+D83D at character 1 ('a\\ud83db'): it is not a character...
    """
    try:
        return tf.convert_to_tensor(strings, tf.string)
    except (ValueError, UnicodeEncodeError):
        for index, text in enumerate(_flat_texts(strings)):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                shown = text if len(text) <= 60 else text[max(error.start - 30, 0):error.start + 30]
                raise ValueError(
                    f"text {index} holds an unpaired surrogate U+{ord(text[error.start]):04X} at character "
                    f"{error.start} ({shown!r}): it is not a character and UTF-8 cannot encode it; replace it "
                    '(text.encode("utf-8", "replace").decode("utf-8")) or join the surrogate pair '
                    '(text.encode("utf-16", "surrogatepass").decode("utf-16"))') from None
        raise


def _flat_texts(value):
    """The `str`s of a string, or of (nested) lists, tuples and numpy arrays of them, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple, np.ndarray)):
        for item in value:
            yield from _flat_texts(item)


class _EagerFunctionCache:
    """A plain holder of `tf.function`s: an untracked attribute of a `tf.Module`."""

    def __init__(self):
        self.by_key = {}
        self.called_once = set()  # keys whose first eager call ran op by op
        # `BertTokenizer.pipeline_function`'s, by the caller's key, least recently used first.
        self.pipeline_steps = collections.OrderedDict()


class _VocabularyHolder:
    """The tokens in id order, untracked by `tf.Module`: tracking wraps each of the 30,000 strings
    (0.2 s a tokenizer); their tensor (for `detokenize`) is made on first use."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.tensor = None


class _AddedHolder:
    """A plain holder of the added-token splitter (untracked by `tf.Module`)."""

    def __init__(self, splitter):
        self.splitter = splitter


class _NoteHolder:
    """A plain holder of the decomposed-Hangul note (untracked by `tf.Module`)."""

    def __init__(self, note):
        self.note = note


class _HostSplitter:
    """A plain holder of the morpheme analyzer (a Python object, untracked by `tf.Module`)."""

    def __init__(self, splitter):
        self.splitter = splitter


def _warn_if_learned_otherwise(vocab_file, lowercase, strip_accents):
    """Warns when a tokenizer made with the default rules reads a vocabulary whose tokenizer_config.json
    records other ones. Like HF's `BertTokenizer(vocab_file)`, the constructor does not read that file
    (`resolve_tokenizer_settings` does); but `BertTokenizer("ko/vocab.txt")` on a Korean vocabulary
    (`bert-keras vocab --no-strip-accents`) decomposes every Hangul syllable into jamo and reads all
    Korean words as [UNK], silently."""
    import warnings

    from pipelines.tokenizer.tokenizer_config import (TokenizerSettingsError, read_tokenizer_settings,
                                                      tokenizer_config_path)

    try:
        recorded = read_tokenizer_settings(vocab_file)
    except (TokenizerSettingsError, OSError):
        return  # a broken file is for the readers of the settings to report
    if not recorded:
        return
    learned = (recorded.get("lowercase", True),
               resolved_strip_accents(recorded.get("lowercase", True), recorded.get("strip_accents")))
    if learned != (lowercase, strip_accents):
        warnings.warn(
            f"{tokenizer_config_path(vocab_file)} records lowercase={learned[0]}, strip_accents={learned[1]}; "
            f"this tokenizer uses the defaults lowercase={lowercase}, strip_accents={strip_accents} (it does "
            f"not read that file). Pass lowercase={learned[0]}, strip_accents={learned[1]} to read text as "
            "the vocabulary was learned.", stacklevel=3)


class BertTokenizer(tf.Module):
    """BERT WordPiece tokenization that reproduces google-research/bert exactly, in graph.

    Text is cleaned, CJK-spaced, (for uncased models) lowercased, NFD-decomposed
    and stripped of accents, split on whitespace and punctuation, and split
    into word pieces by greedy longest-match-first, exactly as `FullTokenizer`
    of the original `tokenization.py`. Every op is a TensorFlow graph op, so the
    tokenizer runs in `tf.data`, in `tf.function` and inside a SavedModel.
    Offsets point into the ORIGINAL input bytes.

    Called eagerly, `tokenize`, `tokenize_with_offsets` and `detokenize` run
    one cached `tf.function` per input rank (every dimension unknown, so one
    trace whatever the batch size): eager calls run at graph speed, with the
    same ids and offsets. Inside a graph they add their ops to it.

    Two backends give identical ids and offsets:
    - `"tf_text"` (default): word pieces with TF-Text's FastWordpiece (fast).
      Strings TF-Text's own normalizer and splitter handle exactly as the
      original (all printable ASCII; for ids, most other scripts: see
      `tf_text_agreement`) skip the exact pre-tokenizer.
    - `"core"`: core TensorFlow ops only, for SavedModels that must load on a
      stock TensorFlow Serving whose bundled TF-Text ops lag pip.

    Example:

    >>> tokenizer = BertTokenizer("vocab.txt", lowercase=True)
    >>> ids = tokenizer.tokenize(["Hello, world!"])        # RaggedTensor int64
    >>> ids, begin, end = tokenizer.tokenize_with_offsets(["Hello, world!"])
    >>> tokenizer.detokenize(ids).numpy().tolist()
    [b'hello , world !']

    Korean (and other) vocabularies that hold whole syllables or accented letters need
    `strip_accents=False`: the uncased rules otherwise NFD-decompose every Hangul syllable into
    conjoining jamo, as the original uncased BERT does.

    >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘", "##은"],
    ...                           lowercase=True, strip_accents=False)
    >>> tokenizer.tokenize(["오늘은"]).to_list()
    [[4, 5]]

    Args:
        vocab_file: path of a `vocab.txt` (one token per line, line = id).
        lowercase: uncased rules (`do_lower_case=True` in the original).
        strip_accents: NFD-decompose and drop combining marks (Mn). None (default) follows
            `lowercase`, as HF's `BertTokenizer`; False with `lowercase=True` lowercases only,
            keeping accents and Hangul syllables whole.
        pre_tokenizer: None, or a morpheme analyzer (`"kiwi"`,
            `pipelines.tokenizer.morphemes.PRE_TOKENIZERS`) that splits every text at its
            morpheme boundaries before anything else, for vocabularies learned on morphemes as
            words (`bert-keras vocab --pre-tokenizer kiwi`). It runs on the host (Python, a
            `tf.py_function` in graphs and `tf.data`), so a tokenizer with it cannot be saved in
            a SavedModel; offsets still point into the original text.
        vocabulary: the token list itself, instead of `vocab_file`.
        backend: `"tf_text"` or `"core"`.
        max_input_chars_per_word: words longer than this become [UNK] (200 as
            the original; 100 reproduces HF tokenizers; `load_tokenizer` and the tasks read
            a checkpoint's own, `resolve_tokenizer_settings`).
        unk_token, cls_token, sep_token, pad_token, mask_token: the special
            token strings of this vocabulary; their ids are looked up.
        unicode_normalization: None (default, the original's and HF's rule: text read as given), or
            `"NFC"`: every text composed first, in the graph (TF-Text's `NormalizeUTF8WithOffsetsMap`;
            the `"tf_text"` backend only), offsets still into the original bytes. For Hangul that
            arrives decomposed (NFD conjoining jamo: macOS file names, some web scrapes), which a
            Korean vocabulary of syllables reads as [UNK]; without it, such text warns once
            (`pipelines.tokenizer.composition`).
        added_tokens: tokens found whole before the text is split, as HF's added tokens
            (`add_tokens`, `additional_special_tokens`): strings, tokenizer.json's `"added_tokens"`
            dicts or `tokenizers.AddedToken`s, with their `special` / `normalized` / `lstrip` /
            `rstrip` / `single_word` flags (`pipelines.tokenizer.added_tokens`). Each must be a
            line of the vocabulary (its id). None (default): the original rules, which split
            `[NEW]` into `[`, `new`, `]`.
    """

    def __init__(
        self,
        vocab_file=None,
        lowercase=True,
        *,
        strip_accents=None,
        pre_tokenizer=None,
        vocabulary=None,
        backend="tf_text",
        max_input_chars_per_word=ORIGINAL_MAX_CHARS_PER_WORD,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        added_tokens=None,
        unicode_normalization=None,
        name=None,
    ):
        super().__init__(name=name)
        if (vocab_file is None) == (vocabulary is None):
            raise ValueError("Pass exactly one of `vocab_file` or `vocabulary`.")
        if backend not in BACKENDS:
            raise ValueError(f"Unknown tokenizer backend {backend!r}; choose one of {BACKENDS}.")
        if int(max_input_chars_per_word) < 1:
            raise ValueError("max_input_chars_per_word must be at least 1.")
        tokens = load_vocabulary(vocab_file) if vocabulary is None else list(vocabulary)
        source = vocab_file if vocab_file is not None else "the vocabulary"
        if vocabulary is not None and len(set(tokens)) != len(tokens):  # load_vocabulary checks a file's
            first = {}
            for index, token in enumerate(tokens):
                if first.setdefault(token, index) != index:
                    raise VocabularyError(f"vocabulary=: token {token!r} appears twice, at ids {first[token]} and "
                                          f"{index}. Each token needs exactly one id.")
        self.special_tokens = special_tokens_from_vocabulary(
            tokens, pad=pad_token, unk=unk_token, cls=cls_token, sep=sep_token,
            mask=mask_token, require_mask=False, source=source,
        )
        if _LONG_WORD_SENTINEL in tokens or "##" + _LONG_WORD_SENTINEL in tokens:
            raise VocabularyError(f"{source} contains U+10FFFF, which the tokenizer reserves.")
        self._vocabulary = _VocabularyHolder(tokens)
        self.vocab_file = vocab_file
        self.lowercase = bool(lowercase)
        self.strip_accents = resolved_strip_accents(lowercase, strip_accents)
        if vocab_file is not None and lowercase is True and strip_accents is None:
            _warn_if_learned_otherwise(vocab_file, self.lowercase, self.strip_accents)
        self.backend = backend
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        from pipelines.tokenizer.composition import DecomposedHangulNote, NfcStep, checked_unicode_normalization

        self.unicode_normalization = checked_unicode_normalization(unicode_normalization)
        if self.unicode_normalization is not None and backend == "core":
            raise ValueError(f'unicode_normalization="{self.unicode_normalization}" runs TF-Text\'s '
                             'NormalizeUTF8WithOffsetsMap, which the "core" backend (core TensorFlow ops only) cannot '
                             'hold; use backend="tf_text" (bert-keras: --tokenizer tf_text; stock TF Serving 2.20 / '
                             '2.21 bundle that op), or compose the text before it reaches the tokenizer '
                             '(unicodedata.normalize("NFC", text))')
        self._nfc = None if self.unicode_normalization is None else NfcStep(self.unicode_normalization)
        # Text read as given: decomposed Hangul that this vocabulary holds only composed warns once.
        self._note = _NoteHolder(DecomposedHangulNote(tokens) if self.unicode_normalization is None
                                 and not self.strip_accents else None)
        self.pre_tokenizer = BertPreTokenizer(lowercase=lowercase, strip_accents=self.strip_accents)
        if backend == "core":
            self.wordpiece = CoreWordpiece(tokens, unk_token=unk_token)
        else:
            # Imported here so that the core backend never loads TF-Text ops.
            from pipelines.tokenizer import wordpiece

            self.wordpiece = wordpiece.FastWordpiece(
                tokens, unk_token=unk_token, max_chars_per_word=self.max_input_chars_per_word
            )
            self._ascii_pattern = wordpiece.ASCII_SAFE_PATTERN
            self._ascii = wordpiece.FastAsciiWordpiece(
                tokens, lowercase=self.lowercase, unk_token=unk_token,
                max_chars_per_word=self.max_input_chars_per_word,
            )
            from pipelines.tokenizer import tf_text_agreement

            self._agreeing_patterns = tf_text_agreement.fast_path_patterns(
                self.lowercase, self.max_input_chars_per_word, self.strip_accents)
            self._agreeing = None if self._agreeing_patterns is None else wordpiece.FastAgreeingWordpiece(
                tokens, lowercase=self.lowercase, strip_accents=self.strip_accents, unk_token=unk_token,
                max_chars_per_word=self.max_input_chars_per_word,
            )
        self._added = None
        if added_tokens:
            from pipelines.tokenizer.added_tokens import AddedTokenSplitter, added_token_entries

            if pre_tokenizer is not None:
                raise ValueError("added_tokens cannot be combined with pre_tokenizer (the morpheme analyzer "
                                 "splits the text before the added tokens could be found)")
            self._added = _AddedHolder(AddedTokenSplitter(added_token_entries(added_tokens, tokens), self.lowercase,
                                                            self.strip_accents))
        self._eager_functions = _EagerFunctionCache()
        self.morpheme_analyzer = None  # the name of `pre_tokenizer` (`self.pre_tokenizer` is BERT's)
        self._host = None
        if pre_tokenizer is not None:
            from pipelines.tokenizer.morphemes import morpheme_splitter

            splitter = morpheme_splitter(pre_tokenizer).load()  # a missing analyzer fails here, by name
            self.morpheme_analyzer = pre_tokenizer if isinstance(pre_tokenizer, str) else type(splitter).__name__
            self._host = _HostSplitter(splitter)

    @property
    def vocabulary(self):
        """The tokens in id order (a list of strings)."""
        return self._vocabulary.tokens

    @property
    def added_tokens(self):
        """The added tokens as plain dicts (`content`, `id`, `special`, `normalized`, `lstrip`, `rstrip`,
        `single_word`), in the order given; [] without any."""
        return [] if self._added is None else [dict(entry) for entry in self._added.splitter.entries]

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    @property
    def uses_tf_text_ops(self):
        return self.wordpiece.uses_tf_text_ops

    def token_to_id(self, token):
        return self.vocabulary.index(token)

    def id_to_token(self, token_id):
        return self.vocabulary[int(token_id)]

    # -- public API: eager calls run a cached graph, graph calls the ops ----

    @tf.autograph.experimental.do_not_convert  # graph code as written: tracing it is 10x faster
    def tokenize(self, strings):
        """Token ids (no special tokens added): RaggedTensor int64 [batch, (tokens)].

        A scalar string gives a dense 1-D tensor. Called eagerly, it runs a
        `tf.function` traced once per input rank (see `eager_functions`);
        inside a graph (`tf.data`, `tf.function`, export) it adds the ops.

        Example:

        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "!"])
        >>> tokenizer.tokenize(["Hello!", "hello hello"]).to_list()
        [[4, 5], [4, 4]]

        Args:
            strings: a string, or a 1-D batch of strings (list, numpy array or
                tensor), UTF-8.
        """
        strings = string_tensor(strings)
        if tf.executing_eagerly():
            self._check_eager(strings)
            return self._eager_function(self._tokenize_ops, strings)(strings)
        return self._tokenize_ops(strings)

    @property
    def morpheme_splitter(self):
        """The `pipelines.tokenizer.morphemes.MorphemeSplitter` of `pre_tokenizer`, or None."""
        return None if self._host is None else self._host.splitter

    @tf.autograph.experimental.do_not_convert
    def tokenize_split(self, strings):
        """`tokenize` of a 1-D batch of strings split at their morpheme boundaries already (a space at
        each, as `morpheme_splitter.spaced` writes them): the analyzer does not run again (on a lone
        morpheme it may cut where the whole text's analysis did not). Without `pre_tokenizer`, `tokenize`."""
        strings = string_tensor(strings)
        if tf.executing_eagerly():
            return self._eager_function(self._tokenize_split_ops, strings)(strings)
        return self._tokenize_split_ops(strings)

    def _tokenize_split_ops(self, strings):
        if self._nfc is not None:
            strings = self._nfc.compose(strings)[0]
        if self._added is not None:  # no analyzer then (refused with added tokens): `tokenize`'s ops
            return self._tokenize_with_added(strings, with_offsets=False)[0]
        return self._tokenize_in_graph(strings, with_offsets=False)[0]

    def traced_tokenize(self, strings):
        """`tokenize` as a call of one `tf.function`, traced once per tokenizer and input rank.

        For `tf.data` maps: each new pipeline (every `fit`, `evaluate` and `predict` call builds
        one) calls the traced function instead of adding the tokenizer's ops to its own graph
        again, which cost ~0.5 s a call. Not for exports: a SavedModel keeps the ops themselves
        (`tokenize` in a graph), as the op audit reads them. Called eagerly, it is `tokenize`
        (its first call of a kind op by op).

        Args:
            strings: a 1-D batch of strings (a tensor in a graph, or anything `tokenize` takes).
        """
        strings = string_tensor(strings)
        return self._eager_function(self._tokenize_ops, strings)(strings)

    @tf.autograph.experimental.do_not_convert  # graph code as written: tracing it is 10x faster
    def tokenize_with_offsets(self, strings):
        """(ids, begin, end): begin/end are byte offsets into the original strings.

        `strings[i][begin[i][j]:end[i][j]]` is the original text of token j
        (all of it for each piece when one character became several pieces,
        e.g. a Hangul syllable decomposed by NFD). Eager calls run a cached
        graph, as `tokenize`.

        Args:
            strings: a string, or a 1-D batch of strings.
        """
        strings = string_tensor(strings)
        if tf.executing_eagerly():
            self._check_eager(strings)
            return self._eager_function(self._tokenize_with_offsets_ops, strings)(strings)
        return self._tokenize_with_offsets_ops(strings)

    def token_records(self, texts):
        """Per text, each token as a dict: `token`, `id`, UTF-8 byte `start` / `end` (the offsets of
        `tokenize_with_offsets`), the same span in code points, `start_char` / `end_char` (Python's
        `text[start_char:end_char]`, the offsets task predictions give), and the `text` it came from.

        What `bert-keras tokenize` shows; eager only.

        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "!"])
        >>> tokenizer.token_records(["Héllo!"])[0][1]
        {'token': '!', 'id': 5, 'start': 6, 'end': 7, 'start_char': 5, 'end_char': 6, 'text': '!'}
        """
        from pipelines.tokenizer.char_offsets import byte_to_char_offsets

        ids, begin, end = (tensor.to_list() for tensor in self.tokenize_with_offsets(list(texts)))
        records = []
        for row, text in enumerate(texts):
            raw, chars = text.encode("utf-8"), byte_to_char_offsets(text)
            records.append([{"token": self.id_to_token(i), "id": i, "start": b, "end": e,
                             "start_char": int(chars[b]), "end_char": int(chars[e]),
                             "text": raw[b:e].decode("utf-8", "replace")}
                            for i, b, e in zip(ids[row], begin[row], end[row])])
        return records

    def packed_rows(self, texts, pair=None, seq_length=None):
        """`texts` packed as the encoder reads them (`[CLS] text [SEP] pair [SEP]`); eager only.

        What `bert-keras tokenize --pair / --seq-length` shows: `{"token_ids", "segment_ids",
        "padding_mask"}`, one list per text, padded to `seq_length` (None: to the longest, at most 512).

        Args:
            texts: the first segments.
            pair: a second segment, the same for every text (None: single texts).
            seq_length: the packed length.
        """
        from pipelines.packing import BertPacker

        special = self.special_tokens
        packer = BertPacker(seq_length or 512, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad,
                            pad_to="fixed" if seq_length else "longest")
        ids = self.tokenize(string_tensor(texts))
        segments = (ids,) if pair is None else (ids, self.tokenize(string_tensor([pair] * len(texts))))
        return {k: v.numpy().tolist() for k, v in packer(segments).items()}

    def tokenization_records(self, texts, pair=None, seq_length=None):
        """What `bert-keras tokenize` prints per text: `{"text", "tokens"}` (`token_records`), and the
        `packed_rows` (`token_ids`, `segment_ids`, `padding_mask`) when `pair` or `seq_length` is given.

        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "!"])
        >>> record = tokenizer.tokenization_records(["Hello!"], seq_length=6)[0]
        >>> print("\\n".join(tokenization_lines(record)))
        'Hello!': 2 tokens
               4  hello                [0:5] 'Hello'
               5  !                    [5:6] '!'
          token_ids:   [2, 4, 5, 3, 0, 0]
          segment_ids: [0, 0, 0, 0, 0, 0]
          padding_mask: [1, 1, 1, 1, 0, 0]
        """
        packed = self.packed_rows(texts, pair, seq_length) if pair is not None or seq_length else {}
        return [{"text": text, "tokens": tokens, **{key: rows[row] for key, rows in packed.items()}}
                for row, (text, tokens) in enumerate(zip(texts, self.token_records(texts)))]

    @tf.autograph.experimental.do_not_convert  # graph code as written: tracing it is 10x faster
    def detokenize(self, ids):
        """Joins word pieces back into text (one string per row; normalized text).

        Args:
            ids: int ids `[batch, (tokens)]` (ragged or dense) or one row `[tokens]`.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
        if tf.executing_eagerly():
            return self._eager_function(self._detokenize_ops, ids)(ids)
        return self._detokenize_ops(ids)

    def _eager_function(self, method, value):
        """What runs `method` on inputs like `value`: the cached `tf.function`, every dimension unknown.

        One trace per (method, rank, dtype, raggedness) for the life of this
        tokenizer, whatever the batch size or string lengths: eager calls run
        as one graph instead of op by op (several times faster on 1,024
        lines). The first eager call of a kind runs op by op instead: a
        one-off call (a script's one `tokenize`, `bert-keras tokenize`) pays
        no trace (about 0.4 s; op by op, 0.1 s for a short batch), and the
        second call traces. Inside a graph (`tf.data`, `traced_tokenize`) it
        is always the `tf.function`. Kept in a plain object, not a tracked
        attribute, so that a SavedModel holding the tokenizer does not save
        these functions.
        """
        if isinstance(value, tf.RaggedTensor):
            spec = tf.RaggedTensorSpec(
                [None] * value.shape.rank, value.dtype, value.ragged_rank, value.row_splits.dtype
            )
        else:
            spec = tf.TensorSpec([None] * value.shape.rank, value.dtype)
        key = (method.__name__, spec)
        functions = self._eager_functions.by_key
        if key not in functions and tf.executing_eagerly() and key not in self._eager_functions.called_once:
            self._eager_functions.called_once.add(key)
            return method
        if key not in functions:
            # autograph=False: the ops are graph code as written (as in `tf.data`, where the
            # public methods are `do_not_convert`); converting them took ~4 s per first call.
            functions[key] = tf.function(method, input_signature=[spec], autograph=False)
        return functions[key]

    def pipeline_function(self, key, function):
        """`function`, a `tf.data` map step built around this tokenizer, as a `tf.function` kept
        for the life of the tokenizer under `key`.

        Every `fit`, `evaluate` and `predict` call builds a new pipeline, and `Dataset.map`
        traces its function anew each time: for a classifier's `predict` of a few texts, the
        windowing and packing around the tokenizer took ~50 ms of a 0.37 s call. A map of the
        kept function calls its trace instead (one trace per input signature). `key` must name
        everything `function` closes over besides this tokenizer (lengths, strides, flags):
        the first function given for a key is the one kept. The `PIPELINE_STEPS_KEPT` most
        recently used keys are kept (a process that calls `predict` with ever new lengths
        does not grow without bound). Not saved with the tokenizer.
        """
        steps = self._eager_functions.pipeline_steps
        if key in steps:
            steps.move_to_end(key)
            return steps[key]
        steps[key] = tf.function(function, autograph=False)
        while len(steps) > PIPELINE_STEPS_KEPT:
            steps.popitem(last=False)
        return steps[key]

    @property
    def eager_functions(self):
        """The `tf.function`s eager calls have traced so far, keyed by (method, input spec)."""
        return dict(self._eager_functions.by_key)

    def _tokenize_ops(self, strings):
        if strings.shape.rank == 0:
            return self._tokenize_batch(strings[None], with_offsets=False)[0][0]
        return self._tokenize_batch(strings, with_offsets=False)[0]

    def _tokenize_with_offsets_ops(self, strings):
        if strings.shape.rank == 0:
            ids, begin, end = self._tokenize_batch(strings[None], with_offsets=True)
            return ids[0], begin[0], end[0]
        return self._tokenize_batch(strings, with_offsets=True)

    def _detokenize_ops(self, ids):
        if self._vocabulary.tensor is None:
            with tf.init_scope():  # an eager constant, captured by any graph that detokenizes
                self._vocabulary.tensor = tf.constant(self.vocabulary)
        tokens = tf.gather(self._vocabulary.tensor, ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.strip(tf.strings.regex_replace(text, " ##", ""))

    def check_composition(self, texts, where="text", first=0, names=None):
        """Warns, once for the life of this tokenizer, when `texts` (strings or UTF-8 bytes) hold Hangul
        in decomposed form (NFD jamo) that this vocabulary holds only composed, which reads as [UNK]; the
        warning names `unicode_normalization="NFC"`. Eager `tokenize` calls and the tasks' `fit` /
        `predict` / `score` texts are checked, of every family (a `tf.data.Dataset` given to `fit` in its one
        pass of checks, `first` the position of `texts[0]` in it; `names`: one name per text, for texts read
        from files); nothing to say with `unicode_normalization` set or accents stripped.

        >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "오늘"], strip_accents=False)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     tokenizer.check_composition(["\u110b\u1169\u1102\u1173\u11af"])
        >>> "unicode_normalization" in str(caught[0].message)
        True
        """
        if self._note.note is not None:
            self._note.note.check(texts, where, stacklevel=4, first=first, names=names)

    @property
    def checks_composition(self):
        """Whether `check_composition` has anything left to say: the vocabulary is read as given (no
        `unicode_normalization`, accents kept) and it has not warned yet."""
        return self._note.note is not None and not self._note.note.warned

    def stream_checked_composition(self, texts, position, where="text"):
        """`check_composition` in a `tf.data` map, for a stream that is never read through first: `texts`
        (one element's string tensor) come back as they are, checked as they stream and named
        `where[position]` (`position`: the element's index in the stream); the host is called only for an
        element holding conjoining jamo (U+1100-U+11FF), until the warning is given."""
        if not self.checks_composition:
            return texts
        return self._note.note.stream_checked(texts, position, where)

    def _check_eager(self, strings):
        if self._note.note is not None and not self._note.note.warned:
            self._note.note.check(np.ravel(strings.numpy()), "text", stacklevel=5)

    def _tokenize_batch(self, strings, with_offsets):
        """(ids,) or (ids, begin, end) for a batch of strings; with `unicode_normalization`, of the
        strings composed first, offsets mapped back (`NfcStep`)."""
        if self._nfc is None:
            return self._tokenize_given(strings, with_offsets)
        composed, maps = self._nfc.compose(strings)
        result = self._tokenize_given(composed, with_offsets)
        if not with_offsets:
            return result
        ids, begin, end = result
        return ids, self._nfc.source_offsets(maps, begin), self._nfc.source_offsets(maps, end)

    def _tokenize_given(self, strings, with_offsets):
        """(ids,) or (ids, begin, end) for a batch of strings; with a `pre_tokenizer`, of the
        strings split at their morpheme boundaries on the host, offsets mapped back."""
        if self._added is not None:
            return self._tokenize_with_added(strings, with_offsets)
        if self._host is None:
            return self._tokenize_in_graph(strings, with_offsets)
        spaced, byte_maps = self._split_on_host(strings)
        result = self._tokenize_in_graph(spaced, with_offsets)
        if not with_offsets:
            return result
        ids, begin, end = result
        row_start = tf.repeat(byte_maps.row_splits[:-1], begin.row_lengths())

        def to_original(offsets):
            return offsets.with_flat_values(tf.gather(byte_maps.flat_values, row_start + offsets.flat_values))

        return ids, to_original(begin), to_original(end)

    def _tokenize_with_added(self, strings, with_offsets):
        """(ids,) or (ids, begin, end): the added tokens found whole (one id each), the text between
        them tokenized piece by piece (`_tokenize_in_graph`), offsets into the whole string."""
        pieces, starts, piece_ids, rows = self._added.splitter.split(strings)
        is_text = piece_ids < 0
        text_index = tf.reshape(tf.where(is_text), [-1])
        added_index = tf.reshape(tf.where(tf.logical_not(is_text)), [-1])
        result = self._tokenize_in_graph(tf.gather(pieces, text_index), with_offsets)
        order = tf.math.invert_permutation(tf.concat([text_index, added_index], 0))
        nrows = tf.shape(strings, out_type=tf.int64)[0]
        ones = tf.ones_like(added_index)

        def by_row(text_values, added_values):
            """[batch, (tokens)] from the text pieces' rows and the added tokens' values, in order."""
            added = tf.RaggedTensor.from_row_lengths(added_values, ones, validate=False)
            per_piece = tf.gather(tf.concat([text_values, added], 0), order)
            return tf.RaggedTensor.from_value_rowids(per_piece, rows, nrows=nrows, validate=False).merge_dims(1, 2)

        ids = by_row(result[0], tf.gather(piece_ids, added_index))
        if not with_offsets:
            return (ids,)
        text_starts = tf.gather(starts, text_index)

        def shifted(offsets):
            return offsets.with_flat_values(offsets.flat_values + tf.repeat(text_starts, offsets.row_lengths()))

        added_begin = tf.gather(starts, added_index)
        added_end = added_begin + tf.cast(tf.strings.length(tf.gather(pieces, added_index)), tf.int64)
        return ids, by_row(shifted(result[1]), added_begin), by_row(shifted(result[2]), added_end)

    def _split_on_host(self, strings):
        """`(spaced strings, byte maps [batch, (bytes + 1)])`: the analyzer run in Python."""
        def split(values):
            spaced, maps = self._host.splitter.spaced_utf8(list(values.numpy()))
            lengths = [len(m) for m in maps]
            flat = np.concatenate(maps) if maps else np.zeros([0], np.int64)
            return (tf.constant(spaced, tf.string, shape=[len(spaced)]), flat,
                    np.asarray(lengths, np.int64))

        spaced, flat, lengths = tf.py_function(split, [strings], [tf.string, tf.int64, tf.int64])
        spaced.set_shape(strings.shape)
        flat.set_shape([None])
        lengths.set_shape([None])
        return spaced, tf.RaggedTensor.from_row_lengths(flat, lengths, validate=False)

    def _tokenize_in_graph(self, strings, with_offsets):
        """(ids,) or (ids, begin, end) for a batch of strings.

        Each string takes the fastest path that gives the original's result
        for it; rows are put back in order. With the TF-Text backend:
        printable ASCII goes through one FastWordpiece pass; for ids only,
        text whose every character TF-Text's normalizer and splitter handle as
        the original does (`tf_text_agreement`) goes through
        `FastBertNormalizer` + FastWordpiece; the rest takes the exact path.
        """
        if self.backend == "core":
            return self._tokenize_exact(strings, with_offsets)
        ascii_safe = tf.strings.regex_full_match(strings, self._ascii_pattern)
        ascii_rows = tf.reshape(tf.where(ascii_safe), [-1])
        other_rows = tf.reshape(tf.where(tf.logical_not(ascii_safe)), [-1])
        if with_offsets:
            paths = [(self._ascii.tokenize_with_offsets, ascii_rows)]
        else:
            paths = [(lambda s: (self._ascii.tokenize(s),), ascii_rows)]
            if self._agreeing is not None:
                # Only the non-ASCII strings are matched against the agreement patterns.
                agreeing_pattern, long_run_pattern = self._agreeing_patterns
                others = tf.gather(strings, other_rows)
                agreeing = tf.logical_and(tf.strings.regex_full_match(others, agreeing_pattern),
                                          tf.logical_not(tf.strings.regex_full_match(others, long_run_pattern)))
                (agreeing_rows,) = row_ops.masked([other_rows], agreeing)
                paths.append((lambda s: (self._agreeing.tokenize(s),), agreeing_rows))
                (other_rows,) = row_ops.masked([other_rows], tf.logical_not(agreeing))
        paths.append((lambda s: self._tokenize_exact(s, with_offsets), other_rows))

        results = [tokenize(tf.gather(strings, rows)) for tokenize, rows in paths]
        order = tf.math.invert_permutation(tf.concat([rows for _, rows in paths], axis=0))
        return tuple(
            tf.gather(tf.concat(parts, axis=0), order) for parts in zip(*results)
        )

    def _tokenize_exact(self, strings, with_offsets):
        """(ids,) or (ids, begin, end) by the original rules, for any strings."""
        pre = self.pre_tokenizer.pretokenize(strings, with_offsets=with_offsets)
        word_lengths = pre.word_char_splits[1:] - pre.word_char_splits[:-1]
        too_long = word_lengths > self.max_input_chars_per_word
        words = tf.where(too_long, _LONG_WORD_SENTINEL, pre.words.flat_values)
        if not with_offsets:
            # The sentinel is not in the vocabulary: a too-long word is one [UNK].
            ids = self.wordpiece.tokenize_word_ids(words, word_lengths)
            rows = tf.gather(pre.word_rows, row_ops.value_rowids(ids.row_splits))
            return (row_ops.ragged_from_rowids(ids.flat_values, rows, pre.nrows),)
        ids, begin_char, end_char = self.wordpiece.tokenize_words(words, pre)

        piece_word = row_ops.value_rowids(ids.row_splits)
        piece_too_long = tf.gather(too_long, piece_word)
        word_start = tf.gather(pre.word_char_splits, piece_word)
        # A too-long word is one [UNK] that spans the whole word.
        begin_char = tf.where(piece_too_long, tf.zeros_like(begin_char.flat_values), begin_char.flat_values)
        end_char = tf.where(piece_too_long, tf.gather(word_lengths, piece_word), end_char.flat_values)
        begin = tf.gather(pre.char_begin, word_start + begin_char)
        end = tf.gather(pre.char_end, word_start + end_char - 1)

        splits = row_ops.row_splits_of(tf.gather(pre.word_rows, piece_word), pre.nrows)  # one for all three

        def per_row(values):
            return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

        return per_row(ids.flat_values), per_row(begin), per_row(end)


def tokenization_lines(record):
    """A `tokenization_records` record as text: a heading, a line per token (id, token, byte span,
    source text), then the packed rows when the record has them."""
    lines = [f"{record['text']!r}: {len(record['tokens'])} tokens"]
    lines += [f"  {t['id']:>6}  {t['token']:<20} [{t['start']}:{t['end']}] {t['text']!r}" for t in record["tokens"]]
    if "token_ids" in record:
        lines += [f"  token_ids:   {record['token_ids']}", f"  segment_ids: {record['segment_ids']}",
                  f"  padding_mask: {record['padding_mask']}"]
    return lines
