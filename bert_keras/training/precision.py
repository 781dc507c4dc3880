"""Mixed precision: choose the Keras dtype policy for the accelerator in use.

* TPU: "mixed_bfloat16" (bfloat16 has float32's range: no loss scaling).
* GPU: "mixed_float16". float16 gradients underflow without loss scaling;
  Keras 3 `Model.compile` wraps the optimizer in a dynamic
  `keras.optimizers.LossScaleOptimizer` by itself when the *model's* dtype
  policy is "mixed_float16" (`keras/src/trainers/trainer.py`), so the policy must
  be set before the model is built (`apply_policy`). A model built with a
  per-model `dtype="mixed_float16"` is not wrapped by Keras: `loss_scaling.with_loss_scaling`
  (used by `run_pretraining` and every model's `compile`) wraps it, in a wrapper whose
  skip-or-apply choice holds on every replica. tests/bert_keras/test_training.py checks both.
* CPU: "float32" unless forced; CPUs gain little or lose from float16 math.

The policy is global (`keras.config.set_dtype_policy`): set it before building
the model, inside or outside the strategy scope.
"""

import logging

logger = logging.getLogger(__name__)

PRECISION_CHOICES = ("auto", "off", "float16", "bfloat16")


def choose_policy(mode="auto", strategy=None):
    """The dtype policy name for `mode` on the devices of `strategy`.

    Example:

    >>> choose_policy("off"), choose_policy("bfloat16")
    ('float32', 'mixed_bfloat16')

    Args:
        mode: "auto" (by device), "off" (float32), "float16" or "bfloat16" (forced).
        strategy: the `tf.distribute.Strategy` in use (for "auto"); None = the default.

    Returns:
        str: "float32", "mixed_float16" or "mixed_bfloat16".
    """
    if mode not in PRECISION_CHOICES:
        raise ValueError(f"unknown mixed precision mode {mode!r}; choose one of {', '.join(PRECISION_CHOICES)}")
    if mode == "off":
        return "float32"
    if mode == "float16":
        return "mixed_float16"
    if mode == "bfloat16":
        return "mixed_bfloat16"
    return {"tpu": "mixed_bfloat16", "gpu": "mixed_float16"}.get(device_kind(strategy), "float32")


def device_kind(strategy=None):
    """"tpu", "gpu" or "cpu": the kind of device `strategy` computes on.

    Example:

    >>> device_kind() in ("tpu", "gpu", "cpu")
    True
    """
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    if "TPU" in type(strategy).__name__:
        return "tpu"
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: whatever TensorFlow places on
        devices = [device.name for device in tf.config.list_logical_devices("GPU")]
    return "gpu" if any("GPU" in device.upper() for device in devices) else "cpu"


def apply_policy(mode="auto", strategy=None):
    """Set the global Keras dtype policy chosen by `choose_policy` and return its name.

    Example:

    >>> apply_policy("off")
    'float32'

    Args:
        mode, strategy: as `choose_policy`.
    """
    import keras

    name = choose_policy(mode, strategy)
    keras.config.set_dtype_policy(name)
    # Debug: a run reports the policy once, with its strategy and batch (`Pretrainer.pretrain`);
    # at INFO, `bert-keras pretrain` printed "dtype policy: float32" and then that line again.
    logger.debug("dtype policy: %s", name)
    return name
