"""The student's train step of `bert_keras.tasks.distillation.distill`, and what it is made of.

`distillation_step` replaces the student's Keras `train_step` for the run: the teacher labels
the batch (no dropout), the student matches its outputs through the family's soft loss, with the
labels weighed in by `alpha`; and optionally on masked copies of the batch (`masked_copies`, Tang
et al. 2019), on a batch of unlabelled text beside it, and with TinyBERT's hidden-state loss on
the blocks (`block_outputs`, `hidden_state_loss`). `distillation_test_step` is its counterpart for
Keras' validation (`distill(validation_split=...)`, `validation_data=`): the same loss on a batch,
without dropout, copies or unlabelled text.

>>> default_augment(["a text"] * 2000)
2
"""

import numbers

import tensorflow as tf

from bert_keras.losses.replica_shares import example_mean_on_replicas
from bert_keras.tasks.inputs import TaskInputError, num_rows


def masked_copies(x, copies, *, mask_id, special_ids, rate, seed):
    """`x` followed by `copies` copies of it with some tokens replaced by [MASK]: more inputs for the
    teacher to label (Tang et al. 2019, "Distilling Task-Specific Knowledge from BERT into Simple
    Neural Networks": masking augmentation).

    Each real token (not padding, not [CLS] / [SEP]) of each copy is masked with probability
    `rate`; positions, segments and the padding mask stay, so per-token outputs (NER) and spans
    (SQuAD) keep their places. Every input of `x` is repeated along the batch axis.

    Args:
        x: the packed inputs (`token_ids`, `padding_mask`, ...; any rank after the batch axis).
        copies: how many masked copies (>= 1).
        mask_id, special_ids: the vocabulary's [MASK] id and the ids never masked.
        rate: the probability that a token is masked.
        seed: a `[2]` int tensor; the same seed gives the same masks.
    """
    ids = x["token_ids"]
    maskable = tf.cast(x["padding_mask"], tf.bool)
    for special in special_ids:
        maskable &= tf.not_equal(ids, special)
    masked = [ids]
    for copy in range(copies):
        draw = tf.random.stateless_uniform(tf.shape(ids), seed=seed + tf.constant([0, 1], seed.dtype) * copy)
        masked.append(tf.where(maskable & (draw < rate), tf.cast(mask_id, ids.dtype), ids))
    out = {name: tf.concat([value] * (copies + 1), axis=0) for name, value in x.items()}
    out["token_ids"] = tf.concat(masked, axis=0)
    return out


# Below this many examples a student sees too little text to match its teacher (`default_augment`).
AUGMENT_BELOW_EXAMPLES = 20_000


def default_augment(x, unlabelled=None):
    """Masked copies per batch by default: 2 for fewer than `AUGMENT_BELOW_EXAMPLES` in-memory
    examples (`x` and the `unlabelled` text together), else 0 (a dataset: 0, its size is not read ahead).

    >>> default_augment(["a text"] * 2000), default_augment(["a text"] * 50_000)
    (2, 0)
    >>> default_augment(["a text"] * 2000, unlabelled=["more text"] * 30_000)
    0
    """
    if any(isinstance(part, tf.data.Dataset) for part in (x, unlabelled)):
        return 0
    try:
        rows = num_rows(x) + (0 if unlabelled is None else num_rows(unlabelled))
    except TaskInputError:
        return 0
    return 2 if rows < AUGMENT_BELOW_EXAMPLES else 0


def masked_copy_count(augment, x, unlabelled=None, tokenizer=None):
    """`augment` checked (a whole number >= 0), or `default_augment(x, unlabelled)` when None.

    `tokenizer`: the teacher's. A vocabulary without [MASK] (the tokenizer accepts one for a model
    that is never pretrained) has no token to mask with: no copies by default, and copies asked
    for are refused."""
    if augment is None:
        copies = default_augment(x, unlabelled)
        return 0 if tokenizer is not None and tokenizer.special_tokens.mask is None else copies
    if isinstance(augment, bool) or not isinstance(augment, numbers.Integral) or augment < 0:
        raise TaskInputError(f"augment={augment!r}: expected a whole number >= 0 (masked copies of each batch)")
    if augment and tokenizer is not None and tokenizer.special_tokens.mask is None:
        raise TaskInputError(f"augment={augment}: the vocabulary has no [MASK] token to mask the copies with "
                             "(augment=0)")
    return int(augment)


def block_outputs(encoder, inputs, training=False):
    """The outputs of `encoder`'s transformer blocks on `inputs` (float32 `[N, S, H]` each, any
    leading axes of the inputs folded into `N`) and the padding mask `[N, S]`: the encoder's own
    layers on the padded grid, as its functional graph runs them."""
    ids, segments, mask = (tf.reshape(inputs[name], [-1, tf.shape(inputs[name])[-1]])
                           for name in ("token_ids", "segment_ids", "padding_mask"))
    mask = tf.cast(mask, tf.int32)
    x = encoder.embeddings(tf.cast(ids, tf.int32), tf.cast(segments, tf.int32), training=training)
    outputs = []
    for block in encoder.transformer_layers:
        x = block(x, mask, training=training)
        outputs.append(tf.cast(x, tf.float32))
    return outputs, tf.cast(mask, tf.float32)


def hidden_state_loss(student_outputs, teacher_outputs, teacher_layers, mask):
    """TinyBERT's hidden-state loss: the mean squared error between student block i's output and
    teacher block `teacher_layers[i]`'s, averaged over the real tokens, then over the blocks."""
    tokens = tf.maximum(tf.reduce_sum(mask), 1.0)
    losses = [tf.reduce_sum(tf.reduce_mean(tf.square(output - teacher_outputs[index]), -1) * mask) / tokens
              for output, index in zip(student_outputs, teacher_layers)]
    return tf.add_n(losses) / len(losses)


def distillation_step(student, teacher, temperature, alpha, augment=None, unlabelled=False, hidden=None):
    """The student's train step: the teacher's outputs on the batch (and on its masked copies,
    `augment`), the family's soft loss (`TextTask._soft_loss`), plus `alpha` x the task's own loss
    on the labels of the original rows. `unlabelled`: each element's inputs are `(x, extra)`, a batch
    of the run's data and one of its unlabelled text; the soft loss is the mean over the rows of both.
    `hidden` (`{"weight", "layers"}`): plus weight x `hidden_state_loss` on the student's blocks and
    the teacher's `layers`."""
    from keras.src import tree
    from keras.src.trainers.data_adapters import data_adapter_utils

    def batch_rows(inputs):
        return tf.shape(next(part for part in tree.flatten(inputs) if part is not None))[0]

    def with_copies(inputs, weight, stream):
        """`inputs` and their masked copies (`augment`), each row's `weight` repeated with it."""
        if not augment:
            return inputs, weight
        step = tf.cast(student.optimizer.iterations, tf.int64)
        inputs = masked_copies(inputs, augment["copies"], mask_id=augment["mask_id"],
                               special_ids=augment["special_ids"], rate=augment["rate"],
                               seed=tf.stack([tf.constant(augment["seed"] + stream, tf.int64), step * 1009]))
        return inputs, None if weight is None else tf.concat([weight] * (augment["copies"] + 1), axis=0)

    def teacher_outputs(inputs):
        return tf.nest.map_structure(tf.stop_gradient, teacher(inputs, training=False))

    def teacher_blocks(inputs):
        if not hidden:
            return None
        outputs, mask = block_outputs(teacher.encoder, inputs)
        return [tf.stop_gradient(output) for output in outputs], mask

    def matched_loss(inputs, teacher_out, teacher_states, weight):
        """The student's loss on one part of the batch against the teacher's, and its outputs."""
        student_out = student(inputs, training=True)
        loss = student._soft_loss(inputs, teacher_out, student_out, temperature, weight)
        if hidden:
            states, mask = teacher_states
            loss += hidden["weight"] * hidden_state_loss(block_outputs(student.encoder, inputs, training=True)[0],
                                                         states, hidden["layers"], mask)
        return loss, student_out

    def train_step(data):
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        extra = None
        if unlabelled:
            x, extra = x
        rows = batch_rows(x)
        inputs, soft_weight = with_copies(x, sample_weight, 0)
        teacher_out, teacher_states = teacher_outputs(inputs), teacher_blocks(inputs)
        if extra is not None:
            extra, _ = with_copies(extra, None, 1)
            extra_teacher = teacher_outputs(extra), teacher_blocks(extra)
        with tf.GradientTape() as tape:
            loss, y_pred_all = matched_loss(inputs, teacher_out, teacher_states, soft_weight)
            if extra is not None:
                extra_loss, _ = matched_loss(extra, *extra_teacher, None)
                counted, extra_counted = (tf.cast(batch_rows(part), loss.dtype) for part in (inputs, extra))
                loss = (counted * loss + extra_counted * extra_loss) / (counted + extra_counted)
            # The soft loss is a plain mean, not a Keras loss: in Keras' terms for each replica (its
            # share, mean / replicas, as `compute_loss` gives the labels' loss; the replicas'
            # gradients are summed), each row of the global batch weighing the same.
            loss = example_mean_on_replicas(loss / replicas, rows)
            y_pred = tf.nest.map_structure(lambda t: t[:rows], y_pred_all) if augment else y_pred_all
            if alpha:
                hard = student.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
                loss = (1.0 - alpha) * loss + alpha * hard
            student._loss_tracker.update_state(loss * replicas, sample_weight=rows)  # as Keras' train_step
            scaled = student.optimizer.scale_loss(loss)
        weights = student.trainable_weights
        student.optimizer.apply_gradients(zip(tape.gradient(scaled, weights), weights))
        if alpha:
            return student.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        return {"loss": student._loss_tracker.result()}

    return train_step


def distillation_test_step(student, teacher, temperature, alpha, hidden=None):
    """The student's Keras `test_step` for the run's validation: the loss `distillation_step`
    trains on (the soft loss against the teacher's outputs, plus `alpha` x the labels' loss and the
    `hidden` state loss when the run has them), on the batch alone (no dropout, no masked copies,
    no unlabelled text), so that `val_loss` reads as `loss` does; with labels (`alpha` > 0) also the
    compiled metrics, as Keras' `test_step`."""
    from keras.src import tree
    from keras.src.losses import loss as loss_module
    from keras.src.trainers.data_adapters import data_adapter_utils

    def test_step(data):
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        teacher_out = tf.nest.map_structure(tf.stop_gradient, teacher(x, training=False))
        y_pred = student(x, training=False)
        loss = student._soft_loss(x, teacher_out, y_pred, temperature, sample_weight)
        if hidden:
            states, mask = block_outputs(teacher.encoder, x)
            loss += hidden["weight"] * hidden_state_loss(block_outputs(student.encoder, x)[0], states,
                                                         hidden["layers"], mask)
        if alpha:
            hard = student._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
            loss = (1.0 - alpha) * loss + alpha * loss_module.unscale_loss_for_distribution(hard)
        rows = tf.shape(next(part for part in tree.flatten(x) if part is not None))[0]
        student._loss_tracker.update_state(loss, sample_weight=rows)
        if alpha:
            return student.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        return {"loss": student._loss_tracker.result()}

    return test_step
