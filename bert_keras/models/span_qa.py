"""`BertSpanQA`: extractive question answering (SQuAD v1.1 / v2.0) by start and end logits."""

import keras

from bert_keras.layers.span_head import SpanHead
from bert_keras.losses.replica_shares import model_losses_share
from bert_keras.models.encoder_head import EncoderHead
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSpanQA(EncoderHead):
    """A `BertEncoder` with the BERT paper's span head: start and end logits per token.

    Inputs are the encoder's dict (question as segment A, context as segment
    B, int `[B, S]`). Outputs a dict of float32 logits, `start_logits` and
    `end_logits`, each `[B, S]`, from one `SpanHead` (a `Dense(2)`: the start
    vector S and end vector E) on `sequence_output`; padded positions are
    -1e9, so they are never predicted. Position 0 (`[CLS]`) stands for "no
    answer" in SQuAD v2.

    The loss is built in (`compile` takes no `loss=`), as google-research
    `run_squad.py`: targets `y` are a dict of int `[B]` token positions
    `start_positions` and `end_positions` (0 for unanswerable questions), and

        loss = (CE(start_logits, start_positions) + CE(end_logits, end_positions)) / 2

    Turning logits into answer text (best valid span, `max_answer_length`,
    the null-score threshold) is post-processing outside the model.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> qa = BertSpanQA(BertEncoder(BertConfig.named("tiny", vocab_size=100)))
    >>> ids = np.array([[2, 7, 3, 9, 11, 12, 3, 0]], "int32")
    >>> x = {"token_ids": ids, "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 1, 0]], "int32"),
    ...      "padding_mask": (ids > 0).astype("int32")}
    >>> tuple(qa(x)["start_logits"].shape)
    (1, 8)
    >>> qa.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> y = {"start_positions": np.array([4]), "end_positions": np.array([5])}
    >>> history = qa.fit(x, y, epochs=1, verbose=0)

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        dropout: float. Dropout rate on the token vectors before the span
            head. google-research `run_squad.py` uses none there (0.0
            reproduces it); the encoder's own dropout applies either way.
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("dropout",)

    def __init__(self, encoder, *, dropout=0.1, name="bert_span_qa", **kwargs):
        # Read from a layer: a functional model drops the `dtype=` it is built with.
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        head_dropout = keras.layers.Dropout(dropout, dtype="float32", name="span_dropout")
        span_head = SpanHead(initializer_range=encoder.config.initializer_range, name="span_head")

        # ---- functional graph ----------------------------------------------
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in ENCODER_INPUT_NAMES}
        sequence = encoder(inputs)["sequence_output"]
        start_logits, end_logits = span_head(head_dropout(sequence), inputs["padding_mask"])
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        # The encoder's policy, so that `compile` adds loss scaling under mixed_float16.
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.dropout = float(dropout)
        self.span_dropout = head_dropout
        self.span_head = span_head
        # A Keras loss object reduces over the batch and scales for
        # tf.distribute replicas the way a compiled loss would.
        self._position_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_loss(self):
        """None: the span loss is built in (`compute_loss`)."""
        return None

    def default_metrics(self):
        """None: score answers with `bert_keras.metrics.squad_v1_metrics` / `squad_v2_metrics`."""
        return []

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Mean of the start- and end-position cross-entropies (plus any regularization losses)."""
        del x, training
        if self._compile_loss is not None:
            raise ValueError(
                "BertSpanQA computes the span loss itself; compile it without loss= "
                "and pass y={'start_positions': ..., 'end_positions': ...}"
            )
        start = self._position_loss(y["start_positions"], y_pred["start_logits"], sample_weight)
        end = self._position_loss(y["end_positions"], y_pred["end_logits"], sample_weight)
        # Regularizers and add_loss() terms are per model: each replica adds its share of them.
        return (start + end) / 2.0 + model_losses_share(self.losses)
