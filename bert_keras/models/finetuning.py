"""`compile_for_finetuning`: BERT's fine-tuning optimizer and a task model's own loss, in one call."""


def compile_for_finetuning(
    model,
    *,
    num_train_steps,
    learning_rate=2e-5,
    warmup_ratio=0.1,
    weight_decay=0.01,
    loss="auto",
    metrics="auto",
    skip_padding="auto",
    **compile_kwargs,
):
    """Compiles a task model with the BERT fine-tuning recipe.

    The optimizer is `bert_keras.training.create_optimizer`'s AdamW (the
    google-research `run_classifier.py` / `run_squad.py` one): linear warmup
    over `warmup_ratio` of the steps, linear decay to 0 at
    `num_train_steps`, decoupled weight decay (not on LayerNorm and biases),
    global-norm clipping at 1.0. The loss is `model.default_loss()` (None for
    a model with a built-in loss, e.g. `BertSpanQA`).

    Padded tokens are skipped in every per-token layer (`BertEncoder`'s
    `skip_padding`) unless the step compiles with XLA or runs on a TPU, which
    need static shapes: the heads never read padded positions, so training
    computes the same thing with less work.

    Example:

    >>> import numpy as np
    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> from bert_keras.models import BertClassifier
    >>> classifier = BertClassifier(BertEncoder(BertConfig.named("tiny", vocab_size=100)), num_classes=2)
    >>> compile_for_finetuning(classifier, num_train_steps=100, learning_rate=5e-5)
    >>> type(classifier.optimizer).__name__
    'BertAdamW'

    Args:
        model: a task model with `default_loss()` and `default_metrics()`
            (`BertClassifier`, `BertTokenClassifier`, `BertSpanQA`,
            `BertMultipleChoice`).
        num_train_steps: int. Total optimizer steps (epochs * steps per epoch).
        learning_rate: float. Peak learning rate (BERT: 2e-5 .. 5e-5).
        warmup_ratio: float. Fraction of `num_train_steps` spent warming up.
        weight_decay: float. Decoupled weight decay rate.
        loss: `"auto"` for `model.default_loss()`, else as `compile`.
        metrics: `"auto"` for `model.default_metrics()`, else as `compile`.
        skip_padding: `"auto"` (on unless XLA or TPU), True or False; sets
            `model.encoder.skip_padding`.
        **compile_kwargs: further `keras.Model.compile` arguments
            (`jit_compile`, `steps_per_execution`, ...).
    """
    # Imported here: bert_keras.training imports the models package (the
    # pretraining loop builds a BertPretrainer), so a module-level import
    # would be circular.
    from bert_keras.training.optimizer import create_optimizer

    optimizer = create_optimizer(
        learning_rate=learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=int(round(warmup_ratio * num_train_steps)),
        weight_decay=weight_decay,
        extendable_schedule=True,  # a later fit extends it without retracing the train step
    )
    model.compile(
        optimizer=optimizer,
        loss=model.default_loss() if isinstance(loss, str) and loss == "auto" else loss,
        metrics=model.default_metrics() if metrics == "auto" else metrics,
        **compile_kwargs,
    )
    # After compile, `model.jit_compile` holds what Keras resolved "auto" to.
    model.use_skip_padding(skip_padding)
