"""`PretrainingDataSettings`: every setting of a static pretraining data run, as one typed object.

This module imports no TensorFlow (`pipelines.corpus` loads only when a settings object is
made), so `bert-keras create-pretraining-data --help` builds its flags from the fields: each
field's `metadata["flag"]` holds its flag (`name`, former spellings `old_names`, `help`, ...).
"""

import dataclasses
import os
from typing import Optional, Sequence, Tuple, Union

from pipelines.command_options import option
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD

FORMATS = ("bert", "text", "lines")
DECODE_ERRORS = ("strict", "replace")
# the `--help` section of the masking flags (`MaskingSettings`)
MASKING = "masking (google-research/bert's create_pretraining_data.py flags; pretrain: of --input text)"


def _tfds_prefix():
    from pipelines.corpus import TFDS_PREFIX  # imports TensorFlow: not at module level

    return TFDS_PREFIX


def normalize_path(path: str) -> str:
    """An absolute, normalised local path; remote (`gs://...`) paths and `tfds:` names unchanged.

    Example:

    >>> normalize_path("gs://bucket/a.txt")
    'gs://bucket/a.txt'
    >>> normalize_path("/data/./a.txt")
    '/data/a.txt'
    """
    path = os.fspath(path).strip()
    if "://" in path or path.startswith(_tfds_prefix()):
        return path
    return os.path.abspath(os.path.expanduser(path))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskingSettings:
    """How examples are cut and masked: google-research/bert's `create_pretraining_data.py` flags
    that static records (`create-pretraining-data`, `PretrainingDataSettings`) and dynamic masking
    (`pretrain --input`, `Pretrainer.fit(corpus=)`, `bert_keras.run_options.PretrainingOptions`)
    share: one name, default, help and check for both.

    Example:

    >>> MaskingSettings(whole_word_mask=True).masked_lm_prob
    0.15
    >>> MaskingSettings(masked_lm_prob=0)
    Traceback (most recent call last):
    ...
    ValueError: masked_lm_prob (--masked-lm-prob) must be in (0, 1], got 0.

    Args:
        masked_lm_prob: share of the tokens masked (the budget is
            `min(max_predictions, max(1, round(len(tokens) * masked_lm_prob)))`).
        short_seq_prob: share of examples cut to a random length shorter than the sequence length.
        whole_word_mask: mask whole words: a token and its `##` pieces together.

    Raises:
        ValueError: a setting out of range (naming its flag).
    """

    masked_lm_prob: float = option(0.15, "share of the tokens masked (default 0.15)", None, "--masked_lm_prob",
                                   group=MASKING)
    short_seq_prob: float = option(0.1, "share of examples made shorter than --seq-length (default 0.1)",
                                   None, "--short_seq_prob", group=MASKING)
    whole_word_mask: bool = option(False, "mask whole words (a token and its ## pieces)", None,
                                   "--whole_word_mask", group=MASKING)

    def __post_init__(self):
        if isinstance(self.masked_lm_prob, bool) or not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob (--masked-lm-prob) must be in (0, 1], got {self.masked_lm_prob}.")
        if isinstance(self.short_seq_prob, bool) or not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob (--short-seq-prob) must be in [0, 1], got {self.short_seq_prob}.")
        if self.whole_word_mask not in (True, False):
            raise ValueError(f"whole_word_mask must be true or false, got {self.whole_word_mask!r}.")

    def masking(self) -> dict:
        """`{masked_lm_prob, short_seq_prob, whole_word_mask}`: these settings as keyword arguments."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(MaskingSettings)}


@dataclasses.dataclass(frozen=True)
class PretrainingDataSettings(MaskingSettings):
    """What `write_pretraining_data` builds, and from what: the original's flags, checked and normalised.

    Paths are made absolute on construction (`normalize_path`), so the same
    file given relative or absolute is the same input. Everything except
    `num_shards` / `shard_index` (how the work is split over machines) is
    recorded in `PREFIX-config.json` and must match on a rerun.

    Example:

    >>> settings = PretrainingDataSettings(input="corpus.txt", vocab_file="vocab.txt",
    ...                                    output_prefix="out/sample", dupe_factor=2)
    >>> settings.input[0].endswith("/corpus.txt"), settings.max_seq_length
    (True, 128)

    Args:
        input: text files / globs / comma lists (str or a sequence), or
            `"tfds:NAME"` (see `pipelines.corpus.read_corpus`).
        vocab_file: the WordPiece `vocab.txt`; must contain `[MASK]`.
        output_prefix: shards are `{output_prefix}-0000j-of-0000N.tfrecord`.
        lowercase: uncased tokenization (`do_lower_case`). None (default): the casing recorded
            beside the vocabulary (HF's `tokenizer_config.json`, written by `bert-keras vocab`),
            else the one guessed from it as for the tasks (`resolve_tokenizer_settings`: a cased
            vocabulary is read cased), whatever `strip_accents` says.
        strip_accents: NFD + drop combining marks (None: as `lowercase`); False with `lowercase`
            keeps Hangul syllables and accented letters whole (Korean vocabularies). With both
            left at None, the vocabulary's recorded rules apply, else the guessed ones (a Korean
            vocabulary of Hangul syllables keeps its accents).
        pre_tokenizer: the morpheme analyzer ("kiwi") the corpus is split with first, on the host
            (None: the one the vocabulary records, for a vocabulary of morphemes as words; "none":
            no analyzer, the corpus is split already).
        unicode_normalization: "NFC" composes the corpus before tokenizing (None: the one the
            vocabulary records, `bert-keras vocab --unicode-normalization NFC`'s; "none": text as given).
        format: corpus layout: `"bert"`, `"text"` or `"lines"`.
        decode_errors: `"strict"` or `"replace"` (see `read_corpus`).
        added_tokens: tokens found whole in the corpus, one id each (`pipelines.BertTokenizer(added_tokens=)`;
            special ones are never masked, the others are words of their own). None: those recorded
            beside the vocabulary (`added_tokens_decoder` of its `tokenizer_config.json`), unless a
            morpheme analyzer splits the corpus.
        max_seq_length: `S`, at least 5.
        max_predictions_per_seq: `P`, at least 1.
        masked_lm_prob, short_seq_prob, dupe_factor, whole_word_mask: as the
            original's flags.
        seed: everything random derives from it.
        num_output_shards: `N`, the number of output files.
        num_shards, shard_index: split the work over machines: one call
            writes the output shards `j` with `j % num_shards == shard_index`.
        tfds_split, tfds_text_field: for `tfds:` inputs.
        documents_per_bucket: documents are hashed into
            `max(1, documents // documents_per_bucket)` buckets; a random
            next segment comes from another document of the same bucket
            (`pipelines.pretraining.seeding`): what lets a runner build
            instances bucket by bucket.

    Raises:
        ValueError: a setting out of range.
    """

    # The original script's spellings (--input_file, --vocab_file) are accepted, hidden.
    input: Union[str, Sequence[str]] = option(
        dataclasses.MISSING, "text files: comma-separated names and globs (a directory is an error: give "
        "'DIR/*.txt'), or tfds:NAME for a TFDS text dataset", "--input", "--input_file", type=str)
    vocab_file: str = option(dataclasses.MISSING, "vocab.txt (must contain [MASK])", "--vocab", "--vocab_file")
    output_prefix: str = option(
        dataclasses.MISSING, "shards are written as PREFIX-00000-of-0000N.tfrecord", None, "--output_prefix")
    lowercase: Optional[bool] = option(
        None, "cased rules (do_lower_case=False); default the vocabulary's rules", "--cased", action="store_false",
        opposite=("--no-cased", "uncased rules (do_lower_case=True): lowercase whatever the vocabulary looks like"))
    strip_accents: Optional[bool] = option(
        None, "strip accents (NFD, drop combining marks): default as lowercasing; --no-strip-accents keeps "
              "Hangul syllables and accented letters whole (Korean vocabularies)", "--strip-accents")
    pre_tokenizer: Optional[str] = option(
        None, "split the corpus into morphemes first with this analyzer (kiwi): default the one the vocabulary "
              "records (bert-keras vocab --pre-tokenizer kiwi); none: the corpus is split already", metavar="NAME")
    unicode_normalization: Optional[str] = option(
        None, "NFC: compose the corpus before tokenizing (Hangul written decomposed, NFD jamo); default the one "
              "the vocabulary records (bert-keras vocab --unicode-normalization NFC), else none (text read as given)",
        choices=("NFC", "none"), type=lambda value: value.upper() if value.lower() == "nfc" else value.lower())
    format: str = option("bert", "bert: one sentence per line, blank line between documents (default); "
                                   "text: prose, one document per file, sentences split by rule; "
                                   "lines: one document per line", choices=FORMATS)
    decode_errors: str = option(
        "strict", "bytes that are not UTF-8: stop with file and line (strict), or read them as "
        "U+FFFD and report how many lines had them (replace); default strict", None, "--decode_errors", choices=DECODE_ERRORS)
    max_seq_length: int = option(128, "tokens per example (default 128)", "--seq-length",
                                   "--max-seq-length", "--max_seq_length", type="pair_sequence_length")
    max_predictions_per_seq: int = option(20, "masked positions per example (default 20)", "--max-predictions",
                                            "--max-predictions-per-seq", "--max_predictions_per_seq", type="positive_int")
    dupe_factor: int = option(10, "passes over the corpus, each with new masks (default 10)", None, "--dupe_factor",
                               type="positive_int")
    seed: int = option(12345, "the random seed (default 12345)", None, "--random-seed", "--random_seed")
    num_output_shards: int = option(8, "number of output files (default 8)", None, "--num_output_shards",
                                   type="positive_int")
    num_shards: int = option(1, "machines sharing the work (default 1)", None, "--num_shards", type="positive_int")
    shard_index: int = option(0, "this machine's index in [0, --num-shards) (default 0)", None, "--shard_index")
    tfds_split: str = option("train", "split of a tfds: input (default train)", None, "--tfds_split")
    tfds_text_field: str = option("text", "text feature of a tfds: input (default text)", None, "--tfds_text_field")
    documents_per_bucket: int = option(
        10_000, "documents per next-sentence bucket: a random next segment comes from another document of the "
        "same bucket (one bucket, the whole corpus, below this many documents; default 10000)", None,
        "--documents_per_bucket", type="positive_int")
    # None: the vocabulary's word length limit (`resolve_tokenizer_settings`: recorded, 100 in an
    # HF directory, else the original's 200), which the models built on it read with.
    max_input_chars_per_word: Optional[int] = option(
        None, "longer words become [UNK] (default: the vocabulary's recorded limit, 100 in an HF directory, else "
              "the original's 200); recorded in PREFIX-config.json, which pretrain --data checks",
        "--max-chars-per-word", type="positive_int")
    # The added tokens ("[E1]", "<ent>": `pipelines.BertTokenizer(added_tokens=)`'s forms) found whole in
    # the corpus. None: those recorded beside the vocabulary (`tokenizer_config.recorded_added_tokens`:
    # a conversion's, a pretraining run's), as the models built on it read them; no flag.
    added_tokens: Optional[Tuple[dict, ...]] = None

    def __post_init__(self):
        patterns = self.input.split(",") if isinstance(self.input, str) else list(self.input)
        patterns = tuple(normalize_path(p) for p in patterns if os.fspath(p).strip())
        if not patterns:
            raise ValueError("No input given.")
        object.__setattr__(self, "input", patterns)
        object.__setattr__(self, "vocab_file", normalize_path(self.vocab_file))
        if self.strip_accents not in (None, True, False):
            raise ValueError(f"strip_accents must be true, false or None, got {self.strip_accents!r}.")
        if self.lowercase is None:  # the casing not asked: the vocabulary's own, whatever is said of accents
            from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

            # recorded, else guessed as the tasks do: a cased vocabulary cased, a Korean one of
            # Hangul syllables with its accents kept
            resolved = resolve_tokenizer_settings(self.vocab_file, None, self.strip_accents)
            object.__setattr__(self, "lowercase", resolved["lowercase"])
            object.__setattr__(self, "strip_accents", resolved["strip_accents"])
        object.__setattr__(self, "strip_accents",
                           bool(self.lowercase if self.strip_accents is None else self.strip_accents))
        from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

        # the vocabulary's own analyzer unless one is given, whatever the casing; its word length limit
        rules = resolve_tokenizer_settings(self.vocab_file, self.lowercase, self.strip_accents, self.pre_tokenizer,
                                           self.max_input_chars_per_word, self.unicode_normalization)
        object.__setattr__(self, "pre_tokenizer", rules["pre_tokenizer"])
        object.__setattr__(self, "unicode_normalization", rules["unicode_normalization"])
        object.__setattr__(self, "max_input_chars_per_word", rules["max_input_chars_per_word"])
        from pipelines.tokenizer.added_tokens import added_token_specs
        from pipelines.tokenizer.tokenizer_config import recorded_added_tokens

        added = (recorded_added_tokens(self.vocab_file, self.pre_tokenizer or "none") if self.added_tokens is None
                 else self.added_tokens)
        object.__setattr__(self, "added_tokens", tuple(added_token_specs(added)))
        object.__setattr__(self, "output_prefix", normalize_path(self.output_prefix))
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}.")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}.")
        super().__post_init__()  # the masking settings
        if self.num_output_shards < 1 or self.dupe_factor < 1:
            raise ValueError("num_output_shards and dupe_factor must be at least 1.")
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"seed (--random-seed) must be between 0 and 2**32 - 1, got {self.seed}.")
        if self.documents_per_bucket < 1:
            raise ValueError(f"documents_per_bucket must be at least 1, got {self.documents_per_bucket}.")
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(f"shard_index must be in [0, num_shards={self.num_shards}), got {self.shard_index}.")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}.")
        if self.decode_errors not in DECODE_ERRORS:
            raise ValueError(f"decode_errors must be one of {', '.join(DECODE_ERRORS)}, got {self.decode_errors!r}.")

    @property
    def is_tfds(self) -> bool:
        """True for a `tfds:NAME` input."""
        return len(self.input) == 1 and self.input[0].startswith(_tfds_prefix())

    @property
    def corpus_source(self) -> Union[str, Tuple[str, ...]]:
        """What `read_corpus` takes: the `tfds:` name, or the tuple of patterns."""
        return self.input[0] if self.is_tfds else self.input

    def recorded(self) -> dict:
        """The settings `PREFIX-config.json` records (all but how the work is split over machines)."""
        fields = dataclasses.asdict(self)
        del fields["num_shards"], fields["shard_index"], fields["output_prefix"]
        if fields["strip_accents"] == fields["lowercase"]:
            del fields["strip_accents"]  # the default rule: records made before the setting read the same
        if fields["pre_tokenizer"] is None:
            del fields["pre_tokenizer"]  # likewise
        if fields["unicode_normalization"] is None:
            del fields["unicode_normalization"]  # likewise
        if fields["max_input_chars_per_word"] == ORIGINAL_MAX_CHARS_PER_WORD:
            del fields["max_input_chars_per_word"]  # likewise
        if fields["added_tokens"]:
            fields["added_tokens"] = [dict(spec) for spec in fields["added_tokens"]]
        else:
            del fields["added_tokens"]  # likewise
        fields["input"] = ",".join(self.input)
        return fields

    def output_shards(self):
        """Indices of the output shards this call writes (`j % num_shards == shard_index`)."""
        return [j for j in range(self.num_output_shards) if j % self.num_shards == self.shard_index]
