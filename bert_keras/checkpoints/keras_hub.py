"""keras-hub `BertBackbone` models and preset directories.

keras-hub stores the same weights as google-research BERT, in Keras layers:
attention projections are `EinsumDense` layers whose kernels are
`[H, heads, head_size]` (query/key/value) and `[heads, head_size, H]`
(output), biases `[heads, head_size]`. Reshaping row-major to `[H, H]` gives
exactly the TF1 kernel `[in, out]`, so the conversion is a reshape, never a
transpose.

keras-hub's `BertBackbone` hard-codes the tanh GELU and LayerNorm epsilon
1e-12: imported configs say `hidden_act="gelu_approximate"`; exporting an
exact-GELU model warns that outputs will move by ~1e-3.

keras-hub's `WordPieceTokenizer` has no word length limit in its config (it fixes 100 bytes), so a
preset written here records the tokenizer's rules, the limit included, in HF's form beside its
vocabulary too (`assets/tokenizer/vocabulary.tokenizer_config.json`, which keras-hub ignores): read
back here, the model tokenizes as it was trained. A preset without that file (keras-hub's own) reads
with the original BERT's 200 characters.
"""

import os
import warnings

import numpy as np

from bert_keras.checkpoints.errors import CheckpointFormatError, CheckpointMismatchError
from bert_keras.config import BertConfig
from pipelines.atomic_writes import atomic_directory
from pipelines.tokenizer.tokenizer_config import NO_PRE_TOKENIZER, resolve_tokenizer_settings, write_tokenizer_settings

# Files `Backbone.save_to_preset` writes; `metadata.json` tells a keras-hub
# preset apart from a Hugging Face directory, which also has `config.json`.
PRESET_FILES = ("config.json", "metadata.json")
VOCAB_PATH = os.path.join("assets", "tokenizer", "vocabulary.txt")
# A preset's weights: one file, or keras-hub's index of sharded ones.
WEIGHTS_FILES = ("model.weights.h5", "model.weights.json")


def _variables(backbone, num_layers):
    """[(canonical name, keras variable)] for every weight of a BertBackbone."""
    pairs = [
        ("bert/embeddings/word_embeddings", backbone.get_layer("token_embedding").embeddings),
        (
            "bert/embeddings/position_embeddings",
            backbone.get_layer("position_embedding").position_embeddings,
        ),
        ("bert/embeddings/token_type_embeddings", backbone.get_layer("segment_embedding").embeddings),
    ]
    norm = backbone.get_layer("embeddings_layer_norm")
    pairs += [("bert/embeddings/LayerNorm/gamma", norm.gamma), ("bert/embeddings/LayerNorm/beta", norm.beta)]
    for i in range(num_layers):
        block = backbone.get_layer(f"transformer_layer_{i}")
        attention = block._self_attention_layer
        scope = f"bert/encoder/layer_{i}"
        dense_layers = [
            ("attention/self/query", attention.query_dense),
            ("attention/self/key", attention.key_dense),
            ("attention/self/value", attention.value_dense),
            ("attention/output/dense", attention.output_dense),
            ("intermediate/dense", block._feedforward_intermediate_dense),
            ("output/dense", block._feedforward_output_dense),
        ]
        for name, layer in dense_layers:
            pairs += [(f"{scope}/{name}/kernel", layer.kernel), (f"{scope}/{name}/bias", layer.bias)]
        for name, layer in [
            ("attention/output/LayerNorm", block._self_attention_layer_norm),
            ("output/LayerNorm", block._feedforward_layer_norm),
        ]:
            pairs += [(f"{scope}/{name}/gamma", layer.gamma), (f"{scope}/{name}/beta", layer.beta)]
    pooler = backbone.get_layer("pooled_dense")
    pairs += [("bert/pooler/dense/kernel", pooler.kernel), ("bert/pooler/dense/bias", pooler.bias)]
    return pairs


def config_from_backbone(backbone):
    """The `BertConfig` of a keras-hub `BertBackbone` (always tanh GELU)."""
    return BertConfig(
        vocab_size=backbone.vocabulary_size,
        hidden_size=backbone.hidden_dim,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim,
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments,
        hidden_dropout=backbone.dropout,
        attention_dropout=backbone.dropout,
        hidden_act="gelu_approximate",
        layer_norm_eps=1e-12,
    )


def backbone_to_canonical(backbone):
    """Reads the weights of a keras-hub `BertBackbone` as the canonical dict.

    Example:

    >>> import keras_hub
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> backbone_to_canonical(backbone)["bert/encoder/layer_0/attention/self/query/kernel"].shape
    (8, 8)

    Args:
        backbone: a built `keras_hub.models.BertBackbone`.

    Returns:
        dict of google-research name -> float32 np.ndarray (no `cls/` heads:
        a backbone has none).
    """
    hidden = backbone.hidden_dim
    weights = {}
    for name, variable in _variables(backbone, backbone.num_layers):
        value = np.asarray(variable.numpy(), dtype=np.float32)
        if name.endswith("/kernel") and value.ndim == 3:
            value = value.reshape(hidden, hidden)  # EinsumDense [H,h,d] or [h,d,H]
        elif value.ndim == 2 and "attention/self" in name:
            value = value.reshape(hidden)  # EinsumDense bias [h,d]
        weights[name] = value
    return weights


def canonical_to_backbone(config, canonical, *, dtype=None):
    """Builds a keras-hub `BertBackbone` holding the canonical weights.

    Example:

    >>> backbone = canonical_to_backbone(config, weights)  # doctest: +SKIP
    >>> backbone({"token_ids": ids, "segment_ids": seg, "padding_mask": mask})  # doctest: +SKIP

    Args:
        config: `BertConfig`. keras-hub always computes the tanh GELU with
            LayerNorm epsilon 1e-12; other settings are warned about.
        canonical: dict of canonical name -> array. `cls/` heads are ignored.
        dtype: optional Keras dtype policy for the backbone.

    Returns:
        A `keras_hub.models.BertBackbone`.
    """
    import keras_hub

    if config.hidden_act != "gelu_approximate":
        warnings.warn(
            f"keras-hub BertBackbone always uses the tanh GELU; this model uses "
            f"hidden_act={config.hidden_act!r}: its outputs will differ "
            "(by ~1e-3 for exact GELU, 4e-3 on all-MiniLM-L6-v2)",
            stacklevel=2,
        )
    if config.layer_norm_eps != 1e-12:
        warnings.warn(
            f"keras-hub BertBackbone hard-codes layer_norm_eps=1e-12; this model uses "
            f"{config.layer_norm_eps}",
            stacklevel=2,
        )
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        dtype=dtype,
    )
    pairs = _variables(backbone, config.num_layers)
    missing = [name for name, _ in pairs if name not in canonical]
    if missing:
        raise CheckpointMismatchError(f"weights missing for keras-hub BertBackbone: {missing}")
    for name, variable in pairs:
        value = np.asarray(canonical[name])
        if value.size != int(np.prod(variable.shape)):
            raise CheckpointMismatchError(
                f"{name}: shape {value.shape} does not fit keras-hub variable "
                f"{variable.path} of shape {tuple(variable.shape)}"
            )
        variable.assign(value.reshape(variable.shape))
    return backbone


def is_keras_hub_preset(directory):
    """True when `directory` looks like a keras-hub preset (has metadata.json)."""
    return all(os.path.isfile(os.path.join(directory, f)) for f in PRESET_FILES)


def read_keras_hub_preset(directory):
    """Reads a local keras-hub BERT preset directory.

    Example:

    >>> config, weights = read_keras_hub_preset("my_preset")  # doctest: +SKIP

    Args:
        directory: a directory written by `save_to_preset`: `config.json`,
            `metadata.json`, `model.weights.h5`, and optionally
            `assets/tokenizer/vocabulary.txt`.

    Returns:
        `(BertConfig, canonical dict)`; the config says `gelu_approximate`.
    """
    import keras_hub

    directory = os.fspath(directory)
    if not is_keras_hub_preset(directory):
        raise CheckpointFormatError(
            f"{directory}: not a keras-hub preset (expected {list(PRESET_FILES)} and model.weights.h5)"
        )
    if not any(os.path.isfile(os.path.join(directory, name)) for name in WEIGHTS_FILES):
        # keras-hub's own message names only its sharded index ("model.weights.json doesn't exist")
        raise CheckpointFormatError(f"{directory}: a keras-hub preset without its weights (no "
                                    f"{' or '.join(WEIGHTS_FILES)}); copy the whole preset directory again")
    try:
        backbone = keras_hub.models.BertBackbone.from_preset(directory)
    except (ValueError, OSError) as error:  # OSError: h5py's "Unable to open file (truncated file ...)"
        raise CheckpointFormatError(
            f"{directory}: keras-hub cannot load it as a BertBackbone: {error}"
        ) from error
    return config_from_backbone(backbone), backbone_to_canonical(backbone)


def write_keras_hub_preset(directory, config, canonical, vocab_file=None, *, lowercase=None, strip_accents=None,
                           max_input_chars_per_word=None, added_tokens=None, unicode_normalization=None):
    """Writes a keras-hub preset directory loadable by `BertBackbone.from_preset`.

    Example:

    >>> write_keras_hub_preset("my_preset", config, weights, "vocab.txt")  # doctest: +SKIP
    >>> keras_hub.models.BertBackbone.from_preset("my_preset")  # doctest: +SKIP

    Args:
        directory: target directory (assembled beside it, then moved in).
        config: `BertConfig` (exact GELU is warned about, see module doc).
        canonical: dict of canonical name -> array; `cls/` heads are not
            written (a backbone preset has no place for them).
        vocab_file: optional WordPiece vocabulary; with it a `BertTokenizer`
            is saved too, so `keras_hub.models.BertTextClassifier.from_preset`
            works.
        lowercase: bool or None. Tokenizer lower-casing; None: the rules recorded beside the
            vocabulary, else inferred from it (`resolve_tokenizer_settings`: no token that
            lowercasing changes -> uncased, and a vocabulary of Hangul syllables keeps its accents).
        strip_accents: bool or None (None: as `lowercase`, BERT's and HF's rule). Written
            explicitly: keras-hub's `BertTokenizer` would otherwise keep accents of an uncased
            model ("café" stays "café" where BERT reads "cafe").
        max_input_chars_per_word: int or None. The word length limit (None: the one recorded
            beside the vocabulary, else 200), which keras-hub's tokenizer has no field for: written
            with the casing beside the preset's vocabulary (`tokenizer_config_path`), where this
            library reads it back.
        added_tokens: tokens found whole (HF's added tokens, lines of the vocabulary), which
            keras-hub's tokenizer cannot find whole: recorded there too, for this library's
            readers (`bert_keras.checkpoints.find_added_tokens`).
        unicode_normalization: "NFC" (text composed before tokenizing; None: the one recorded beside the
            vocabulary; "none": no composition), which keras-hub's tokenizer does not apply: recorded
            there too, for this library's readers.

    Returns:
        The directory written.
    """
    import keras_hub

    dropped = sorted(name for name in canonical if name.startswith("cls/"))
    if dropped:
        warnings.warn(
            f"keras-hub BertBackbone presets hold no pretraining heads; not written: {dropped}",
            stacklevel=2,
        )
    backbone = canonical_to_backbone(config, canonical)
    with atomic_directory(directory) as staging:
        backbone.save_to_preset(staging)
        if vocab_file is not None:
            # the rules a loader would read this vocabulary with (an uncased guess keeps the
            # accents of a Korean vocabulary of Hangul syllables, which stripping would decompose)
            rules = resolve_tokenizer_settings(vocab_file, lowercase, strip_accents, pre_tokenizer=NO_PRE_TOKENIZER,
                                               max_input_chars_per_word=max_input_chars_per_word,
                                               unicode_normalization=unicode_normalization)
            lowercase = rules["lowercase"]
            strip_accents = bool(lowercase if rules["strip_accents"] is None else rules["strip_accents"])
            tokenizer = keras_hub.models.BertTokenizer(vocabulary=os.fspath(vocab_file), lowercase=lowercase,
                                                       strip_accents=strip_accents)
            tokenizer.save_to_preset(staging)
            # what keras-hub's tokenizer config cannot hold (the limit), with the casing it says
            write_tokenizer_settings(os.path.join(staging, VOCAB_PATH), lowercase=lowercase,
                                     strip_accents=strip_accents,
                                     max_input_chars_per_word=rules["max_input_chars_per_word"],
                                     added_tokens=added_tokens, unicode_normalization=rules["unicode_normalization"])
    return os.fspath(directory)

