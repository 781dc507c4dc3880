"""How a checkpoint's text is normalized: HF's `tokenizer_config.json` beside its vocabulary.

A model must tokenize as it was trained. HF checkpoints say how in `tokenizer_config.json`
(`do_lower_case`, `strip_accents`: Korean models have `strip_accents: false`, so that Hangul
syllables are not NFD-decomposed into jamo). This module reads that file beside a vocabulary,
writes it wherever a vocabulary is written with weights (`convert`, `save_pretrained`,
`bert-keras pretrain`), and resolves a caller's `lowercase` / `strip_accents` against it.

A vocabulary of morphemes as words (`bert-keras vocab --pre-tokenizer kiwi` without
`--morpheme-suffixes`) reads text split by that analyzer: the file records it as
`"bert_keras_pre_tokenizer": "kiwi"` (`PRE_TOKENIZER_KEY`, a key of this library's own, which HF's
`BertTokenizer` keeps and ignores), and the tasks and `load_tokenizer` split with it unless told
otherwise (`pre_tokenizer="none"`: text given already split).

A vocabulary learned on text composed to NFC (`bert-keras vocab --unicode-normalization NFC`: a corpus
of decomposed Hangul) records `"bert_keras_unicode_normalization": "NFC"` (`UNICODE_NORMALIZATION_KEY`,
HF keeps it and does not apply it), and every later step composes its text the same way unless told
otherwise (`unicode_normalization="none"`); a file without the key: text read as given.

Example:

>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> vocab = os.path.join(directory, "vocab.txt")
>>> write_tokenizer_settings(vocab, lowercase=True, strip_accents=False)
>>> read_tokenizer_settings(vocab)
{'lowercase': True, 'strip_accents': False}
>>> resolve_tokenizer_settings(vocab)  # nothing given: the checkpoint's own
{'lowercase': True, 'strip_accents': False, 'pre_tokenizer': None, 'max_input_chars_per_word': 200, 'unicode_normalization': None}
>>> resolve_tokenizer_settings(vocab, lowercase=False)  # given: yours (accents follow casing)
{'lowercase': False, 'strip_accents': None, 'pre_tokenizer': None, 'max_input_chars_per_word': 200, 'unicode_normalization': None}
>>> write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, pre_tokenizer="kiwi")
>>> read_tokenizer_settings(vocab)
{'lowercase': True, 'strip_accents': False, 'pre_tokenizer': 'kiwi'}
>>> resolve_tokenizer_settings(vocab, pre_tokenizer="none")  # text split already: no analyzer
{'lowercase': True, 'strip_accents': False, 'pre_tokenizer': None, 'max_input_chars_per_word': 200, 'unicode_normalization': None}
>>> write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, unicode_normalization="NFC")
>>> resolve_tokenizer_settings(vocab)["unicode_normalization"], resolve_tokenizer_settings(
...     vocab, unicode_normalization="none")["unicode_normalization"]
('NFC', None)
"""

import json
import os
import re
import unicodedata
import warnings

from pipelines.atomic_writes import is_remote, write_text

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

# The morpheme analyzer a vocabulary's text is split with (`pipelines.tokenizer.morphemes.PRE_TOKENIZERS`):
# a key of this library's own, which HF's tokenizers keep in the file and otherwise ignore
# (`pre_tokenizer` alone would read as the name of a `tokenizers` component).
PRE_TOKENIZER_KEY = "bert_keras_pre_tokenizer"
# `pre_tokenizer=` this says "no analyzer", even on a vocabulary that records one (text split already).
NO_PRE_TOKENIZER = "none"
# The Unicode normalization a vocabulary's text is composed with before tokenizing ("NFC":
# `pipelines.tokenizer.composition`), a key of this library's own; absent: text read as given.
UNICODE_NORMALIZATION_KEY = "bert_keras_unicode_normalization"

# The longest word WordPiece splits (longer ones are one [UNK]), as a vocabulary records it: this
# library's own key in `tokenizer_config.json` (HF's `BertTokenizer` keeps it and ignores it), else
# the WordPiece model of HF's `tokenizer.json` beside a `vocab.txt` (`"max_input_chars_per_word"`),
# else HF's fixed 100 for a `vocab.txt` of an HF directory (transformers' weights beside it),
# else the original's 200 (`ORIGINAL_MAX_CHARS_PER_WORD`).
MAX_CHARS_KEY = "bert_keras_max_input_chars_per_word"
HF_MAX_CHARS_PER_WORD = 100
ORIGINAL_MAX_CHARS_PER_WORD = 200

# HF BertTokenizer options that change how text is split, which `BertTokenizer` has no switch for.
_UNSUPPORTED_RULES = {
    "tokenize_chinese_chars": "every CJK ideograph is a word of its own here",
    "do_basic_tokenize": "text is cleaned, split at whitespace and punctuation here before WordPiece",
}


class TokenizerSettingsError(ValueError):
    """A `tokenizer_config.json` that cannot be read as BERT tokenizer settings."""


_UTF8_BOM = b"\xef\xbb\xbf"


def _is_file(path):
    """Whether `path` is a file: a local one, or one on any file system `tf.io.gfile` knows (`gs://`), where
    `load_vocabulary` reads the vocabulary beside it from (TensorFlow imported only for such a path)."""
    if is_remote(path):
        import tensorflow as tf

        return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)
    return os.path.isfile(path)


def _file_bytes(path):
    """The bytes of the file at `path` (local, or `gs://` as `_is_file`).

    Raises:
        FileNotFoundError: there is no such file; OSError: it cannot be read.
    """
    if not is_remote(path):
        with open(path, "rb") as f:
            return f.read()
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    except tf.errors.NotFoundError as error:
        raise FileNotFoundError(f"{path}: {error.message}") from None
    except tf.errors.OpError as error:
        raise OSError(f"{path}: {error.message}") from None


def _text_of(data):
    """UTF-8 `data` as text, a leading byte order mark dropped (a file saved by Notepad), as
    `load_vocabulary` reads it."""
    return (data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data).decode("utf-8")


def _json_file(path):
    """The JSON value of the file at `path` (`_file_bytes`, `_text_of`): every reader of this module alike.

    Raises:
        OSError, UnicodeDecodeError, json.JSONDecodeError: as `open` / `json.loads`.
    """
    return json.loads(_text_of(_file_bytes(path)))


def tokenizer_config_path(vocab_file):
    """Where the settings of `vocab_file` live: HF's `tokenizer_config.json` beside a `vocab.txt`
    (HF's layout); `NAME.tokenizer_config.json` beside any other vocabulary file (`NAME.vocab.txt`,
    the vocabulary of a `.keras` file, or `NAME.txt`), so that two vocabularies can share a folder.

    >>> tokenizer_config_path("ko/vocab.txt"), tokenizer_config_path("run/encoder.vocab.txt")
    ('ko/tokenizer_config.json', 'run/encoder.tokenizer_config.json')
    """
    vocab_file = os.fspath(vocab_file)
    directory, name = os.path.split(vocab_file)
    if name == "vocab.txt":
        return os.path.join(directory, TOKENIZER_CONFIG_FILE)
    stem = name[: -len(".txt")] if name.endswith(".txt") else name
    stem = stem[: -len(".vocab")] if stem.endswith(".vocab") else stem
    return os.path.join(directory, f"{stem}.{TOKENIZER_CONFIG_FILE}")


def read_tokenizer_settings(vocab_file):
    """`{"lowercase", "strip_accents", "pre_tokenizer"}` recorded beside `vocab_file` (the keys it
    records), or {}. A keras-hub preset's vocabulary has its casing in the preset's `tokenizer.json`.

    Raises:
        TokenizerSettingsError: the file is not JSON, or a field is not a boolean (null for
            `strip_accents`: follows `do_lower_case`), or `bert_keras_pre_tokenizer` is not a
            string; the message names the file and field.
    """
    if vocab_file is None:
        return {}
    path = tokenizer_config_path(vocab_file)
    if not _is_file(path):
        return {**_keras_hub_preset_settings(vocab_file), **_hf_max_chars(vocab_file)}
    try:
        config = _json_file(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerSettingsError(f"{path}: not a JSON tokenizer config ({error})") from None
    if not isinstance(config, dict):
        raise TokenizerSettingsError(f"{path}: expected a JSON object, got {type(config).__name__}")
    for key, effect in _UNSUPPORTED_RULES.items():
        if config.get(key, True) is False:  # the checkpoint was trained on text tokenized otherwise
            warnings.warn(f"{path}: {key} is false, which this library does not follow (it tokenizes as the "
                          f"original BERT): {effect}; ids differ from the checkpoint's tokenizer there",
                          stacklevel=2)
    settings = {}
    if "do_lower_case" in config:
        if not isinstance(config["do_lower_case"], bool):
            raise TokenizerSettingsError(f"{path}: field 'do_lower_case' must be true or false, "
                                         f"got {config['do_lower_case']!r}")
        settings["lowercase"] = config["do_lower_case"]
    if "strip_accents" in config:
        if config["strip_accents"] not in (None, True, False):
            raise TokenizerSettingsError(f"{path}: field 'strip_accents' must be true, false or null, "
                                         f"got {config['strip_accents']!r}")
        if config["strip_accents"] is not None:
            settings["strip_accents"] = config["strip_accents"]
    if config.get(PRE_TOKENIZER_KEY) is not None:
        if not isinstance(config[PRE_TOKENIZER_KEY], str) or not config[PRE_TOKENIZER_KEY].strip():
            raise TokenizerSettingsError(f"{path}: field {PRE_TOKENIZER_KEY!r} must name a morpheme analyzer "
                                         f"(\"kiwi\") or be null, got {config[PRE_TOKENIZER_KEY]!r}")
        settings["pre_tokenizer"] = config[PRE_TOKENIZER_KEY]
    settings.update(_normalization_of(config, path))
    if config.get(MAX_CHARS_KEY) is not None:
        settings["max_input_chars_per_word"] = checked_max_chars(config[MAX_CHARS_KEY], f"{path}: field {MAX_CHARS_KEY!r}",
                                                                 TokenizerSettingsError)
    else:
        settings.update(_hf_max_chars(vocab_file, config))
    return settings


def _recorded_max_chars(vocab_file):
    """`{"max_input_chars_per_word"}` recorded for `vocab_file` (as `read_tokenizer_settings`), or {}:
    the other fields of its `tokenizer_config.json` are not read, and a file that is not a JSON
    object records no limit (those who read the other rules report it)."""
    if vocab_file is None:
        return {}
    path, config = _config_or_none(vocab_file)
    if isinstance(config, dict) and config.get(MAX_CHARS_KEY) is not None:
        return {"max_input_chars_per_word": checked_max_chars(
            config[MAX_CHARS_KEY], f"{path}: field {MAX_CHARS_KEY!r}", TokenizerSettingsError)}
    return _hf_max_chars(vocab_file, config if isinstance(config, dict) else None)


def _normalization_of(config, path):
    """`{"unicode_normalization": "NFC"}` when `config` (the JSON object at `path`) records it, else {}.

    Raises:
        TokenizerSettingsError: the field holds another value (naming the file and field).
    """
    if not isinstance(config, dict) or config.get(UNICODE_NORMALIZATION_KEY) is None:
        return {}
    from pipelines.tokenizer.composition import checked_unicode_normalization

    try:
        form = checked_unicode_normalization(config[UNICODE_NORMALIZATION_KEY],
                                             f"{path}: field {UNICODE_NORMALIZATION_KEY!r}")
    except ValueError as error:
        raise TokenizerSettingsError(str(error)) from None
    return {} if form is None else {"unicode_normalization": form}


def _recorded_normalization(vocab_file):
    """`{"unicode_normalization"}` recorded for `vocab_file`, or {}: as `_recorded_max_chars`, the other
    fields are not read (a file that is not a JSON object records none)."""
    if vocab_file is None:
        return {}
    path, config = _config_or_none(vocab_file)
    return _normalization_of(config, path)


def _config_or_none(vocab_file):
    """`(path, JSON)` of `vocab_file`'s `tokenizer_config.json`; the JSON is None where the file is
    missing or unreadable (the readers of one field record nothing then)."""
    path = tokenizer_config_path(vocab_file)
    try:
        return path, _json_file(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return path, None


def checked_max_chars(value, where, error=ValueError):
    """`value` as a word length limit (an int of at least 1), else `error` naming `where`.

    >>> checked_max_chars(100, "max_input_chars_per_word")
    100
    """
    if type(value) is not int or value < 1:
        raise error(f"{where} must be an integer of at least 1, got {value!r}")
    return value


def _hf_max_chars(vocab_file, config=None):
    """`{"max_input_chars_per_word"}` HF's tokenizer reads the `vocab.txt` of an HF directory with:
    its `tokenizer.json`'s WordPiece `max_input_chars_per_word` (100 when unset, as `tokenizers`),
    else 100 when transformers' weights or `special_tokens_map.json` are beside it, or when its
    `tokenizer_config.json` (`config`, read already) holds a field only transformers writes
    (`model_max_length`, ...: a tokenizer-only HF directory; its `BertTokenizer` fixes 100); else {}."""
    vocab_file = os.fspath(vocab_file)
    directory, name = os.path.split(vocab_file if is_remote(vocab_file) else os.path.abspath(vocab_file))
    if name != "vocab.txt":
        return {}
    tokenizer_json = os.path.join(directory, "tokenizer.json")
    if _is_file(tokenizer_json):
        try:
            model = _json_file(tokenizer_json).get("model")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            model = None  # not HF's file: its readers report it
        if isinstance(model, dict) and model.get("type") == "WordPiece":
            value = model.get("max_input_chars_per_word", HF_MAX_CHARS_PER_WORD)
            return {"max_input_chars_per_word": checked_max_chars(
                value, f"{tokenizer_json}: field 'model.max_input_chars_per_word'", TokenizerSettingsError)}
    if any(_is_file(os.path.join(directory, name)) for name in _HF_DIRECTORY_FILES):
        return {"max_input_chars_per_word": HF_MAX_CHARS_PER_WORD}
    if config is not None and any(key in config for key in _HF_CONFIG_FIELDS):
        return {"max_input_chars_per_word": HF_MAX_CHARS_PER_WORD}
    return {}


# Files only transformers writes beside a vocab.txt: its weights, or a tokenizer's special tokens map
# (this library's writers never write them; `bert-keras pretrain`'s run has a config.json too).
_HF_DIRECTORY_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                       "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack", "special_tokens_map.json")
# Fields of `tokenizer_config.json` that transformers writes (or the Hub's files hold: bert-base-uncased's
# is `{"do_lower_case": true, "model_max_length": 512}`) and `write_tokenizer_settings` never does.
_HF_CONFIG_FIELDS = ("model_max_length", "backend", "added_tokens_decoder", "clean_up_tokenization_spaces",
                     "do_basic_tokenize", "never_split", "special_tokens_map_file", "name_or_path")


# Where `BertTokenizer.save_to_preset` puts a keras-hub preset's vocabulary, and the file two levels
# up that records the tokenizer's settings.
_KERAS_HUB_VOCABULARY = os.path.join("assets", "tokenizer", "vocabulary.txt")
_KERAS_HUB_TOKENIZER = "tokenizer.json"


def _keras_hub_preset_settings(vocab_file):
    """`{"lowercase"}` of a keras-hub preset's vocabulary, from the preset's `tokenizer.json` (a
    cased preset says `"lowercase": false` there, not in a `tokenizer_config.json`); else {}.

    Its `strip_accents: false` is taken only for a vocabulary learned with accents
    (`vocabulary_keeps_accents`: a Korean one of Hangul syllables, which keras-hub reads whole):
    keras-hub's `BertTokenizer` writes its class default (false) for every model, uncased ones
    included, so elsewhere accents follow the casing, as in BERT's rules."""
    vocab_file = os.fspath(vocab_file)
    vocab_file = vocab_file if is_remote(vocab_file) else os.path.abspath(vocab_file)
    if not vocab_file.endswith(os.sep + _KERAS_HUB_VOCABULARY):
        return {}
    path = os.path.join(vocab_file[: -len(_KERAS_HUB_VOCABULARY)], _KERAS_HUB_TOKENIZER)
    try:
        saved = _json_file(path)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerSettingsError(f"{path}: not a JSON keras-hub tokenizer config ({error})") from None
    config = saved.get("config") if isinstance(saved, dict) else None
    lowercase = config.get("lowercase") if isinstance(config, dict) else None
    if lowercase is None:
        return {}
    if not isinstance(lowercase, bool):
        raise TokenizerSettingsError(f"{path}: field 'lowercase' must be true or false, got {lowercase!r}")
    if lowercase and config.get("strip_accents") is False and vocabulary_keeps_accents(vocab_file):
        return {"lowercase": lowercase, "strip_accents": False}
    return {"lowercase": lowercase}


def resolve_tokenizer_settings(vocab_file, lowercase=None, strip_accents=None, pre_tokenizer=None,
                               max_input_chars_per_word=None, unicode_normalization=None):
    """The `lowercase` / `strip_accents` / `pre_tokenizer` / `max_input_chars_per_word` a model built
    on `vocab_file` uses.

    Given values win. With neither casing rule given, the checkpoint's recorded ones apply; a
    vocabulary that records no casing is read cased when it is cased (`vocabulary_is_cased`: a
    google-research `cased_L-12_H-768_A-12` ships no `tokenizer_config.json`), else uncased
    (the original BERT's and HF's default); accents follow the casing, except that an uncased guess
    keeps the accents of a vocabulary learned with them (`vocabulary_keeps_accents`: a Korean one of
    Hangul syllables, which stripping would decompose into jamo it does not hold). With only
    `lowercase` given, accents follow it, as in HF's `BertTokenizer`; with only `strip_accents`
    given, the casing is the checkpoint's (a flag about accents does not change it). The morpheme analyzer is the
    vocabulary's own whatever the casing: the recorded one (None if none) unless `pre_tokenizer` is
    given; `"none"` (`NO_PRE_TOKENIZER`) gives no analyzer, for text split already. The word length
    limit is the given one, else the recorded one (`MAX_CHARS_KEY`, HF's `tokenizer.json`, 100 in an HF
    directory), else the original's 200; with `lowercase` and `pre_tokenizer` both given, only the limit
    is read from the recorded rules (the rest of the file is not checked). The Unicode normalization is
    the given one (`"none"`: text read as given, with a warning naming the file when it records one), else the
    recorded one (`UNICODE_NORMALIZATION_KEY`), else None.
    """
    whole = pre_tokenizer is None or lowercase is None
    if whole:
        recorded = read_tokenizer_settings(vocab_file)
    else:  # the rules given: only the limit is read, whatever the rest of the file says
        recorded = _recorded_max_chars(vocab_file) if max_input_chars_per_word is None else {}
    if max_input_chars_per_word is None:
        max_input_chars_per_word = recorded.get("max_input_chars_per_word", ORIGINAL_MAX_CHARS_PER_WORD)
    max_input_chars_per_word = checked_max_chars(max_input_chars_per_word, "max_input_chars_per_word")
    analyzer = recorded.get("pre_tokenizer") if pre_tokenizer is None else given_pre_tokenizer(pre_tokenizer)
    if unicode_normalization is None:  # the vocabulary's own (the fast path above did not read it)
        form = (recorded if whole else _recorded_normalization(vocab_file)).get("unicode_normalization")
    else:
        from pipelines.tokenizer.composition import checked_unicode_normalization

        form = checked_unicode_normalization(unicode_normalization)
        if form is None:  # "none" over a vocabulary whose text was composed: said, never silent
            _warn_normalization_turned_off(vocab_file, (recorded if whole else _recorded_normalization(vocab_file))
                                           .get("unicode_normalization"))
    if lowercase is None:  # the checkpoint's casing, whatever is said of accents
        guessed = "lowercase" not in recorded
        lowercase = not vocabulary_is_cased(vocab_file) if guessed else recorded["lowercase"]
        if strip_accents is None:
            strip_accents = recorded.get("strip_accents")
        if guessed and lowercase and strip_accents is None and vocabulary_keeps_accents(vocab_file):
            strip_accents = False  # stripped, its tokens (Hangul syllables) would never be matched
    return {"lowercase": bool(lowercase), "strip_accents": strip_accents, "pre_tokenizer": analyzer,
            "max_input_chars_per_word": max_input_chars_per_word, "unicode_normalization": form}



def _warn_normalization_turned_off(vocab_file, recorded_form):
    """Warns that `unicode_normalization="none"` turns off the form `vocab_file`'s rules record (when
    they record one): the vocabulary was learned on composed text, and a model on it reads decomposed
    Hangul as [UNK] without it. Named by file and key, once per call site (Python's default filter)."""
    if recorded_form is None:
        return
    from pipelines.tensorflow_logs import caller_stacklevel

    warnings.warn(
        f"unicode_normalization=\"none\" (--unicode-normalization none): {tokenizer_config_path(vocab_file)} "
        f"records {UNICODE_NORMALIZATION_KEY}: {recorded_form!r}, the form this vocabulary's text is composed to; "
        f"text is now read as given, not composed, so decomposed Hangul (NFD jamo) reads as [UNK]. Leave it out "
        f"to compose as the vocabulary records", stacklevel=caller_stacklevel())


def vocabulary_is_cased(vocab_file):
    """Whether the WordPiece vocabulary `vocab_file` was learned on cased text: it holds tokens
    that lowercasing changes (`The`, `##A`), which text read uncased never produces. Special
    tokens in brackets (`[CLS]`, `[unused0]`, `<S>`) are not counted; a letter with no lower case
    (`ℝ`, in uncased BERT's vocabulary) is no sign of casing; and a few stray ones are not either:
    it takes 1% of the vocabulary or 10 tokens, whichever is fewer (bert-base-cased has ~10,000).
    False when there is no such file.

    >>> import os, tempfile
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> _ = open(vocab, "w", encoding="utf-8").write("[CLS]\\n<S>\\nthe\\nℝ\\n")
    >>> vocabulary_is_cased(vocab)
    False
    >>> _ = open(vocab, "a", encoding="utf-8").write("The\\n")
    >>> vocabulary_is_cased(vocab)
    True
    """
    tokens, cased, _ = _vocabulary_counts(vocab_file)
    return cased > 0 and cased >= min(10, tokens / 100)


def vocabulary_keeps_accents(vocab_file):
    """Whether the WordPiece vocabulary `vocab_file` was learned on text with its accents kept: at
    least a quarter of its tokens hold a character that NFD decomposes (Hangul syllables, `é`),
    which accent stripping (NFD, then combining marks dropped) never produces, so read with it they
    could never be matched: a Korean vocabulary read with stripped accents is all `[UNK]`. Some
    such tokens do not count: google-research's uncased multilingual vocabulary holds Hangul
    syllables (google-research/bert#228), yet its model was trained with accents stripped. False
    when there is no such file.

    >>> import os, tempfile
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> _ = open(vocab, "w", encoding="utf-8").write("[CLS]\\nthe\\n한국\\n##어\\n")
    >>> vocabulary_keeps_accents(vocab)
    True
    """
    tokens, _, composed = _vocabulary_counts(vocab_file)
    return composed > 0 and composed >= tokens / 4


def _vocabulary_counts(vocab_file):
    """`(tokens, cased, composed)` of a vocabulary: its tokens (lines, as `load_vocabulary` reads them: a byte
    order mark dropped, LF or CRLF ends; local or `gs://`), and those, special tokens in brackets (`[CLS]`,
    `[unused0]`, `<S>`) aside, that lowercasing changes and that NFD changes."""
    if vocab_file is None or not _is_file(vocab_file):
        return 0, 0, 0
    data = _file_bytes(vocab_file)
    lines = (data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data).decode("utf-8", "replace").split("\n")
    if lines[-1] == "":
        lines.pop()  # the end of the last line
    tokens = cased = composed = 0
    for line in lines:
        token = line.removesuffix("\r").strip()
        tokens += 1
        if len(token) > 2 and (token[0], token[-1]) in (("[", "]"), ("<", ">")):
            continue
        cased += token.lower() != token
        composed += not unicodedata.is_normalized("NFD", token)
    return tokens, cased, composed


def given_pre_tokenizer(pre_tokenizer):
    """A caller's `pre_tokenizer=` as a `BertTokenizer` takes it: `"none"` (`NO_PRE_TOKENIZER`) is None.

    >>> given_pre_tokenizer("none"), given_pre_tokenizer("kiwi")
    (None, 'kiwi')
    """
    return None if pre_tokenizer == NO_PRE_TOKENIZER else pre_tokenizer


def write_tokenizer_settings(vocab_file, *, lowercase, strip_accents=None, pre_tokenizer=None,
                             max_input_chars_per_word=None, added_tokens=None, unicode_normalization=None):
    """Writes HF's `tokenizer_config.json` for `vocab_file` (atomically): HF's `BertTokenizer` and
    this library both read the vocabulary back with these rules. A `pre_tokenizer` (the name of a
    morpheme analyzer, for a vocabulary of morphemes as words) is recorded as `PRE_TOKENIZER_KEY`,
    which HF keeps but does not apply; so are a `max_input_chars_per_word` (as `MAX_CHARS_KEY`) and a
    `unicode_normalization` ("NFC", as `UNICODE_NORMALIZATION_KEY`; None / "none": no key).
    `added_tokens` (`pipelines.BertTokenizer(added_tokens=)`'s forms; each a line of `vocab_file`,
    which must exist) are written as transformers writes them, `added_tokens_decoder` (id -> token
    and flags), which `BertTokenizerFast.from_pretrained` and `bert_keras.checkpoints.find_added_tokens`
    read back."""
    if pre_tokenizer is not None and not isinstance(pre_tokenizer, str):
        raise TypeError(f"pre_tokenizer: the name of a morpheme analyzer (\"kiwi\") is recorded, got {pre_tokenizer!r}")
    from pipelines.tokenizer.composition import checked_unicode_normalization

    form = checked_unicode_normalization(unicode_normalization)
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": bool(lowercase),
        "strip_accents": None if strip_accents is None else bool(strip_accents),
        "tokenize_chinese_chars": True,
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        **({PRE_TOKENIZER_KEY: pre_tokenizer} if given_pre_tokenizer(pre_tokenizer) else {}),
        **({MAX_CHARS_KEY: checked_max_chars(max_input_chars_per_word, "max_input_chars_per_word")}
           if max_input_chars_per_word is not None else {}),
        **({UNICODE_NORMALIZATION_KEY: form} if form else {}),
    }
    if added_tokens:
        from pipelines.tokenizer.added_tokens import added_token_entries
        from pipelines.tokenizer.vocab import load_vocabulary

        vocabulary = load_vocabulary(os.fspath(vocab_file))
        config["added_tokens_decoder"] = {
            str(entry.pop("id")): dict(sorted(entry.items())) for entry in added_token_entries(added_tokens, vocabulary)}
    write_text(tokenizer_config_path(vocab_file), json.dumps(config, indent=2) + "\n")


def added_tokens_decoder(path, default=()):
    """The `"added_tokens_decoder"` entries of the `tokenizer_config.json` at `path` (transformers' field,
    which `write_tokenizer_settings` writes too), in id order (dicts of `content` and flags);
    `list(default)` when there is no such file or field (None: None).

    Raises:
        TokenizerSettingsError: the file is not JSON, or the field is not of the form transformers writes
            (naming the file).
    """
    if not _is_file(path):
        return None if default is None else list(default)
    try:
        config = _json_file(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerSettingsError(f"{path}: not JSON ({error})") from None
    decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
    if decoder is None:
        return None if default is None else list(default)
    if not isinstance(decoder, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("content"), str) for e in decoder.values()):
        raise TokenizerSettingsError(f'{path}: "added_tokens_decoder" is not an object of '
                                     '{"id": {"content": str, ...}}')
    # transformers writes each id as ASCII digits ("²".isdigit() is true too, and int() refuses it)
    odd = [key for key in decoder if not re.fullmatch("[0-9]+", key)]
    if odd:
        raise TokenizerSettingsError(f'{path}: "added_tokens_decoder" key {odd[0]!r} is not a token id '
                                     '(ASCII digits, as transformers writes them)')
    return [dict(decoder[key]) for key in sorted(decoder, key=int)]


def recorded_added_tokens(vocab_file, pre_tokenizer=None):
    """The added tokens a model reading `vocab_file` by its recorded rules matches whole: those its
    `tokenizer_config.json` records (`added_tokens_decoder`: a conversion's, a pretraining run's, a
    fine-tuned model's `hf:` export), when one is a token of its own (not BERT's five special ones:
    `pipelines.tokenizer.added_tokens.matched_added_tokens`); [] when it records none, or under a morpheme
    analyzer (`pre_tokenizer`, else the recorded one: it splits the text before they could be found).
    `create-pretraining-data` reads its `--vocab` so.

    Raises:
        TokenizerSettingsError: as `added_tokens_decoder`.
    """
    if vocab_file is None:
        return []
    from pipelines.tokenizer.added_tokens import matched_added_tokens

    path = tokenizer_config_path(vocab_file)
    added = matched_added_tokens(added_tokens_decoder(path))
    if not added:
        return []
    from pipelines.tokenizer.vocab import load_vocabulary

    lines = set(load_vocabulary(os.fspath(vocab_file)))
    missing = [entry["content"] for entry in added if entry["content"] not in lines]
    if missing:  # transformers 4 keeps them in added_tokens.json, past vocab.txt's lines
        warnings.warn(f"{path} records added token(s) {missing[:8]} that are not lines of {vocab_file}: they are "
                      "read as word pieces (`bert-keras convert hf:DIR OUT` writes a vocabulary that holds them)",
                      stacklevel=2)
        added = matched_added_tokens([entry for entry in added if entry["content"] in lines])
    return added_tokens_found_whole(added, vocab_file, pre_tokenizer)


def added_tokens_found_whole(added_tokens, vocab_file, pre_tokenizer=None):
    """`added_tokens`, or [] under a morpheme analyzer (`pre_tokenizer`, else the one recorded beside
    `vocab_file`), which splits the text before they could be found: the original rules read what
    it leaves (`BertTokenizer` refuses the two together)."""
    if not added_tokens:
        return []
    analyzer = (read_tokenizer_settings(vocab_file).get("pre_tokenizer") if pre_tokenizer is None
                else given_pre_tokenizer(pre_tokenizer))
    return [] if analyzer else list(added_tokens)


def copy_tokenizer_settings(source_vocab, destination_vocab):
    """Writes beside `destination_vocab` the settings recorded beside `source_vocab`, if any."""
    settings = read_tokenizer_settings(source_vocab)
    if settings:
        write_tokenizer_settings(destination_vocab, lowercase=settings.get("lowercase", True),
                                 strip_accents=settings.get("strip_accents"),
                                 pre_tokenizer=settings.get("pre_tokenizer"),
                                 max_input_chars_per_word=settings.get("max_input_chars_per_word"),
                                 unicode_normalization=settings.get("unicode_normalization"))
