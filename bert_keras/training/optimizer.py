"""The BERT pretraining optimizer: AdamW, linear warmup then linear decay, global-norm clipping.

This reproduces the recipe of google-research/bert `optimization.py` and
tf-models-official `AdamWeightDecay` with Keras 3 parts:

* learning rate: `WarmupLinearDecay`, 0 -> peak linearly over `num_warmup_steps`,
  then peak -> 0 linearly at `num_train_steps`;
* decoupled weight decay (`variable -= lr * weight_decay * variable`, outside
  the Adam moments) that skips LayerNorm and bias variables;
* gradients clipped by their *global* norm (1.0), as `clip_by_global_norm`.

Bias correction: Keras `AdamW` applies Adam's bias correction
(`lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`), as tf-models-official's
`AdamWeightDecay` does (it subclasses the Keras 2 Adam, i.e. `ResourceApplyAdam`).
The original google-research `AdamWeightDecayOptimizer` has *no* bias
correction.

Epsilon: `torch.optim.AdamW` (what Hugging Face fine-tunes with) adds it to the
bias-corrected `sqrt(v_hat)`; Keras and tf-models-official add it to the uncorrected
`sqrt(v)`, which makes the effective epsilon `1 / sqrt(1 - beta_2^t)` times larger:
22x at step 2, 3x at step 126. With BERT's epsilon of 1e-6 that is not negligible: many
gradient elements are that small, and the first hundred steps move less. Measured: with
dropout off and the same batches, 20 fine-tuning steps of MiniLM end 0.008 apart from HF
torch in probability under Keras' rule and 6e-8 apart under torch's. The
default is torch's rule (`bias_corrected_epsilon=True`), computed by the same fused
kernel with epsilon scaled by `sqrt(1 - beta_2^t)`; `False` gives Keras'.
"""

import keras

from bert_keras.padding_skipping import needs_static_shapes

# Variables whose *path* contains one of these substrings are not decayed. Paths
# look like "transformer_layer_0/attention_layer_norm/gamma": Keras 3 variable
# *names* are only the last part ("gamma", "bias"), so name matching alone would
# silently decay every LayerNorm scale.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert_keras")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak_learning_rate`, then linear decay to 0.

    `lr(step) = peak * step / warmup` for `step < warmup`, then
    `peak * (total - step) / (total - warmup)`, and 0 from `total` on.

    Example:

    >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    >>> [round(float(schedule(s)), 8) for s in (0, 5, 10, 55, 100)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]

    An `extendable` schedule keeps its two step counts in a variable, so that `extend` moves
    the end of the decay (a second `fit` of a task) without retracing a train step that was
    traced with it:

    >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10, extendable=True)
    >>> schedule.extend(200)
    >>> round(float(schedule(150)), 8), schedule.num_train_steps
    (2.632e-05, 200)

    Args:
        peak_learning_rate: float. The rate reached at the end of warmup.
        num_train_steps: int. Step at which the rate reaches 0.
        num_warmup_steps: int. Warmup length; 0 starts at the peak.
        extendable: keep the step counts in a (non-trainable) variable; create the schedule
            in the distribution strategy's scope then.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps, *, extendable=False):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(
                f"num_warmup_steps must be in [0, num_train_steps={num_train_steps}], "
                f"got {num_warmup_steps}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self._steps = None
        if extendable:
            self._steps = keras.Variable([float(self.num_train_steps), float(self.num_warmup_steps)],
                                         dtype="float32", trainable=False, name="schedule_steps")

    @property
    def extendable(self):
        return self._steps is not None

    def extend(self, num_train_steps, num_warmup_steps=None):
        """Ends the decay at `num_train_steps` (warmup kept unless given): an `extendable` schedule."""
        if not self.extendable:
            raise ValueError("extend: this schedule was not created with extendable=True")
        warmup = self.num_warmup_steps if num_warmup_steps is None else int(num_warmup_steps)
        if num_train_steps <= 0 or not 0 <= warmup <= num_train_steps:
            raise ValueError(f"extend: num_train_steps={num_train_steps}, num_warmup_steps={warmup}")
        self.num_train_steps, self.num_warmup_steps = int(num_train_steps), warmup
        self._steps.assign([float(self.num_train_steps), float(self.num_warmup_steps)])

    def __call__(self, step):
        ops = keras.ops
        step = ops.cast(step, "float32")
        peak = self.peak_learning_rate
        if self._steps is not None:  # read when the step runs: `extend` needs no retrace
            total, warmup_steps = self._steps[0], self._steps[1]
        else:
            total, warmup_steps = float(self.num_train_steps), float(self.num_warmup_steps)
        # max(..., 1) keeps both ratios finite when warmup is 0 or covers every step.
        warmup = ops.maximum(warmup_steps, 1.0)
        decay = ops.maximum(total - warmup_steps, 1.0)
        warming = peak * step / warmup
        decaying = peak * (total - step) / decay
        rate = ops.where(step < warmup_steps, warming, decaying)
        return ops.clip(rate, 0.0, peak)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


@keras.saving.register_keras_serializable(package="bert_keras")
class BertAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` that excludes variables from weight decay by *path*.

    Keras matches `exclude_from_weight_decay(var_names=...)` against
    `variable.name`, which in Keras 3 is only the last path component
    ("gamma"), so "layer_norm" never matches a LayerNorm scale. When the
    optimizer is built, this class turns the path substrings into the exact
    variable list and hands it to the public `exclude_from_weight_decay`.

    Example:

    >>> opt = BertAdamW(learning_rate=1e-3, weight_decay=0.01,
    ...                 exclude_from_weight_decay_paths=("layer_norm", "bias"))
    >>> opt.exclude_from_weight_decay_paths
    ('layer_norm', 'bias')

    Args:
        exclude_from_weight_decay_paths: tuple of str. Substrings of
            `variable.path` (e.g. "layer_norm", "bias") not to decay.
        bias_corrected_epsilon: bool. True (default): epsilon is added to the
            bias-corrected `sqrt(v_hat)`, as `torch.optim.AdamW`; False: to the
            uncorrected `sqrt(v)`, as `keras.optimizers.AdamW` (see the module
            docstring for why the default is torch's).
        **kwargs: everything `keras.optimizers.AdamW` takes.
    """

    def __init__(self, *, exclude_from_weight_decay_paths=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 bias_corrected_epsilon=True, **kwargs):
        super().__init__(**kwargs)
        self.exclude_from_weight_decay_paths = tuple(exclude_from_weight_decay_paths)
        self.bias_corrected_epsilon = bool(bias_corrected_epsilon)
        if self.bias_corrected_epsilon and (self.amsgrad or keras.backend.backend() != "tensorflow"):
            raise ValueError("bias_corrected_epsilon=True needs the TensorFlow backend and amsgrad=False; "
                             "pass bias_corrected_epsilon=False for Keras' own update")

    def build(self, var_list):
        if not self.built:
            excluded = [
                variable for variable in var_list
                if any(part in variable.path for part in self.exclude_from_weight_decay_paths)
            ]
            self.exclude_from_weight_decay(var_list=excluded)
        super().build(var_list)

    def _clip_gradients(self, grads):
        """Keras' global-norm clipping, with an embedding's `tf.IndexedSlices` gradient kept sparse.

        Keras densifies the `[30522, H]` word embeddings' gradient (one row per token of the
        batch) twice, to sum its squares and to scale it: two table-sized tensors written and
        read every step, ~13% of a MiniLM fine-tuning step on 2 CPU cores. Here the norm is
        computed on the rows a batch touched, duplicate rows summed first, as the dense gradient
        sums them. (Keras, and `tf.clip_by_global_norm` of google-research/bert, square the
        slices' values as they come: a token twice in a batch counts as two rows, not as one
        row of their sum, and the norm is not the gradient's. HF torch's dense gradient gives
        the true norm; so does this.)

        Under a distribution strategy the replicas' gradients are summed here, before the norm:
        Keras clips each replica's own part of the batch and sums after (its
        `_all_reduce_sum_gradients`), so with two replicas a step clipped on one device was
        clipped differently, or not at all (each part's norm is smaller), and the run was not
        the one-device run of the same global batch.
        """
        if self._sums_replicas_before_clipping():
            grads = _sum_over_replicas(grads)
        if not (self.global_clipnorm and self.global_clipnorm > 0) or \
                keras.backend.backend() != "tensorflow" or \
                not any(_is_indexed_slices(g) for g in grads):
            return super()._clip_gradients(grads)
        import tensorflow as tf

        if needs_static_shapes():  # XLA / TPU: tf.unique does not compile; the dense gradient does
            return super()._clip_gradients([tf.convert_to_tensor(g) if _is_indexed_slices(g) else g
                                            for g in grads])
        grads = [_summed_rows(g) if _is_indexed_slices(g) else g for g in grads]
        # l2_loss is sum(g^2) / 2 in one pass (square + reduce_sum writes then reads a temporary).
        halves = [tf.nn.l2_loss(g.values if _is_indexed_slices(g) else g) for g in grads if g is not None]
        norm = tf.sqrt(2.0 * tf.add_n(halves))
        # As keras.optimizers' clip_by_global_norm: a non-finite norm makes the gradients NaN
        # (here the rows a batch touched, and every dense gradient).
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm) + (norm - norm)
        # Most fine-tuning steps are not clipped (the scale is exactly 1, and x * 1 is x): the
        # dense gradients are multiplied only when it is not, which saves a read and a write of
        # every gradient (~6 ms of a MiniLM step on 2 cores). The slices are small; always scaled.
        dense = [g for g in grads if g is not None and not _is_indexed_slices(g)]
        if dense:
            dense = tf.cond(tf.equal(scale, 1.0), lambda: dense, lambda: [g * scale for g in dense])
        dense = iter(dense)
        return [None if g is None else
                tf.IndexedSlices(g.values * scale, g.indices, g.dense_shape) if _is_indexed_slices(g)
                else next(dense) for g in grads]

    def _sums_replicas_before_clipping(self):
        """Whether `_clip_gradients` sums the replicas' gradients (in a replica context, without
        gradient accumulation, whose accumulators Keras keeps per replica), so that
        `_all_reduce_sum_gradients` must not sum them again."""
        if keras.backend.backend() != "tensorflow" or self.gradient_accumulation_steps:
            return False
        import tensorflow as tf

        return tf.distribute.has_strategy() and tf.distribute.get_replica_context() is not None

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._sums_replicas_before_clipping():
            return list(grads_and_vars)  # summed by _clip_gradients already
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _apply_weight_decay(self, variables):
        """Decoupled weight decay as one pass over each variable: `var *= 1 - lr * weight_decay`.

        Keras writes it `var.assign_sub(var * wd * lr)`: two multiplications over the whole
        variable, then a subtraction reading it again, three passes over the `[30522, H]` word
        embeddings each step. One multiplication whose result becomes the variable's buffer
        does the same (torch's `AdamW` writes it `p.mul_(1 - lr * wd)`); the factor is
        computed once a step, not once per variable.
        """
        if isinstance(self.weight_decay, (int, float)) and self.weight_decay == 0:
            return  # weight_decay=0: Keras would still multiply every variable by 1
        if self.weight_decay is None or keras.backend.backend() != "tensorflow":
            return super()._apply_weight_decay(variables)
        import tensorflow as tf

        decayed = [variable for variable in variables if self._use_weight_decay(variable)]
        if not decayed:
            return
        factors = {}
        for variable in decayed:
            if variable.dtype not in factors:
                rate = tf.cast(self.learning_rate, variable.dtype) * tf.cast(self.weight_decay, variable.dtype)
                factors[variable.dtype] = 1 - rate

        def apply(distribution, variables):
            for variable in variables:
                factor = factors[variable.dtype]
                distribution.extended.update(
                    variable.value if isinstance(variable, keras.Variable) else variable,
                    lambda v: v.assign(v * factor), group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(apply, self._distribution_strategy, decayed)

    def update_step(self, gradient, variable, learning_rate):
        """The Adam update, as one fused `ResourceApplyAdam` kernel per variable.

        The kernel computes Keras' formula (`m += (g - m)(1 - b1)`,
        `v += (g^2 - v)(1 - b2)`, `var -= lr sqrt(1 - b2^t) / (1 - b1^t) m /
        (sqrt(v) + eps)`) in one multi-threaded pass over the variable instead
        of about ten element-wise ops, each a pass over memory: for the
        `[30522, H]` word embeddings that is most of the optimizer's time. With
        `bias_corrected_epsilon` the kernel gets `eps sqrt(1 - b2^t)`, which
        turns the formula into torch's exactly: `lr / (1 - b1^t) m /
        (sqrt(v / (1 - b2^t)) + eps)`. The decoupled weight decay is the step
        before this one (`_apply_weight_decay`).
        """
        if keras.backend.backend() != "tensorflow" or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        local_step = tf.cast(self.iterations + 1, dtype)
        index = self._get_variable_index(variable)
        momentum, velocity = self._momentums[index], self._velocities[index]
        beta2_power = tf.pow(tf.cast(self.beta_2, dtype), local_step)
        epsilon = tf.cast(self.epsilon, dtype)
        if self.bias_corrected_epsilon:
            epsilon = epsilon * tf.sqrt(1 - beta2_power)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=momentum.value.handle,
            v=velocity.value.handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), local_step),
            beta2_power=beta2_power,
            lr=tf.cast(learning_rate, dtype),
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=epsilon,
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype),
            use_locking=False,
            use_nesterov=False,
        )

    def get_config(self):
        config = super().get_config()
        config["exclude_from_weight_decay_paths"] = list(self.exclude_from_weight_decay_paths)
        config["bias_corrected_epsilon"] = self.bias_corrected_epsilon
        return config


def create_optimizer(
    *,
    learning_rate=1e-4,
    num_train_steps,
    num_warmup_steps,
    weight_decay=0.01,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    clipnorm=1.0,
    exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
    bias_corrected_epsilon=True,
    extendable_schedule=False,
):
    """The BERT optimizer: AdamW + warmup/linear-decay schedule + global-norm clipping.

    Example:

    >>> opt = create_optimizer(learning_rate=1e-4, num_train_steps=1000, num_warmup_steps=100)
    >>> type(opt).__name__, opt.global_clipnorm, round(float(opt.learning_rate), 8)
    ('BertAdamW', 1.0, 0.0)

    Args:
        learning_rate: float. Peak learning rate, reached after warmup.
        num_train_steps: int. Total optimizer steps; the rate is 0 from here on.
        num_warmup_steps: int. Linear warmup length.
        weight_decay: float. Decoupled weight decay rate (0: off).
        beta_1, beta_2, epsilon: Adam hyper-parameters (BERT: 0.9, 0.999, 1e-6).
        clipnorm: float or None. Clip gradients by their *global* norm
            (all variables together), as BERT's `clip_by_global_norm(1.0)`.
        exclude_from_weight_decay: tuple of str. Substrings of variable paths
            that are not decayed (default: LayerNorm and bias variables).
        bias_corrected_epsilon: bool. Epsilon on the bias-corrected `sqrt(v_hat)`
            as `torch.optim.AdamW` (default), or on `sqrt(v)` as Keras (False).
        extendable_schedule: bool. `WarmupLinearDecay(extendable=True)`: a later fit can move
            the end of the decay without retracing (call it in the strategy's scope).

    Returns:
        A `BertAdamW` (a `keras.optimizers.AdamW`), ready for `model.compile`.
    """
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps, extendable=extendable_schedule)
    return BertAdamW(
        learning_rate=schedule,
        weight_decay=float(weight_decay or 0.0),  # 0: no decay (AdamW rejects None)
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
        exclude_from_weight_decay_paths=exclude_from_weight_decay,
        bias_corrected_epsilon=bias_corrected_epsilon,
        name="adamw",
    )


def _is_indexed_slices(gradient):
    import tensorflow as tf

    return isinstance(gradient, tf.IndexedSlices)


def _sum_over_replicas(grads):
    """The gradients summed over the strategy's replicas (None kept: a variable without one)."""
    import tensorflow as tf

    present = [g for g in grads if g is not None]
    if not present:
        return list(grads)
    summed = iter(tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(summed) for g in grads]


def _summed_rows(gradient):
    """An `IndexedSlices` gradient with each row once (duplicates summed, as the dense gradient)."""
    import tensorflow as tf

    unique, position = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, position, tf.size(unique))
    return tf.IndexedSlices(values, unique, gradient.dense_shape)
