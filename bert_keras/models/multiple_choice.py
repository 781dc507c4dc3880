"""`BertMultipleChoice`: pick one of C candidate continuations (SWAG)."""

import keras
from keras import ops

from bert_keras.layers.choice_flattening import FlattenChoices
from bert_keras.layers.initialization import truncated_normal
from bert_keras.models.encoder_head import EncoderHead
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMultipleChoice(EncoderHead):
    """A `BertEncoder` scoring each (context, choice) pair by its `[CLS]` vector.

    The BERT paper's SWAG setup (section 4.4) / Hugging Face
    `BertForMultipleChoice`: every choice is packed with the context as its
    own sequence; the `[B, C, S]` inputs are folded to `[B * C, S]` for one
    encoder pass, each pooled `[CLS]` vector goes through dropout and one
    `Dense(1)` (a learned vector whose dot product with `[CLS]` is the
    choice's score), and the scores are unfolded to float32 logits
    `[B, num_choices]`. A softmax over the choices and cross-entropy against
    the int `[B]` index of the right choice train it (`default_loss()`).

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> chooser = BertMultipleChoice(BertEncoder(BertConfig.named("tiny", vocab_size=100)), num_choices=3)
    >>> ids = np.array([[[2, 7, 3, 9, 3], [2, 7, 3, 8, 3], [2, 7, 3, 5, 3]]], "int32")  # [B=1, C=3, S=5]
    >>> x = {"token_ids": ids, "segment_ids": np.array([[[0, 0, 0, 1, 1]] * 3], "int32"),
    ...      "padding_mask": np.ones_like(ids)}
    >>> tuple(chooser(x).shape)
    (1, 3)
    >>> chooser.compile(optimizer=keras.optimizers.Adam(1e-3), loss=chooser.default_loss())
    >>> history = chooser.fit(x, np.array([1]), epochs=1, verbose=0)

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        num_choices: int. Candidates per example (SWAG: 4).
        dropout: float. Dropout rate on the pooled vectors before scoring (BERT: 0.1).
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("num_choices", "dropout")

    def __init__(self, encoder, num_choices, *, dropout=0.1, name="bert_multiple_choice", **kwargs):
        if int(num_choices) < 2:
            raise ValueError(f"num_choices must be at least 2, got {num_choices}")
        num_choices = int(num_choices)
        # Read from a layer: a functional model drops the `dtype=` it is built with.
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        flatten = FlattenChoices(name="flatten_choices")
        head_dropout = keras.layers.Dropout(dropout, dtype="float32", name="choice_dropout")
        scorer = keras.layers.Dense(
            1,
            kernel_initializer=truncated_normal(encoder.config.initializer_range),
            dtype="float32",
            name="choice_scorer",
        )

        # ---- functional graph ----------------------------------------------
        inputs = {
            key: keras.Input(shape=(num_choices, None), dtype="int32", name=key) for key in ENCODER_INPUT_NAMES
        }
        pooled = encoder({key: flatten(inputs[key]) for key in ENCODER_INPUT_NAMES})["pooled_output"]
        scores = scorer(head_dropout(pooled))  # [B * C, 1]
        # Rows are choice-major within each example (the reshape order of
        # FlattenChoices), so this reshape puts them back in place.
        logits = ops.reshape(scores, (-1, num_choices))
        super().__init__(inputs=inputs, outputs=logits, name=name, **kwargs)
        # The encoder's policy, so that `compile` adds loss scaling under mixed_float16.
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.num_choices = num_choices
        self.dropout = float(dropout)
        self.choice_dropout = head_dropout
        self.choice_scorer = scorer

    def default_loss(self):
        """Cross-entropy of the softmax over the choices, on the int index of the right one."""
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        """Accuracy: how often the highest-scoring choice is the right one."""
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
