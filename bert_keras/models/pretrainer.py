"""`BertPretrainer`: a `BertEncoder` with BERT's masked-LM and next-sentence heads and loss."""

import logging

import keras
import tensorflow as tf
from keras import ops

from bert_keras import padding_skipping
from bert_keras.encoder import BertEncoder
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.layers.next_sentence_head import NextSentenceHead
from bert_keras.losses.replica_shares import global_mean_on_replicas, model_losses_share
from bert_keras.models.encoder_head import EncoderHead
from pipelines.encoder_inputs import ENCODER_INPUT_NAMES

logger = logging.getLogger(__name__)

# google-research run_pretraining.py: denominator = sum(weights) + 1e-5, so a
# batch with no masked token gives a 0 loss instead of a NaN.
MLM_DENOMINATOR_EPSILON = 1e-5


def _real_slots(masked_lm_positions):
    """`[M, 2]` (row, slot) indices of the real masked-LM slots.

    google-research pads `masked_lm_positions` with 0, and position 0 is
    [CLS], which is never masked, so a slot is real iff its position is > 0.
    """
    return ops.cast(tf.where(ops.cast(masked_lm_positions, "int32") > 0), "int32")


class _EncodeForPretraining(keras.layers.Layer):
    """The encoder as the pretraining heads see it: `(pooled [B, H], masked [B, P, H])`.

    The heads read the last layer at [CLS] (through the pooler) and at the
    masked positions only. With `sparse_last_layer` the last layer is computed
    at those positions alone (`BertEncoder.output_at_positions`); without, the
    full encoder runs and its output is gathered. One layer for both, so that
    both save their weights under the same paths.

    In training with the encoder's `skip_padding` on (dynamic shapes), the
    padding slots of `masked_lm_positions` are dropped too: `masked` is then
    `[M, H]`, the M real slots of the batch (`_real_slots` order), so the
    vocabulary projection, the largest matmul of pretraining, skips them.
    """

    def __init__(self, encoder, sparse_last_layer, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.sparse_last_layer = sparse_last_layer

    def call(self, inputs, masked_lm_positions, training=None):
        positions = ops.cast(masked_lm_positions, "int32")
        if not self.sparse_last_layer:
            encoded = self.encoder(inputs, training=training)
            masked = ops.take_along_axis(encoded["sequence_output"], positions[:, :, None], axis=1)
            return encoded["pooled_output"], self._real_slots_only(masked, positions, training)
        cls_position = ops.zeros_like(positions[:, :1])
        output = self.encoder.output_at_positions(
            inputs, ops.concatenate([cls_position, positions], axis=1), training=training
        )
        cls_output, masked = ops.split(output, [1], axis=1)  # split: cheaper gradient than slices
        pooled = self.encoder.pooler(ops.squeeze(cls_output, axis=1))
        return pooled, self._real_slots_only(masked, positions, training)

    def _real_slots_only(self, masked, positions, training):
        if training and padding_skipping.runs_on_real_tokens(self.encoder, training):
            return tf.gather_nd(masked, _real_slots(positions))
        return masked

    def get_config(self):
        # Keras asks only when it clones a functional model layer by layer (`keras.models.clone_model`,
        # whose result is a plain `keras.Model`): an encoder copied on its own would untie the
        # masked-LM projection from the word embeddings, and the clone would lose the built-in loss.
        # Keras' own message asked to implement this method; say what clones a pretrainer instead.
        raise NotImplementedError(
            "keras.models.clone_model copies a BertPretrainer layer by layer into a plain keras.Model, "
            "without its built-in loss and its masked-LM projection tied to the word embeddings; clone it "
            "with type(pretrainer).from_config(pretrainer.get_config()) (fresh weights, as clone_model)")

    def compute_output_spec(self, inputs, masked_lm_positions, training=None):
        hidden = self.encoder.config.hidden_size
        batch, predictions = masked_lm_positions.shape
        return (
            keras.KerasTensor((batch, hidden), dtype="float32"),
            keras.KerasTensor((batch, predictions, hidden), dtype="float32"),
        )


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPretrainer(EncoderHead):
    """BERT pretraining: masked-LM + next-sentence prediction on a `BertEncoder`.

    Inputs are a dict `token_ids`, `segment_ids`, `padding_mask` (int `[B, S]`)
    and `masked_lm_positions` (int `[B, P]`); outputs a dict `mlm_logits`
    (float32 `[B, P, V]`, only the masked positions are ever scored) and
    `nsp_logits` (float32 `[B, 2]`, 0 = IsNext, 1 = random).

    The loss is built in (`compile` takes no `loss=`) and is google-research
    `run_pretraining.py`'s: targets `y` are a dict `masked_lm_ids` (int
    `[B, P]`), `masked_lm_weights` (float `[B, P]`, 1 real / 0 padding) and
    `next_sentence_labels` (int `[B]`), and

        mlm_loss = sum(w * CE(mlm)) / (sum(w) + 1e-5)
        nsp_loss = mean(CE(nsp))
        loss     = mlm_loss + nsp_loss

    with the sums and the mean taken over the GLOBAL batch under a
    `tf.distribute` strategy, so a replicated run follows the same loss (and
    gradients) as one device on the same global batch. `fit` reports `loss`,
    `mlm_loss`, `nsp_loss`, `mlm_accuracy` (weighted by `masked_lm_weights`)
    and `nsp_accuracy`.

    Under a `mixed_float16` encoder, `compile` wraps the optimizer in a
    `LossScaleOptimizer` (the model carries the encoder's dtype policy); the
    logits and the loss are float32 under any policy.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> encoder = BertEncoder(BertConfig.named("tiny", vocab_size=100))
    >>> pretrainer = BertPretrainer(encoder)
    >>> ids = np.array([[2, 4, 7, 3, 8, 3], [2, 9, 4, 3, 6, 3]], "int32")
    >>> x = {"token_ids": ids, "segment_ids": np.array([[0, 0, 0, 0, 1, 1]] * 2, "int32"),
    ...      "padding_mask": np.ones_like(ids), "masked_lm_positions": np.array([[1], [2]], "int32")}
    >>> y = {"masked_lm_ids": np.array([[5], [5]], "int32"),
    ...      "masked_lm_weights": np.ones((2, 1), "float32"),
    ...      "next_sentence_labels": np.array([0, 1], "int32")}
    >>> tuple(pretrainer(x)["mlm_logits"].shape)
    (2, 1, 100)
    >>> pretrainer.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> sorted(pretrainer.fit(x, y, epochs=1, verbose=0).history)
    ['loss', 'mlm_accuracy', 'mlm_loss', 'nsp_accuracy', 'nsp_loss']

    Args:
        encoder: a `BertEncoder`. Its word embeddings are shared with the
            masked-LM output projection; its dtype policy is the heads'.
        sparse_last_layer: bool. Compute the encoder's last layer only at
            [CLS] and the masked positions (`BertEncoder.output_at_positions`),
            the only outputs the heads read: the same loss and gradients for
            ~85% less last-layer work (static shapes, so also on TPUs/XLA).
            False runs the full encoder, as the original.
        name: str. Model name.
        **kwargs: `keras.Model` arguments (`trainable`, ...).
    """

    config_fields = ("sparse_last_layer",)

    def __init__(self, encoder, *, sparse_last_layer=True, name="bert_pretrainer", **kwargs):
        config = encoder.config
        # Read from a layer: a functional model's own `dtype_policy` ignores
        # the `dtype=` it was built with, its layers carry it.
        policy = encoder.token_embedding.dtype_policy

        # ---- layers --------------------------------------------------------
        masked_lm_head = MaskedLMHead(
            encoder.token_embedding,
            hidden_act=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=policy,
            name="masked_lm_head",
        )
        next_sentence_head = NextSentenceHead(
            initializer_range=config.initializer_range, name="next_sentence_head"
        )

        # ---- functional graph ----------------------------------------------
        inputs = {
            key: keras.Input(shape=(None,), dtype="int32", name=key)
            for key in ENCODER_INPUT_NAMES + ("masked_lm_positions",)
        }
        pooled, masked = _EncodeForPretraining(encoder, bool(sparse_last_layer), name="encoding")(
            {key: inputs[key] for key in ENCODER_INPUT_NAMES}, inputs["masked_lm_positions"]
        )
        outputs = {"mlm_logits": masked_lm_head(masked), "nsp_logits": next_sentence_head(pooled)}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        # The encoder's policy, so that `compile` adds loss scaling when it is
        # mixed_float16 even if the global policy is not (assigned: a
        # functional model drops a `dtype=` constructor argument).
        self.dtype_policy = policy

        # ---- public attributes -----------------------------------------------
        self.encoder = encoder
        self.sparse_last_layer = bool(sparse_last_layer)
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head
        # Trackers assigned as attributes are listed in `self.metrics`, so
        # `fit` reports and resets them with Keras' own `loss`.
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.nsp_accuracy = keras.metrics.SparseCategoricalAccuracy(name="nsp_accuracy")

    # ---- training ------------------------------------------------------------

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The masked-LM + next-sentence loss of one batch (this replica's share of it).

        Keras' TensorFlow trainer sums the gradients of all replicas and
        reports the mean of `loss * num_replicas` over replicas, i.e. it
        expects each replica to return its share of the global loss. Both
        denominators (the masked-token weight sum and the example count) are
        therefore summed over replicas before dividing: each replica returns
        `its numerator / global denominator`, and the shares add up to
        google-research's formula on the global batch. (Dividing by the local
        weight sum and then by the replica count, as a plain Keras loss does,
        would give each replica's masked tokens an unequal say whenever
        replicas hold different numbers of them.)
        """
        del sample_weight, training  # the weights are in y
        if self._compile_loss is not None:
            raise ValueError(
                "BertPretrainer computes the google-research pretraining loss itself; "
                "compile it without loss= / loss_weights="
            )
        mlm_logits = ops.cast(y_pred["mlm_logits"], "float32")
        nsp_logits = ops.cast(y_pred["nsp_logits"], "float32")
        mlm_weights = ops.cast(y["masked_lm_weights"], "float32")
        mlm_ids, slot_weights = self._targets_of_logits(x, y, mlm_logits)
        mlm_ce = keras.losses.sparse_categorical_crossentropy(mlm_ids, mlm_logits, from_logits=True)
        nsp_ce = keras.losses.sparse_categorical_crossentropy(
            y["next_sentence_labels"], nsp_logits, from_logits=True
        )
        local_denominators = ops.stack(
            [ops.sum(mlm_weights), ops.cast(ops.shape(nsp_ce)[0], "float32")]
        )
        denominators = _sum_over_replicas(local_denominators)
        mlm_loss = ops.sum(slot_weights * mlm_ce) / (denominators[0] + MLM_DENOMINATOR_EPSILON)
        nsp_loss = ops.sum(nsp_ce) / denominators[1]

        # The trackers weigh each replica's value by its examples, as Keras
        # weighs its own `loss`: over batches of unequal size (an evaluation's
        # last one) `loss` stays `mlm_loss + nsp_loss`, and `nsp_loss` is the
        # mean over the examples. A replica's value is therefore its share
        # scaled by the global batch's examples over its own
        # (`global_mean_on_replicas`): the replicas' values, so weighed, sum
        # to the global batch's loss also when they hold parts of unequal size
        # (a batch of 7 on two replicas reported 4.97 for 4.61 as a share
        # times the replica count).
        replicas = _num_replicas()
        examples = ops.shape(nsp_ce)[0]
        self.mlm_loss_tracker.update_state(global_mean_on_replicas(mlm_loss, examples) * replicas,
                                           sample_weight=examples)
        self.nsp_loss_tracker.update_state(global_mean_on_replicas(nsp_loss, examples) * replicas,
                                           sample_weight=examples)

        # Regularizers and add_loss() terms are per model, not per example:
        # each replica contributes 1/replicas of them.
        return global_mean_on_replicas(mlm_loss + nsp_loss, examples) + model_losses_share(self.losses)

    @staticmethod
    def _targets_of_logits(x, y, mlm_logits):
        """(ids, float32 weights) lined up with `mlm_logits`: `[B, P]`, or `[M]` for packed logits.

        Packed `[M, V]` logits (training with `skip_padding`, see
        `_EncodeForPretraining`) score the real slots only; their targets are
        gathered the same way. The padding slots they leave out have weight 0.
        """
        ids, weights = y["masked_lm_ids"], ops.cast(y["masked_lm_weights"], "float32")
        if len(mlm_logits.shape) == 3:
            return ids, weights
        slots = _real_slots(x["masked_lm_positions"])
        return tf.gather_nd(ids, slots), tf.gather_nd(weights, slots)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        mlm_ids, slot_weights = self._targets_of_logits(x, y, y_pred["mlm_logits"])
        self.mlm_accuracy.update_state(mlm_ids, y_pred["mlm_logits"], sample_weight=slot_weights)
        self.nsp_accuracy.update_state(y["next_sentence_labels"], y_pred["nsp_logits"])
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    # ---- checkpoints -----------------------------------------------------------

    @classmethod
    def from_pretrained(cls, spec, *, strict=False, dtype=None, name="bert_pretrainer"):
        """Builds a pretrainer from a checkpoint: encoder and, where present, heads.

        A checkpoint with pretraining heads (`BertForPreTraining`, a
        google-research `bert_model.ckpt`) initialises both heads; one without
        them (e.g. a sentence-transformers MiniLM) gets freshly initialised
        heads and a logged warning.

        Example:

        >>> pretrainer = BertPretrainer.from_pretrained("hf:bert-base-uncased")  # doctest: +SKIP
        >>> save_pretrained(pretrainer.encoder, "hf:out",  # doctest: +SKIP
        ...                 heads=pretrainer_heads_to_canonical(pretrainer))

        Args:
            spec: any `bert_keras.checkpoints` spec (`hf:DIR`, `tf1:PREFIX`,
                `keras-hub:DIR`, `pip:DISTRIBUTION`, ...).
            strict: bool. If True, missing encoder or head weights and unknown
                tensors are errors. If False (default), missing weights keep
                their fresh initialization and unknown tensors are dropped.
            dtype: dtype policy of the encoder and heads, e.g.
                `"mixed_float16"`; defaults to the global policy.
            name: str. Model name.
        """
        # Imported here: checkpoints depend on models (heads), not the reverse.
        from bert_keras.checkpoints import read_pretrained
        from bert_keras.checkpoints.heads import assign_pretrainer_heads
        from bert_keras.checkpoints.layout import assign_canonical

        config, weights, _ = read_pretrained(spec, strict=strict)
        encoder = BertEncoder(config, dtype=dtype)
        encoder_report = assign_canonical(encoder, weights, strict=strict)
        pretrainer = cls(encoder, name=name)
        heads_report = assign_pretrainer_heads(pretrainer, weights, strict=strict)
        if encoder_report["missing"]:
            logger.warning(
                "%s: %d encoder weight(s) not in the checkpoint keep their random initialization: %s",
                spec, len(encoder_report["missing"]), encoder_report["missing"][:8],
            )
        if heads_report["missing"]:
            logger.warning(
                "%s: no pretraining head weights for %s; they start freshly initialized",
                spec, heads_report["missing"],
            )
        return pretrainer

    # ---- serialization -----------------------------------------------------------


def _num_replicas():
    """How many replicas share the batch this (replica) code sees; 1 outside tf.distribute."""
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def _sum_over_replicas(value):
    """`value` summed over the replicas of the current `tf.distribute` step."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("SUM", value)
