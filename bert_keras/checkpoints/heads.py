"""The pretraining heads' weight layout: `BertPretrainer` heads <-> canonical `cls/...` names.

The twin of `layout.py` (which maps the encoder's `bert/...` names). The
canonical names and shapes are google-research's (`run_pretraining.py`):

    cls/predictions/transform/dense/kernel         [H, H]
    cls/predictions/transform/dense/bias           [H]
    cls/predictions/transform/LayerNorm/{gamma,beta}  [H]
    cls/predictions/output_bias                    [V]
    cls/seq_relationship/output_weights            [2, H]  (TF1 [out, in])
    cls/seq_relationship/output_bias               [2]

The masked-LM output matrix is not listed: it is tied to
`bert/embeddings/word_embeddings`, which the encoder's layout owns. The one
non-trivial mapping is the next-sentence kernel: Keras `[H, 2]`, transposed.
"""

import numpy as np

from bert_keras.checkpoints.layout import check_names_and_shapes
from bert_keras.checkpoints.loading import head_shapes

HEADS_PREFIX = "cls/"


def _bindings(pretrainer):
    """Yields `(canonical name, keras variable, transpose)` for every head weight."""
    mlm = pretrainer.masked_lm_head
    yield "cls/predictions/transform/dense/kernel", mlm.transform_dense.kernel, False
    yield "cls/predictions/transform/dense/bias", mlm.transform_dense.bias, False
    yield "cls/predictions/transform/LayerNorm/gamma", mlm.transform_layer_norm.gamma, False
    yield "cls/predictions/transform/LayerNorm/beta", mlm.transform_layer_norm.beta, False
    yield "cls/predictions/output_bias", mlm.output_bias, False
    nsp = pretrainer.next_sentence_head
    yield "cls/seq_relationship/output_weights", nsp.kernel, True
    yield "cls/seq_relationship/output_bias", nsp.bias, False


def pretrainer_heads_to_canonical(pretrainer):
    """Exports a `BertPretrainer`'s heads as canonical `{cls/... name: float32 array}`.

    Pass the result as `save_pretrained(pretrainer.encoder, spec, heads=...)`
    to write a checkpoint that `transformers.BertForPreTraining` (`hf:`) or
    google-research `run_pretraining.py` (`tf1:`) loads with its heads.

    Example:

    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> from bert_keras.models import BertPretrainer
    >>> pretrainer = BertPretrainer(BertEncoder(BertConfig.named("tiny", vocab_size=100)))
    >>> pretrainer_heads_to_canonical(pretrainer)["cls/seq_relationship/output_weights"].shape
    (2, 128)

    Args:
        pretrainer: a `bert_keras.models.BertPretrainer`.
    """
    weights = {}
    for name, variable, transpose in _bindings(pretrainer):
        value = np.asarray(variable.numpy(), dtype=np.float32)
        weights[name] = np.ascontiguousarray(value.T if transpose else value)
    return weights


def assign_pretrainer_heads(pretrainer, weights, *, strict=True):
    """Loads canonical `cls/...` arrays into a `BertPretrainer`'s heads.

    Shapes are checked first and nothing is assigned if any is wrong. Names
    outside `cls/` are ignored (the encoder's are `layout.assign_canonical`'s).

    Example:

    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> from bert_keras.models import BertPretrainer
    >>> config = BertConfig.named("tiny", vocab_size=100)
    >>> source, target = (BertPretrainer(BertEncoder(config)) for _ in range(2))
    >>> assign_pretrainer_heads(target, pretrainer_heads_to_canonical(source))
    {'missing': [], 'unexpected': []}

    Args:
        pretrainer: a `bert_keras.models.BertPretrainer`.
        weights: mapping of canonical name to array (any float dtype).
        strict: bool. If True, head weights `weights` lacks and unknown
            `cls/` names raise `CheckpointMismatchError`. If False, missing
            heads keep their current (fresh) values and both lists are
            returned. Shape mismatches raise either way.

    Returns:
        `{"missing": [...], "unexpected": [...]}`, sorted names.

    Raises:
        CheckpointMismatchError: listing every missing, unexpected and
            mis-shaped name at once.
    """
    expected = head_shapes(pretrainer.encoder.config)
    missing, unexpected = check_names_and_shapes(expected, weights, HEADS_PREFIX, strict=strict)
    for name, variable, transpose in _bindings(pretrainer):
        if name in weights:
            value = np.asarray(weights[name], dtype=np.float32)
            variable.assign((value.T if transpose else value).astype(variable.dtype))
    return {"missing": missing, "unexpected": unexpected}
