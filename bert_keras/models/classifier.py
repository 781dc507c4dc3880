"""`BertClassifier`: sentence(-pair) classification or regression from the `[CLS]` vector."""

import keras
from keras import ops

from bert_keras import padding_skipping
from bert_keras.layers.initialization import truncated_normal
from bert_keras.losses.score_squared_error import ScoreMeanSquaredError
from bert_keras.models.encoder_head import EncoderHead
from bert_keras.models.window_relevance import WindowRelevance
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(EncoderHead):
    """A `BertEncoder` with a dropout + dense head on `pooled_output` (GLUE-style tasks).

    google-research `run_classifier.py` / Hugging Face
    `BertForSequenceClassification`: the pooled `[CLS]` vector (the encoder's
    tanh pooler), dropout, one affine map to `num_classes` logits.

    Inputs are the encoder's dict (`token_ids`, `segment_ids`,
    `padding_mask`, int `[B, S]`). The output is float32 under any dtype
    policy:

    * `num_classes >= 2`: logits `[B, num_classes]`; train with
      `keras.losses.SparseCategoricalCrossentropy(from_logits=True)` on int
      labels `[B]`, predict with `argmax(-1)`.
    * `num_classes == 1`: regression (STS-B); one score per example, shape
      `[B]` (the unit axis is dropped so that it lines up with `[B]` targets
      and with `bert_keras.metrics.pearson`); train with mean squared error.

    `default_loss()` / `default_metrics()` return these, and
    `bert_keras.models.compile_for_finetuning` compiles with them.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> classifier = BertClassifier(BertEncoder(BertConfig.named("tiny", vocab_size=100)), num_classes=3)
    >>> ids = np.array([[2, 7, 9, 3, 0], [2, 5, 3, 0, 0]], "int32")
    >>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
    >>> tuple(classifier(x).shape)
    (2, 3)
    >>> classifier.compile(optimizer=keras.optimizers.Adam(1e-3), loss=classifier.default_loss(),
    ...                    metrics=classifier.default_metrics())
    >>> history = classifier.fit(x, np.array([2, 0]), epochs=1, verbose=0)

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        num_classes: int. Number of classes; 1 for regression.
        dropout: float. Dropout rate on the pooled vector before the dense
            layer (BERT: 0.1).
        relevance_layer: int or None. With a block index, the head also holds a
            `WindowRelevance` (`window_relevance`): how much a window of a long text
            reads like the training windows, after that many blocks (fitted by
            `TextClassifier.fit`; `window_aggregation="evidence"`).
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("num_classes", "dropout", "relevance_layer")

    def __init__(self, encoder, num_classes, *, dropout=0.1, relevance_layer=None, name="bert_classifier",
                 **kwargs):
        if int(num_classes) < 1:
            raise ValueError(f"num_classes must be at least 1 (1 = regression), got {num_classes}")
        num_classes = int(num_classes)
        # Read from a layer: a functional model drops the `dtype=` it is built with.
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        # float32: the head is one [H, K] matmul, and logits feed a float32 loss.
        head_dropout = keras.layers.Dropout(dropout, dtype="float32", name="classifier_dropout")
        head = keras.layers.Dense(
            num_classes,
            kernel_initializer=truncated_normal(encoder.config.initializer_range),
            dtype="float32",
            name="classifier",
        )

        # ---- functional graph ----------------------------------------------
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in ENCODER_INPUT_NAMES}
        pooled = encoder(inputs)["pooled_output"]
        logits = head(head_dropout(pooled))
        if num_classes == 1:
            logits = ops.squeeze(logits, axis=-1)
        super().__init__(inputs=inputs, outputs=logits, name=name, **kwargs)
        # The encoder's policy, so that `compile` adds loss scaling under
        # mixed_float16 even when the global policy is float32.
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = float(dropout)
        self.classifier_dropout = head_dropout
        self.classifier = head
        self.relevance_layer = None if relevance_layer is None else int(relevance_layer)
        if relevance_layer is not None:
            if not 1 <= int(relevance_layer) <= encoder.config.num_layers:
                raise ValueError(f"relevance_layer must be in 1..{encoder.config.num_layers}, got {relevance_layer}")
            self.window_relevance = WindowRelevance(max(num_classes, 1), encoder.config.hidden_size,
                                                    int(relevance_layer), name="window_relevance")

    def logits_and_features(self, inputs):
        """`(logits, features)` of packed windows in one pass of the encoder: the logits `call`
        gives (inference), and each row's `window_relevance` features (the mean token vector
        after `relevance_layer` blocks), read on the way (`window_aggregation="evidence"`)."""
        pooled, features = padding_skipping.pooled_and_token_mean(self.encoder, inputs, self.relevance_layer)
        logits = self.classifier(self.classifier_dropout(pooled, training=False))
        if self.num_classes == 1:
            logits = ops.squeeze(logits, axis=-1)
        return logits, features

    @property
    def is_regression(self):
        return self.num_classes == 1

    def default_loss(self):
        """Mean squared error for regression, else sparse categorical cross-entropy on logits."""
        if self.is_regression:
            return ScoreMeanSquaredError()  # Keras' own averages [B] scores over the batch
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        """Accuracy on int labels for classification; none for regression (use Pearson/Spearman offline)."""
        if self.is_regression:
            return []
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
