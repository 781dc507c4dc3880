"""`BertTokenClassifier`: one label per token (NER, POS tagging)."""

import keras

from bert_keras.layers.initialization import truncated_normal
from bert_keras.losses.masked_sparse_categorical_crossentropy import MaskedSparseCategoricalCrossentropy
from bert_keras.models.encoder_head import EncoderHead
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenClassifier(EncoderHead):
    """A `BertEncoder` with a dropout + dense head on every token of `sequence_output`.

    The BERT paper's NER setup (section 5.3) / Hugging Face
    `BertForTokenClassification`: each token's last-layer vector, dropout, one
    affine map to `num_classes` logits. The output is float32 logits
    `[B, S, num_classes]` under any dtype policy.

    Labels are int `[B, S]` with -100 wherever there is nothing to predict:
    `[CLS]`, `[SEP]`, padding and every word piece but the first of a word
    (the paper labels the first piece only). `default_loss()` is
    `MaskedSparseCategoricalCrossentropy`, which skips them. To read words'
    tags back, take the argmax at each word's first piece.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> tagger = BertTokenClassifier(BertEncoder(BertConfig.named("tiny", vocab_size=100)), num_classes=5)
    >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
    >>> x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0).astype("int32")}
    >>> tuple(tagger(x).shape)
    (1, 5, 5)
    >>> tagger.compile(optimizer=keras.optimizers.Adam(1e-3), loss=tagger.default_loss())
    >>> history = tagger.fit(x, np.array([[-100, 1, 2, -100, -100]]), epochs=1, verbose=0)

    Args:
        encoder: a `BertEncoder` (e.g. from `bert_keras.checkpoints.load_pretrained`).
        num_classes: int. Number of tags (e.g. 9 for CoNLL-2003 BIO); the name of
            `BertClassifier`'s and keras-hub's argument (HF calls it `num_labels`).
        dropout: float. Dropout rate on the token vectors before the dense
            layer (BERT: 0.1).
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("num_classes", "dropout")

    def __init__(self, encoder, num_classes, *, dropout=0.1, name="bert_token_classifier", **kwargs):
        if int(num_classes) < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        num_classes = int(num_classes)
        # Read from a layer: a functional model drops the `dtype=` it is built with.
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        # float32: [B, S, H] x [H, K] with small K, and the logits feed a float32 loss.
        head_dropout = keras.layers.Dropout(dropout, dtype="float32", name="token_classifier_dropout")
        head = keras.layers.Dense(
            num_classes,
            kernel_initializer=truncated_normal(encoder.config.initializer_range),
            dtype="float32",
            name="token_classifier",
        )

        # ---- functional graph ----------------------------------------------
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in ENCODER_INPUT_NAMES}
        sequence = encoder(inputs)["sequence_output"]
        logits = head(head_dropout(sequence))
        super().__init__(inputs=inputs, outputs=logits, name=name, **kwargs)
        # The encoder's policy, so that `compile` adds loss scaling under mixed_float16.
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout = float(dropout)
        self.token_classifier_dropout = head_dropout
        self.token_classifier = head

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "num_labels" in config:  # a model saved before the argument took the classifiers' name
            config["num_classes"] = config.pop("num_labels")
        return super().from_config(config)

    def default_loss(self):
        """Cross-entropy on logits over the labelled tokens; label -100 is skipped."""
        return MaskedSparseCategoricalCrossentropy()

    def default_metrics(self):
        """None: token accuracy rewards the easy `O` tags; score with `bert_keras.metrics.entity_scores`."""
        return []
