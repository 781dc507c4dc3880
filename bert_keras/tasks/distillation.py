"""Distillation: a fine-tuned teacher -> a smaller student of the same task, for cheap CPU serving.

`distill(teacher, x, y=None, layers=3)` returns an ordinary task of the teacher's class and
settings (labels, `seq_length`, windows, text pairs ...): `save`, `load`, `evaluate` and
`export(..., quantize="int8")` work on it as on any fine-tuned task.

The student (planned and built by `bert_keras.tasks.student`) has its encoder initialised from
the teacher (DistilBERT's "layer dropping"): its embeddings, pooler and head are the teacher's,
and its `layers` transformer blocks are teacher blocks spread evenly from the first to the last
(`student_layers`: 12 -> 6 keeps 0, 2, 4, 7, 9, 11, DistilBERT's choice; 6 -> 3 keeps 0, 2, 5);
or `init=` a smaller pretrained encoder with the teacher's vocabulary (needed for another
hidden size: a head and blocks of one width cannot be copied into another), with a new head.

The loss (Hinton et al. 2015, DistilBERT's task stage): the teacher runs on every training
batch (no dropout) and the student matches its soft targets, `T^2 * KL(softmax(t / T) ||
softmax(s / T))` at temperature `T` (per token for NER, over positions for SQuAD's start /
end, over choices for SWAG), mean squared error for regression and `1 - cosine + MSE` for
sentence vectors; with labels `y`, `(1 - alpha) * soft + alpha * the task's own loss`.
Unlabelled text is enough (`y=None`: soft targets only), and `unlabelled=` adds text without labels to
a labelled run (each step reads a batch of both; DistilBERT's and TinyBERT's way of distilling
on more text than the labelled set). With little text, `augment=N` adds N
copies of every batch with 10% of their tokens masked (`masked_copies`, Tang et al. 2019): the
teacher labels them and the student matches it there too. `hidden_weight=w` adds
TinyBERT's hidden-state loss (each student block's output against its teacher block's, mean
squared error over the real tokens); off by default (measured in `benchmarks/bench_distillation.py`).

Every setting is checked before anything is built or trained (`TaskInputError`).

>>> from bert_keras.tasks import load
>>> teacher = load("out/sentiment")                                             # doctest: +SKIP
>>> student = teacher.distill(texts, labels, layers=3, epochs=3, seed=0)     # doctest: +SKIP
>>> student.save("out/sentiment-3l")                                           # doctest: +SKIP
>>> student.export("models", "sentiment", quantize="int8")                     # doctest: +SKIP
"""

import dataclasses
import numbers
import os
import shlex
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from bert_keras.tasks.dataset_inputs import without_autotune_thread
from bert_keras.tasks.inputs import TaskInputError, check_count, num_rows
from bert_keras.tasks.distillation_step import distillation_step, distillation_test_step, masked_copy_count
from bert_keras.tasks.student import make_student, plan_student


# -- the run --------------------------------------------------------------------------------------
def _inputs_of(element):
    """The inputs of a `_distillation_dataset` element (its placeholder labels dropped)."""
    return element[0] if isinstance(element, tuple) else element


def _has_labels(teacher, x, y):
    """Whether the run has labels: `y`, or a dataset `x` of `(x, y)` / `(x, y, sample_weight)`
    elements (Keras' reading; then `y` must not be given)."""
    if not isinstance(x, tf.data.Dataset):
        return y is not None
    from bert_keras.tasks.dataset_inputs import element_parts
    from bert_keras.tasks.embedder import Embedder

    if y is not None:
        raise TaskInputError("y: must not be given with a tf.data.Dataset as x (as in Keras): the labels "
                             "come from its elements ((x, y) or (x, y, sample_weight))")
    labelled = element_parts(x.element_spec, x_is_tuple=teacher.dataset_layout.x_is_tuple).has_y
    if labelled and isinstance(teacher, Embedder):
        raise TaskInputError("x: the dataset's elements hold labels ((x, y)); an Embedder has no labels, its "
                             "student learns the teacher's vectors (map the dataset to its texts)")
    return labelled


def _validation_split_off(teacher, x, y, alpha, validation_split, validation_data):
    """`(x, y, validation)`: Keras' reading of `validation_split` / `validation_data` for `distill`.

    `validation` is `(x, y, labelled)` (a dataset as `x`, its elements labelled or not) or None.
    `validation_split` holds out the last fraction of in-memory `x` / `y`, taken before any
    shuffling, and only when `validation_data` is not given (which, as in Keras, overrides it).
    Validation rows without labels are refused when the run weighs labels (`alpha` > 0): the
    validation loss is the run's loss, and the labels weigh in it."""
    from bert_keras.tasks.fit_loop import split_off_validation

    validation_split = _number("validation_split", validation_split,
                               "the fraction of x held out for validation, in [0, 1)", lambda v: 0 <= v < 1)
    if validation_data is None:
        if not validation_split:
            return x, y, None
        if isinstance(x, tf.data.Dataset):
            raise TaskInputError("validation_split: works on in-memory data only (as in Keras); with a dataset, "
                                 "pass validation_data= (e.g. dataset.take(n))")
        x, y, _, (held_x, held_y) = split_off_validation(x, y, None, validation_split)
        return x, y, (held_x, held_y, held_y is not None)
    if isinstance(validation_data, tf.data.Dataset):
        if validation_data.cardinality() == tf.data.INFINITE_CARDINALITY:  # Keras' validation would never end
            raise TaskInputError("validation_data: an infinite dataset (.repeat()); give a finite one "
                                 "(e.g. dataset.take(n))")
        try:
            validation_labelled = _has_labels(teacher, validation_data, None)
        except TaskInputError as error:
            raise TaskInputError(f"validation_data: {str(error).split(': ', 1)[-1]}") from None
        validation = (validation_data, None, validation_labelled)
    elif isinstance(validation_data, (tuple, list)) and len(validation_data) == 2:
        validation_labelled = validation_data[1] is not None
        validation = (*validation_data, validation_labelled)
    else:
        raise TaskInputError("validation_data: expected (x, y) (y None: inputs without labels, for a run "
                             "without them) or a tf.data.Dataset")
    if alpha and not validation_labelled:
        raise TaskInputError(f"validation_data: holds no labels, but the run weighs them (alpha={alpha:g}) and "
                             "the validation loss is the run's; give (x, y)")
    return x, y, validation


def _number(name, value, expected, within):
    """`value` as a float: a finite real number (numpy's too, not a bool) for which `within` holds."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or \
            not np.isfinite(float(value)) or not within(float(value)):
        raise TaskInputError(f"{name}={value!r}: {expected}")
    return float(value)


def distill(teacher, x, y=None, *, unlabelled=None, layers=None, hidden_size=None, init=None, temperature=2.0,
            alpha=None,
            epochs=3, batch_size=None, learning_rate=None, warmup_ratio=0.1, weight_decay=0.01,
            max_steps=None, validation_split=0.0, validation_data=None, seed=0, dropout=None, augment=None,
            mask_rate=0.1, hidden_weight=0.0, run_dir=None,
            checkpoint_every=None,
            keep_run_dir=False,
            verbose="auto", callbacks=None):
    """A student of `teacher` trained on the teacher's outputs for `x`; returns the student task.

    Args:
        teacher: a fine-tuned task (`load(directory)`), or its directory.
        x: the training inputs, in the forms the teacher's `fit` takes (texts, pairs, word
            lists, `(questions, contexts)`, `(contexts, endings)`, a dataset). Unlabelled
            text is enough: the teacher labels it.
        y: the labels, as `fit` takes them; None: the teacher's soft targets alone. With a
            `tf.data.Dataset` the labels are its elements' (`(x, y)`, as in Keras; `x` alone:
            unlabelled), and `y` must not be given.
        unlabelled: more inputs without labels, in the forms of `x` (DistilBERT's and TinyBERT's
            recipe: distil on more text than the labelled set). Each step reads a batch of `x`
            and one of `unlabelled`; the student matches the teacher's outputs on both (the
            labels weigh on `x`'s rows only), and a pass runs over the larger of the two.
        layers: the student's transformer blocks: a number (evenly spread, `student_layers`)
            or the block indices. Required unless `init` is given (then default: all of its).
        hidden_size: the student's hidden size; another than the teacher's needs `init`.
        init: a smaller pretrained encoder (`load_pretrained` spec) with the teacher's
            vocabulary to start from instead of the teacher's blocks (its head is new).
        temperature: softmax temperature of the soft targets (> 0; the loss is scaled by T^2).
        alpha: weight of the hard-label loss, in [0, 1] (default 0.5 with labels, 0 without).
        epochs, batch_size, learning_rate, warmup_ratio, weight_decay, max_steps: the run
            (default batch size / learning rate: `recipe_for_data`, as `finetune`; a batched
            dataset's own batch size, as `fit`): exactly
            `round(epochs x steps per pass)` steps, at most `max_steps` (the last pass partial).
            `learning_rate` > 0, `warmup_ratio` in [0, 1], `weight_decay` >= 0.
        validation_split: as Keras: the last fraction of in-memory `x` (and `y`), taken before
            any shuffling, held out of the run and validated at the end of every epoch (not with
            a dataset: pass `validation_data`).
        validation_data: as Keras: `(x, y)` in `x`'s and `y`'s forms, or a dataset; overrides
            `validation_split`. `y` may be None (and a dataset's elements `x` alone) when the run
            weighs no labels. The history's `val_loss` is the run's loss on it (the teacher's soft
            targets and, with `alpha`, the labels; no dropout, masked copies or unlabelled text);
            with labels it also holds the task's metrics (`val_accuracy`, `val_pearson`, ... as
            `fit`'s), read by callbacks such as `EarlyStopping(monitor="val_loss")`.
        seed: seeds the weights of anything new, dropout, shuffling and masking (the same seed,
            data and machine give the same student); an int in [0, 2**32). None: not seeded,
            as `fit`'s default (every run differs).
        dropout: the student head's dropout (default the teacher's).
        augment: masked copies of every batch (`masked_copies`): the teacher labels them too
            and the student learns its soft targets on them (not the labels). More text to
            match for little data; each copy costs one more pass of both models. Default
            (`default_augment`): 2 below 20,000 examples, `unlabelled` counted (SST-2, 2,000
            sentences: -1.4 / -1.5 points without, -0.7 / -0.8 with), else 0.
        mask_rate: the probability that a token of a copy is masked.
        hidden_weight: weight of TinyBERT's hidden-state loss (`hidden_state_loss`: each student
            block's output against the teacher block it was copied from, or for `init=` the
            teacher's blocks spread evenly), added to the soft loss; >= 0, 0 (the default): off.
            It runs both encoders once more per step; a student of another hidden size cannot use it.
        run_dir, checkpoint_every, keep_run_dir: resumable run backups, as `TextTask.fit`.
        verbose, callbacks: as `keras.Model.fit`.

    Raises:
        TaskInputError: a bad setting, before any step runs.
    """
    from bert_keras.tasks.finetuning_run import backup_callback, digest, weights_digest
    from bert_keras.tasks.recipe import recipe_for_data
    from bert_keras.tasks.fit_loop import keras_epochs, resumed_batches
    from bert_keras.tasks.task_files import load
    from bert_keras.tasks.text_task import TextTask
    from bert_keras.training.backup import with_run_backups

    callbacks, keras_backup = with_run_backups(callbacks)  # yours resumes as run_dir's: see fit
    teacher_path = None
    if not isinstance(teacher, TextTask):
        teacher_path = os.path.abspath(os.fspath(teacher))
        teacher = load(teacher_path)
    labelled = _has_labels(teacher, x, y)
    temperature = _number("temperature", temperature, "expected a number > 0", lambda v: v > 0)
    if alpha is None:
        alpha = 0.5 if labelled else 0.0
    alpha = _number("alpha", alpha, "the weight of the hard labels, in [0, 1]", lambda v: 0.0 <= v <= 1.0)
    if alpha and not labelled:
        given = "the dataset's elements hold no labels (x, not (x, y))" if isinstance(x, tf.data.Dataset) \
            else "no y was given"
        raise TaskInputError(f"alpha={alpha:g}: weighs hard labels, but {given} (alpha=0 distils the "
                             "teacher's soft targets alone)")
    x, y, validation = _validation_split_off(teacher, x, y, alpha, validation_split, validation_data)
    # A real number, as every other setting (float() took "3", and "three" or None raised a raw ValueError / TypeError)
    epochs_checked = _number("epochs", epochs, "expected a number > 0", lambda v: v > 0)
    max_steps = check_count("max_steps", max_steps)
    for name, part in (("x", x), ("unlabelled", unlabelled)):
        if isinstance(part, tf.data.Dataset) and part.cardinality() == tf.data.INFINITE_CARDINALITY \
                and not max_steps:
            raise TaskInputError(f"{name}: an infinite dataset (.repeat()); pass max_steps= (the steps to run), "
                                 "or a finite dataset")
    defaulted = augment is None
    augment = masked_copy_count(augment, x, unlabelled, tokenizer=teacher.tokenizer)
    mask_rate = _number("mask_rate", mask_rate, "the probability that a token is masked, in (0, 1)",
                        lambda v: 0.0 < v < 1.0)
    if learning_rate is not None:
        learning_rate = _number("learning_rate", learning_rate, "expected a number > 0", lambda v: v > 0)
    warmup_ratio = _number("warmup_ratio", warmup_ratio, "the fraction of the steps that warm up, in [0, 1]",
                           lambda v: 0.0 <= v <= 1.0)
    weight_decay = _number("weight_decay", weight_decay, "expected a number >= 0", lambda v: v >= 0)
    hidden_weight = _number("hidden_weight", hidden_weight, "the weight of the hidden-state loss, a number >= 0",
                            lambda v: v >= 0)
    if dropout is not None:  # else Keras' Dropout refused it, a raw ValueError once the student was half built
        dropout = _number("dropout", dropout, "the student head's dropout rate, in [0, 1)", lambda v: 0 <= v < 1)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or not 0 <= seed < 2 ** 32):
        raise TaskInputError(f"seed={seed!r}: expected a whole number in [0, 2**32), or None (not seeded)")
    seed = None if seed is None else int(seed)
    checkpoint_every = check_count("checkpoint_every", checkpoint_every)
    if checkpoint_every and not run_dir:
        raise TaskInputError("checkpoint_every: needs run_dir= (where the backups go)")
    plan = plan_student(teacher, layers=layers, hidden_size=hidden_size, init=init)
    hidden = None
    if hidden_weight:
        if plan.hidden_size != teacher.encoder.config.hidden_size:
            raise TaskInputError(f"hidden_weight={hidden_weight:g}: the student's hidden size {plan.hidden_size} is "
                                 f"not the teacher's {teacher.encoder.config.hidden_size}; its block outputs cannot "
                                 "be compared with the teacher's (hidden_weight=0)")
        from bert_keras.tasks.student import student_layers

        hidden = {"weight": hidden_weight, "layers": tuple(plan.layers) if plan.init is None else
                  student_layers(teacher.encoder.config.num_layers, len(plan.layers))}
    if batch_size is None and isinstance(x, tf.data.Dataset):  # its own batches, as fit and Keras
        from bert_keras.tasks.task_batches import batch_size_for

        batch_size = batch_size_for(teacher, x, None)
    recipe = recipe_for_data(x, learning_rate=learning_rate, batch_size=batch_size)
    batch_size = check_count("batch_size", recipe.batch_size)

    if seed is not None:
        keras.utils.set_random_seed(seed)
    student = make_student(teacher, plan, dropout=dropout)
    dataset, steps = student._distillation_dataset(x, y, batch_size=batch_size, seed=seed)
    extra = None
    if unlabelled is not None:  # its own shuffle: the same seed must not order both alike
        try:
            extra, extra_steps = student._distillation_dataset(unlabelled, None, batch_size=batch_size,
                                                              seed=None if seed is None else seed + 1)
        except TaskInputError as error:  # fit's readers name their input x ("x[0][1]: an empty text")
            message = str(error)
            if not message.startswith("x"):
                raise
            raise TaskInputError("unlabelled" + message[1:]) from None
        steps = max(part for part in (steps, extra_steps) if part is not None) \
            if steps is not None or extra_steps is not None else None
    validation_batches = None
    if validation is not None:  # unshuffled rows would do as well: the loss is their mean
        try:
            validation_batches, _ = student._distillation_dataset(*validation[:2], batch_size=batch_size, seed=0)
        except TaskInputError as error:  # fit's readers name their input x / y ("x[0][1]: an empty text")
            raise TaskInputError(f"validation_data {error}" if str(error)[:1] in "xy"
                                 else f"validation_data: {error}") from None
    masking = None
    inputs_spec = dataset.element_spec[0] if isinstance(dataset.element_spec, tuple) else dataset.element_spec
    if augment and not (isinstance(inputs_spec, dict) and {"token_ids", "padding_mask"} <= set(inputs_spec)):
        if defaulted:
            augment = 0
        else:
            raise TaskInputError(f"augment={augment}: {type(student).__name__} inputs have no token_ids / "
                                 "padding_mask to mask")
    if augment:
        tokenizer = student.tokenizer
        masking = dict(copies=augment, rate=mask_rate,
                       seed=int(np.random.default_rng().integers(2 ** 31)) if seed is None else seed,
                       mask_id=tokenizer.special_tokens.mask,
                       special_ids=[tokenizer.special_tokens.cls, tokenizer.special_tokens.sep])
    if steps is None:  # an infinite dataset: max_steps, checked above
        steps = total_steps = max_steps
    else:
        total_steps = max(1, int(round(epochs_checked * steps)))
        if max_steps:
            total_steps = min(total_steps, max_steps)
    steps_per_epoch = min(checkpoint_every or steps, total_steps)
    from bert_keras.training.optimizer import create_optimizer

    hard = bool(alpha)
    student.compile(optimizer=create_optimizer(
        learning_rate=recipe.learning_rate, num_train_steps=total_steps,
        num_warmup_steps=int(round(warmup_ratio * total_steps)), weight_decay=weight_decay),
        loss=student.default_loss() if hard else None,
        metrics=(student.default_metrics() or None) if hard else None)
    settings = dict(layers=list(plan.layers), teacher_layers=teacher.encoder.config.num_layers,
                    teacher_hidden_size=teacher.encoder.config.hidden_size,
                    hidden_size=plan.hidden_size, init=plan.init, temperature=temperature,
                    alpha=alpha, epochs=epochs_checked,
                    batch_size=batch_size, learning_rate=recipe.learning_rate, train_steps=total_steps,
                    seed=seed, labelled=labelled, augment=augment,
                    mask_rate=mask_rate if augment else None)
    if unlabelled is not None:
        settings["unlabelled"] = None if isinstance(unlabelled, tf.data.Dataset) else num_rows(unlabelled)
    if hidden:
        settings["hidden_weight"] = hidden_weight
    # Keras runs whole epochs of `steps_per_epoch`: the last one is cut short at `total_steps`
    # (a fractional `epochs`, `max_steps`), as the schedule and the record say.
    whole_epochs, callbacks = keras_epochs(total_steps, steps_per_epoch, callbacks, steps_per_pass=steps,
                                           verbose=verbose)
    if validation_batches is not None:
        from bert_keras.tasks.validation import ValidationOnOneDevice, validation_metrics

        held_x, held_y, held_labelled = validation
        if held_labelled:  # the task's metrics, as fit's
            callbacks = [*validation_metrics(student, held_x if isinstance(held_x, tf.data.Dataset)
                                             else (held_x, held_y), batch_size, callbacks), *callbacks]
        # As fit under several replicas (Keras' test loop cannot split an uneven last batch); and for an
        # Embedder, whose `evaluate` (which Keras' validation calls) refuses: it has no metrics.
        from bert_keras.tasks.embedder import Embedder

        if student.distribute_strategy.num_replicas_in_sync > 1 or isinstance(student, Embedder):
            callbacks = [ValidationOnOneDevice(validation_batches), *callbacks]
            validation_batches = None
    batches = dataset.repeat()
    if extra is not None:  # ((x, unlabelled x), y[, sample_weight]): the train step splits them
        batches = tf.data.Dataset.zip(batches, extra.repeat()).map(
            lambda element, more: ((element[0], _inputs_of(more)),) + tuple(element[1:]))
    batches = batches.take(total_steps)
    if run_dir:
        # As `fit`: a backup of other data (None for a dataset: it is not read twice) or of another
        # teacher is another run's, refused. A resumed run reads on where its backup left off.
        backup = backup_callback(run_dir, keep=keep_run_dir, total_steps=total_steps,
                                 steps_per_epoch=steps_per_epoch,
                                 batch_size=batch_size, distillation=settings,
                                 weights=weights_digest(teacher.head),
                                 data=digest((x, y) if unlabelled is None else (x, y, unlabelled)))
        callbacks.append(backup)
        batches = batches.skip(resumed_batches(backup, steps_per_epoch, total_steps))
    elif keras_backup is not None:
        batches = batches.skip(resumed_batches(keras_backup, steps_per_epoch, total_steps))
    student.train_step = distillation_step(student, teacher, temperature, alpha, masking,
                                           unlabelled=extra is not None, hidden=hidden)
    student.test_step = distillation_test_step(student, teacher, temperature, alpha, hidden=hidden)
    try:
        keras.Model.fit(student, without_autotune_thread(batches),
                        epochs=whole_epochs, steps_per_epoch=min(steps_per_epoch, total_steps),
                        shuffle=False, verbose=verbose, callbacks=callbacks,
                        validation_data=without_autotune_thread(validation_batches))
    finally:
        del student.train_step, student.test_step
        student.train_function = student.test_function = None
    student._compile_recipe(learning_rate=recipe.learning_rate, warmup_ratio=warmup_ratio,
                            weight_decay=weight_decay)
    teacher_training = dict(teacher._record.training)
    # An in-memory teacher has no directory to name: None, not its own starting point (the
    # teacher's `init` is the pretrained encoder it was fine-tuned from, kept in teacher_training).
    student.record(training={"distilled_from": teacher_path,
                             "teacher_training": {k: v for k, v in teacher_training.items()
                                                  if k != "teacher_training"},
                             "distillation": settings})
    return student



def unlabelled_inputs(teacher, path):
    """The lines of UTF-8 text file `path` (blank ones skipped) as inputs of `teacher`'s `fit`:
    texts, or `(texts, texts_b)` for a model of text pairs (a line holds 'A<TAB>B' or 'A ||| B'),
    or each line's words (split at whitespace) for NER. Question answering and multiple choice
    read structured examples, not lines: refused.

    Raises:
        TaskInputError: no such file, a bad byte, no text, a line without its pair, a tab in a line
            of a model of single texts (a column: a label would be read as text), a text the
            teacher reads no token of, or a family that reads no lines (naming the file and the line).
    """
    from bert_keras.tasks.embedder import Embedder
    from bert_keras.tasks.text_classifier import TextClassifier
    from bert_keras.tasks.token_classifier import TokenClassifier
    from bert_keras.tasks.inputs import NO_TOKEN
    from pipelines.tokenizer.tokenless import texts_without_token
    from serving.text_requests import TextRequestError, read_texts, split_pairs

    if not isinstance(teacher, (TextClassifier, TokenClassifier, Embedder)):
        raise TaskInputError(f"unlabelled {path}: a {type(teacher).__name__} reads structured examples, not lines of "
                             "text; pass them to distill(unlabelled=...) in the forms of x")
    try:
        numbered = [(number, line) for number, line in enumerate(read_texts(path, keep_blank=True), 1)
                    if line.strip()]
    except TextRequestError as error:
        raise TaskInputError(str(error).replace("--input", "unlabelled", 1)) from None
    if not numbered:
        raise TaskInputError(f"unlabelled {path}: holds no text")
    lines = [line for _, line in numbered]

    def refuse_tokenless(texts, what="the line"):
        """A text the teacher reads no token of, by its line (fit would name it x[i], not the file)."""
        empty = texts_without_token(texts, teacher.tokenizer)
        if empty:
            raise TaskInputError(f"unlabelled {path}, line {numbered[empty[0]][0]}: {what} is empty for this "
                                 f"model ({NO_TOKEN}); remove the line or give it a text")

    if isinstance(teacher, TokenClassifier):
        refuse_tokenless(lines)
        return [line.split() for line in lines]
    if not getattr(teacher, "text_pair", False):
        # A tab is a column (a training file 'text<TAB>label' given as unlabelled text): read whole, the
        # label became part of the text the teacher labelled and the student learnt.
        tabbed = next((number for number, line in numbered if "\t" in line), None)
        if tabbed is not None:
            raise TaskInputError(f"unlabelled {path}, line {tabbed}: holds a tab, but the model reads single texts, "
                                 "one per line; give the texts alone (e.g. cut -f1 of a 'text<TAB>label' file)")
        refuse_tokenless(lines)
        return lines
    try:  # 'A<TAB>B<TAB>label' is no pair: refused by its line
        pairs = split_pairs(lines, exact=True, sources=[f"unlabelled {path}, line {number}" for number, _ in numbered])
    except TextRequestError as error:
        raise TaskInputError(str(error)) from None
    single = next((numbered[i][0] for i, row in enumerate(pairs) if not isinstance(row, tuple)), None)
    if single is not None:
        raise TaskInputError(f"unlabelled {path}, line {single}: the model reads text pairs; write each as "
                             "'A<TAB>B' or 'A ||| B'")
    refuse_tokenless([a for a, _ in pairs], "its first text")
    refuse_tokenless([b for _, b in pairs], "its second text")
    return [a for a, _ in pairs], [b for _, b in pairs]


@dataclasses.dataclass
class DistillationResult:
    """What `distill_directory` did: the saved student, its directory, losses and dev metrics."""

    task: object
    output_dir: str
    losses: list = dataclasses.field(default_factory=list)
    metrics: Optional[dict] = None  # the student's; None: not evaluated
    teacher_metrics: Optional[dict] = None
    # `evaluate --model output_dir` finds dev data (not evaluated with --no-eval / evaluate=False)
    dev_data: bool = False
    # where that dev data is when it is no file of the user's (`DatasetSpec.dev_data_source`)
    dev_source: Optional[str] = None

    def next_steps(self):
        """The commands that use the saved student: a "next:" line and its continuation line,
        each a whole command (pasted together, they run one after the other)."""
        from bert_keras.tasks.finetuning import next_steps_after_saving

        model = shlex.quote(str(self.output_dir))
        export = f"bert-keras export --model {model} --base-path models --model-name student --quantize int8"
        return next_steps_after_saving(model, export, self.metrics is None, self.dev_data, self.dev_source)


def distill_directory(teacher_dir, spec, output_dir, *, layers=None, hidden_size=None, init=None,
                      temperature=2.0, alpha=None, epochs=3, batch_size=None, learning_rate=None,
                      warmup_ratio=0.1, max_steps=None, checkpoint_every=None, seed=0, augment=None, mask_rate=0.1,
                      hidden_weight=0.0, validation_split=0.0, unlabelled=None, overwrite=False, evaluate=True,
                      verbose=2, log=print):
    """The whole run of `bert-keras distill`: teacher directory + data spec -> a saved student.

    The data of `spec` (a `named_datasets.DatasetSpec`; None: the one the teacher records),
    `distill` (resumable from `output_dir/.finetune-run`), `save`, then the teacher and the
    student scored on the dev split (the student's metrics go to `eval_results.json`).
    `alpha=0` ignores the data's labels (the teacher's soft targets alone); `augment`,
    `mask_rate`: masked copies of each batch, `hidden_weight`: the hidden-state loss,
    `validation_split`: the last share of the data held out for `val_loss` each epoch, as `distill`;
    `unlabelled`: a text file whose lines are distilled on too (`unlabelled_inputs`).

    Returns:
        A `DistillationResult`.
    """
    from bert_keras.checkpoints.loading import local_path
    from bert_keras.finetuned_model import RUN_DIRECTORY, check_can_save, read_finetuned, write_eval_results
    from bert_keras.tasks.named_datasets import DatasetSpecError, spec_for_model, spec_of_saved
    from bert_keras.tasks.finetuning_run import after_saving, command_fit, remove_run_dir
    from bert_keras.tasks.task_files import load

    # Refused before anything is read or loaded (the teacher takes seconds), as `distill` would
    _number("epochs", epochs, "expected a number > 0", lambda v: v > 0)
    if spec is None:
        spec = spec_of_saved(read_finetuned(teacher_dir, load_model=False).training)
    # Refused before the teacher loads: as `finetune`, never an output directory that is or holds an input.
    check_can_save(output_dir, overwrite, inputs=[teacher_dir, init and local_path(init), unlabelled,
                                                  spec and spec.train_path, spec and spec.eval_path])
    teacher = load(teacher_dir)
    spec = spec_for_model(spec, teacher, teacher_dir, override=spec.spec)  # named in a mismatch (--task swag)
    spec.labels_required = alpha != 0  # soft targets alone: a file of texts will do
    x, y = spec.training_data(seed=seed)
    spec.labels = teacher.labels
    if alpha == 0:
        y = None
    else:
        spec.check_labels()  # a label the teacher lacks, by file and line (fit named it y[i])
    dev = None
    unasked_dev = not evaluate and spec.has_dev_data()  # --no-eval: `evaluate --model` would still score
    if evaluate:  # read (and checked) now, as finetune: a bad dev file stops the run before training
        spec.labels_required = True  # scoring needs them
        try:
            dev = spec.evaluation_data()
        except (DatasetSpecError, FileNotFoundError) as error:
            recorded = (teacher._record.training or {}).get("eval_path")
            if spec.eval_path and (os.path.isfile(spec.eval_path) or not recorded or
                                   os.path.abspath(spec.eval_path) != os.path.abspath(recorded)):
                raise  # --eval-data, or a dev file that is there but bad: an error, not a skipped score
            log(f"no dev evaluation: {error}")  # the teacher's recorded dev file is gone (or it had none)
            evaluate = False
    spec.prepare_scoring(teacher)  # before the student copies its settings: a KorQuAD file's metric
    spec.check_texts(teacher.tokenizer)  # a text the model reads no token of, by file and line
    extra = None if unlabelled is None else unlabelled_inputs(teacher, unlabelled)
    config = teacher.encoder.config
    plan = plan_student(teacher, layers=layers, hidden_size=hidden_size, init=init)
    copies = masked_copy_count(augment, x, extra, tokenizer=teacher.tokenizer)  # checked before anything is logged or built
    # --data in place of the recorded file: the spec keeps the teacher's name (csv:ITS_FILE), so name the file read
    data = spec.spec if not spec.train_path or spec.spec == f"csv:{spec.train_path}" else \
        f"{spec.spec}, data {spec.train_path}"
    log(f"teacher {teacher_dir} ({config.num_layers} layers, hidden {config.hidden_size}) -> student "
        f"{len(plan.layers)} layers (blocks {list(plan.layers)} of "
        f"{init or 'the teacher'}, hidden {plan.hidden_size}); task {data}, {num_rows(x)} examples"
        f"{'' if y is not None else ' (unlabelled: soft targets only)'}"
        f"{'' if extra is None else f' and {num_rows(extra)} unlabelled texts ({unlabelled})'}, temperature "
        f"{temperature:g}"
        f"{f', {copies} masked copies of each batch' if copies else ''}")
    run_dir = os.path.join(output_dir, RUN_DIRECTORY)
    student = command_fit(  # the backup is kept until the student is saved
        lambda callbacks: distill(
            teacher, x, y, layers=plan.layers if init is None else layers, hidden_size=hidden_size, init=init,
            temperature=temperature, alpha=alpha, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
            warmup_ratio=warmup_ratio, max_steps=max_steps, seed=seed, run_dir=run_dir,
            checkpoint_every=checkpoint_every, augment=augment, mask_rate=mask_rate, hidden_weight=hidden_weight,
            validation_split=validation_split, unlabelled=extra, verbose=verbose,
            keep_run_dir=True, callbacks=callbacks),
        run_dir, output_dir, log, overwrite=overwrite)
    if student.settings.get("window_aggregation") == "evidence":  # the student's own blocks' statistics
        student.fit_window_statistics(x, batch_size=batch_size)
    student.record(training=dict(spec.provenance(), distilled_from=os.path.abspath(teacher_dir)))
    student.save(output_dir, overwrite=overwrite)
    with after_saving(output_dir):  # the model is saved: an interrupt now leaves nothing to resume
        remove_run_dir(run_dir)
        losses = student.history.history.get("loss", []) if student.history is not None else []
        result = DistillationResult(student, output_dir, losses=losses, dev_data=evaluate or unasked_dev,
                                    dev_source=spec.dev_data_source())
        log(f"\nsaved {output_dir}" + (f"; distillation loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""))
        if not evaluate:
            return result
        dev_x, dev_y = dev
        spec.prepare_scoring(teacher)
        spec.prepare_scoring(student)
        batch = student.to_finetuned().training["distillation"]["batch_size"]
        result.teacher_metrics = teacher.score(dev_x, dev_y, batch_size=batch)
        result.metrics = student.score(dev_x, dev_y, batch_size=batch)
        write_eval_results(output_dir, result.metrics)
        log("\nteacher " + spec.format_metrics(result.teacher_metrics))
        log("student " + spec.format_metrics(result.metrics))
        return result
