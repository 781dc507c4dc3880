"""The canonical weight layout: `BertEncoder` <-> google-research TF1 variable names.

Every checkpoint format (TF1, Hugging Face, keras-hub) converts to and from one
flat dict of numpy float32 arrays keyed by the ORIGINAL google-research BERT
variable names, with their shapes (dense kernels are `[in, out]`):

    bert/embeddings/word_embeddings                          [V, H]
    bert/embeddings/token_type_embeddings                    [T, H]
    bert/embeddings/position_embeddings                      [P, H]
    bert/embeddings/LayerNorm/{gamma,beta}                   [H]
    bert/encoder/layer_{i}/attention/self/{query,key,value}/kernel [H, H], /bias [H]
    bert/encoder/layer_{i}/attention/output/dense/kernel     [H, H], /bias [H]
    bert/encoder/layer_{i}/attention/output/LayerNorm/{gamma,beta}  [H]
    bert/encoder/layer_{i}/intermediate/dense/kernel         [H, I], /bias [I]
    bert/encoder/layer_{i}/output/dense/kernel               [I, H], /bias [H]
    bert/encoder/layer_{i}/output/LayerNorm/{gamma,beta}     [H]
    bert/pooler/dense/kernel                                 [H, H], /bias [H]

This module is the only place that knows how those names map onto
`BertEncoder`'s variables. The one non-trivial mapping is the fused attention
projection: `query`, `key` and `value` are the three `[:, k*H:(k+1)*H]` column
blocks of the encoder's `[H, 3H]` QKV kernel (and of its `[3H]` bias).

Names outside `bert/` (e.g. `cls/predictions/...` pretraining heads) are not the
encoder's business: `assign_canonical` ignores them.
"""

import numpy as np

from bert_keras.checkpoints.errors import CheckpointMismatchError

ENCODER_PREFIX = "bert/"


def canonical_shapes(config):
    """Returns `{canonical name: shape}` of every encoder weight for a `BertConfig`.

    Example:

    >>> from bert_keras.config import BertConfig
    >>> shapes = canonical_shapes(BertConfig.named("tiny", vocab_size=100))
    >>> shapes["bert/encoder/layer_1/intermediate/dense/kernel"]
    (128, 512)

    Args:
        config: `BertConfig`.
    """
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (config.vocab_size, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
    }
    for n in range(config.num_layers):
        scope = f"bert/encoder/layer_{n}"
        for proj in ("query", "key", "value"):
            shapes[f"{scope}/attention/self/{proj}/kernel"] = (h, h)
            shapes[f"{scope}/attention/self/{proj}/bias"] = (h,)
        for dense, in_size, out_size in (
            ("attention/output/dense", h, h),
            ("intermediate/dense", h, i),
            ("output/dense", i, h),
        ):
            shapes[f"{scope}/{dense}/kernel"] = (in_size, out_size)
            shapes[f"{scope}/{dense}/bias"] = (out_size,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{scope}/{norm}/gamma"] = (h,)
            shapes[f"{scope}/{norm}/beta"] = (h,)
    shapes["bert/pooler/dense/kernel"] = (h, h)
    shapes["bert/pooler/dense/bias"] = (h,)
    return shapes


def _bindings(encoder):
    """Yields `(canonical name, keras variable, column slice or None)` for every weight.

    The slice, when given, selects the name's block of the variable's last
    axis (the fused QKV kernel and bias).
    """
    emb = encoder.embeddings
    yield "bert/embeddings/word_embeddings", emb.token_embedding.embeddings, None
    yield "bert/embeddings/token_type_embeddings", emb.segment_embedding.embeddings, None
    yield "bert/embeddings/position_embeddings", emb.position_embeddings, None
    yield "bert/embeddings/LayerNorm/gamma", emb.layer_norm.gamma, None
    yield "bert/embeddings/LayerNorm/beta", emb.layer_norm.beta, None

    h = encoder.config.hidden_size
    for n, block in enumerate(encoder.transformer_layers):
        scope = f"bert/encoder/layer_{n}"
        qkv = block.attention.qkv
        for k, proj in enumerate(("query", "key", "value")):
            columns = slice(k * h, (k + 1) * h)
            yield f"{scope}/attention/self/{proj}/kernel", qkv.kernel, columns
            yield f"{scope}/attention/self/{proj}/bias", qkv.bias, columns
        for dense_name, dense in (
            ("attention/output/dense", block.attention.output_dense),
            ("intermediate/dense", block.intermediate_dense),
            ("output/dense", block.output_dense),
        ):
            yield f"{scope}/{dense_name}/kernel", dense.kernel, None
            yield f"{scope}/{dense_name}/bias", dense.bias, None
        for norm_name, norm in (
            ("attention/output/LayerNorm", block.attention_layer_norm),
            ("output/LayerNorm", block.output_layer_norm),
        ):
            yield f"{scope}/{norm_name}/gamma", norm.gamma, None
            yield f"{scope}/{norm_name}/beta", norm.beta, None

    yield "bert/pooler/dense/kernel", encoder.pooler.kernel, None
    yield "bert/pooler/dense/bias", encoder.pooler.bias, None


def encoder_to_canonical(encoder):
    """Exports a `BertEncoder`'s weights as the canonical `{name: float32 array}` dict.

    Example:

    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> weights = encoder_to_canonical(BertEncoder(BertConfig.named("tiny", vocab_size=100)))
    >>> weights["bert/encoder/layer_0/attention/self/key/kernel"].shape
    (128, 128)

    Args:
        encoder: a `bert_keras.encoder.BertEncoder`.
    """
    weights = {}
    values = {}  # read each variable once, even when it holds three names
    for name, variable, columns in _bindings(encoder):
        key = id(variable)
        if key not in values:
            values[key] = np.asarray(variable.numpy(), dtype=np.float32)
        value = values[key] if columns is None else values[key][..., columns]
        weights[name] = np.ascontiguousarray(value)
    return weights


def check_names_and_shapes(expected, weights, prefix, *, strict):
    """Compares the `prefix` names of `weights` with `expected` {name: shape}.

    Shape mismatches always raise (they mean a wrong config); missing and
    unexpected names raise only with `strict`. Returns (missing, unexpected),
    sorted. Shared by the encoder and the pretraining-head assignments.
    """
    given = {name for name in weights if name.startswith(prefix)}
    missing = sorted(set(expected) - given)
    unexpected = sorted(given - set(expected))
    mismatches = [
        (name, expected[name], tuple(np.shape(weights[name])))
        for name in sorted(given & set(expected))
        if tuple(np.shape(weights[name])) != tuple(expected[name])
    ]
    if mismatches or (strict and (missing or unexpected)):
        raise CheckpointMismatchError(
            missing=missing if strict else (),
            unexpected=unexpected if strict else (),
            shape_mismatches=mismatches,
        )
    return missing, unexpected


def assign_canonical(encoder, weights, *, strict=True):
    """Loads a canonical `{name: array}` dict into a `BertEncoder`'s variables.

    Shapes are always checked first and nothing is assigned if any is wrong.
    Names outside `bert/` are ignored (pretraining heads belong to other models).

    Example:

    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> config = BertConfig.named("tiny", vocab_size=100)
    >>> source, target = BertEncoder(config), BertEncoder(config)
    >>> report = assign_canonical(target, encoder_to_canonical(source))
    >>> report
    {'missing': [], 'unexpected': []}

    Args:
        encoder: a `bert_keras.encoder.BertEncoder`.
        weights: mapping of canonical name to array (any float dtype).
        strict: bool. If True, names the encoder needs but `weights` lacks,
            and names under `bert/` the encoder does not have, raise
            `CheckpointMismatchError`. If False they are skipped (missing
            weights keep their current values) and reported in the return
            value. Shape mismatches raise either way: they mean a wrong config.

    Returns:
        `{"missing": [...], "unexpected": [...]}`, sorted names.

    Raises:
        CheckpointMismatchError: listing every missing, unexpected and
            mis-shaped name at once.
    """
    bindings = list(_bindings(encoder))
    expected = canonical_shapes(encoder.config)
    missing, unexpected = check_names_and_shapes(expected, weights, ENCODER_PREFIX, strict=strict)

    # Build each variable's new value (a fused QKV variable gets three
    # column blocks), then assign every variable exactly once. A variable
    # the weights cover entirely starts empty; one they cover in part (a
    # missing QKV block under strict=False) keeps its other columns.
    partly_covered = {id(variable) for name, variable, _ in bindings if name not in weights}
    new_values = {}
    for name, variable, columns in bindings:
        if name not in weights:
            continue
        key = id(variable)
        if columns is None and key not in partly_covered:  # the whole variable: its value as given
            new_values[key] = (variable, np.asarray(weights[name], dtype=np.float32))
            continue
        if key not in new_values:
            start = (np.array(variable.numpy(), dtype=np.float32) if key in partly_covered
                     else np.empty(tuple(variable.shape), np.float32))
            new_values[key] = (variable, start)
        value = np.asarray(weights[name], dtype=np.float32)
        if columns is None:
            new_values[key][1][...] = value
        else:
            new_values[key][1][..., columns] = value
    for variable, value in new_values.values():
        variable.assign(value.astype(variable.dtype, copy=False))
    return {"missing": missing, "unexpected": unexpected}
