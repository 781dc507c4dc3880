"""The fine-tuning recipe of a task: BERT's optimizer, its schedule sized to the steps `fit` runs, its state.

`from_pretrained` compiles the recipe (`compile_recipe`: AdamW without decay on LayerNorm and
biases, linear warmup then linear decay to 0, global-norm clipping at 1.0); the first `fit`
sizes the schedule to its steps and a later one extends it (`size_schedule`), keeping the
optimizer's moments and step count. A bare `compile()` compiles it again (keras-hub's
`"auto"`), as a recompile after changing `trainable` needs; `optimizer_state` /
`restore_optimizer_state` carry the optimizer through `save(dir)` / `tasks.load(dir)`.
`recipe_for_data` picks the learning rate and batch size by data size.

The task keeps the recipe's state: `_recipe` (the settings in use, None while a compile of
your own replaces it), `_recipe_settings` (the last recipe's, what a bare compile uses),
`_recipe_compile_arguments` (the loss / metrics / compile options of the last recipe compile)
and `_saved_optimizer_directory` (a loaded model's `optimizer.npz`, read by the first fit).

Example:

>>> recipe_for_data(["a text"] * 200)
Recipe(learning_rate=0.0001, batch_size=16, note=' (small data: 200 examples)')
>>> is_auto("auto"), is_auto("adam")
(True, False)
"""

import dataclasses
import inspect
import warnings

import keras
import tensorflow as tf

from bert_keras.finetuned_model import read_optimizer_state
from bert_keras.loss_scaling import with_loss_scaling
from bert_keras.tasks.inputs import TaskInputError, num_rows


def is_auto(value):
    """keras-hub's `"auto"`: the task's own choice of optimizer, loss or metrics."""
    return isinstance(value, str) and value == "auto"


def compile_arguments(task, args, kwargs):
    """`(optimizer, arguments)` of a `compile(...)` call on `task`, bound as Keras binds them: the
    loss and metrics the head's own where omitted or `"auto"`, the loss read on logits."""
    arguments = inspect.signature(keras.Model.compile).bind(task, *args, **kwargs).arguments
    arguments.pop("self")
    arguments.update(arguments.pop("kwargs", {}))
    if is_auto(arguments.get("loss", "auto")):
        arguments["loss"] = task.default_loss()
    if is_auto(arguments.get("metrics", "auto")):
        # A loss of one-hot rows gets one-hot targets, so its accuracy reads them (TextTask.compute_loss)
        arguments["metrics"] = ([keras.metrics.CategoricalAccuracy(name="accuracy")]
                                if reads_one_hot(arguments["loss"]) else task.default_metrics() or None)
    # The family's own names ("f1", ...), also among the metrics Keras weights by sample_weight.
    for key in ("metrics", "weighted_metrics"):
        if isinstance(arguments.get(key), (list, tuple)):
            arguments[key] = [task._named_metric(metric) or metric if isinstance(metric, str) else metric
                              for metric in arguments[key]]
    arguments["loss"] = on_scores(task, on_logits(task, arguments["loss"]))
    return arguments.pop("optimizer", "auto"), arguments


# Keras' losses that compare the predictions with one-hot (or soft) target rows, not class ids.
ONE_HOT_LOSSES = ("CategoricalCrossentropy", "CategoricalFocalCrossentropy", "CategoricalHinge")


def reads_one_hot(loss):
    """Whether every compiled `loss` (a name, a function or a Loss; also in a list or dict) reads
    one-hot target rows: Keras' categorical cross-entropy (with `label_smoothing`, say), its focal
    form and the categorical hinge.

    Example:

    >>> reads_one_hot("categorical_crossentropy"), reads_one_hot(keras.losses.CategoricalFocalCrossentropy())
    (True, True)
    >>> reads_one_hot("sparse_categorical_crossentropy"), reads_one_hot(None)
    (False, False)
    """
    losses = [item for item in keras.tree.flatten(loss) if item is not None]
    if not losses:
        return False
    for item in losses:
        if isinstance(item, str):
            try:
                item = keras.losses.get(item)
            except ValueError:
                return False
        function = getattr(item, "fn", item)  # a LossFunctionWrapper's function
        names = {type(item).__name__, "".join(part.title() for part in getattr(function, "__name__", "").split("_"))}
        if not names & set(ONE_HOT_LOSSES):
            return False
    return True


def on_scores(task, loss):
    """`loss` for a regression head, whose output is one score per example (`[B]`): Keras'
    mean squared error (`"mse"`, the function or the class; also a model saved before the
    head's own loss became `ScoreMeanSquaredError`) as `ScoreMeanSquaredError`, which gives
    one squared error per example: Keras' averages `[B]` over the batch, so sample weights
    would not weight examples."""
    from bert_keras.losses import ScoreMeanSquaredError

    default = task.head.default_loss() if hasattr(task.head, "default_loss") else None
    if not isinstance(default, ScoreMeanSquaredError):
        return loss
    if isinstance(loss, (list, tuple)):
        return type(loss)(on_scores(task, item) for item in loss)
    if isinstance(loss, dict):
        return {name: on_scores(task, item) for name, item in loss.items()}
    if loss is keras.losses.mean_squared_error or (
            isinstance(loss, str) and loss.replace("_", "").lower() in ("mse", "meansquarederror")):
        return ScoreMeanSquaredError()
    if type(loss) is keras.losses.MeanSquaredError:
        return ScoreMeanSquaredError.from_config(loss.get_config())
    return loss


def on_logits(task, loss):
    """`loss` for a head whose outputs are logits (its default loss says whether they are):
    Keras' cross-entropies named by a string or given as functions read them as logits (also
    inside a list or dict of losses); a loss object with from_logits=False is refused."""
    default = task.head.default_loss() if hasattr(task.head, "default_loss") else None
    if not getattr(default, "from_logits", False):
        return loss  # regression scores, vectors (an embedder has no loss of its own), or a built-in loss
    if isinstance(loss, (list, tuple)):
        return type(loss)(on_logits(task, item) for item in loss)
    if isinstance(loss, dict):
        return {name: on_logits(task, item) for name, item in loss.items()}
    cross_entropy = {keras.losses.sparse_categorical_crossentropy: keras.losses.SparseCategoricalCrossentropy,
                     keras.losses.categorical_crossentropy: keras.losses.CategoricalCrossentropy,
                     keras.losses.categorical_focal_crossentropy: keras.losses.CategoricalFocalCrossentropy}
    for function, cls in cross_entropy.items():
        if loss is function or (isinstance(loss, str) and loss.replace("_", "").lower() == cls.__name__.lower()):
            return cls(from_logits=True)
    from_logits = getattr(loss, "from_logits", None)
    if from_logits is None:
        from_logits = getattr(loss, "_fn_kwargs", {}).get("from_logits")
    if from_logits is False:
        raise TaskInputError(f"loss: {type(loss).__name__}(from_logits=False), but the {type(task).__name__} "
                             f"outputs logits; pass {type(loss).__name__}(from_logits=True)")
    return loss


def compile_recipe(task, *, num_train_steps=1, compile_arguments=None, **settings):
    """Compiles the recipe on `task`: `settings` over its last ones, with the loss / metrics /
    compile options of the last recipe compile unless `compile_arguments` are given."""
    from bert_keras.models import compile_for_finetuning

    settings = {**task._recipe_settings, **settings}
    if compile_arguments is not None:
        # Untracked: Keras tracks a metric object set on a model as one of its own metrics, and
        # `evaluate` would return each such metric again after the compiled ones.
        task.__dict__["_recipe_compile_arguments"] = dict(compile_arguments)
    arguments = dict(task._recipe_compile_arguments or {"metrics": task.default_metrics() or None})
    with task.distribute_strategy.scope():
        compile_for_finetuning(task, num_train_steps=num_train_steps, **settings, **arguments)
    task._recipe = task._recipe_settings = settings


def size_schedule(task, steps):
    """The recipe's warmup + linear decay ends after `steps` more steps.

    The first fit compiles the recipe for its steps; a later fit keeps the optimizer (its
    moments and step count) and extends the schedule to end with the new fit's last step.
    """
    from bert_keras.training.optimizer import WarmupLinearDecay

    restore_optimizer_state(task)  # a loaded model's saved step count and moments
    done = int(task.optimizer.iterations.numpy()) if task.optimizer is not None else 0
    if done == 0:
        task._compile_recipe(num_train_steps=steps)
        return
    schedule = task.optimizer._learning_rate
    if isinstance(schedule, WarmupLinearDecay) and schedule.num_train_steps != done + steps:
        warmup = min(schedule.num_warmup_steps, done + steps)
        if schedule.extendable:  # the traced step reads the new end: the next fit starts at once
            schedule.extend(done + steps, warmup)
            return
        task.optimizer._learning_rate = WarmupLinearDecay(schedule.peak_learning_rate, done + steps, warmup)
        task.train_function = None  # retrace: the schedule is part of the step


def build_optimizer(task):
    """Creates the optimizer's slot variables before Keras traces the train step (and loads a
    saved optimizer state, see `restore_optimizer_state`).

    Created during the first trace (Keras builds them up front only under an explicit
    distribution strategy), they make TensorFlow trace the whole step a second time:
    about 5 s of a MiniLM fine-tune's start-up on 2 cores.
    """
    restore_optimizer_state(task)
    if getattr(task, "optimizer", None) is not None and not task.optimizer.built:
        with task.distribute_strategy.scope():
            task.optimizer.build(task.trainable_variables)


def optimizer_state(task):
    """The recipe optimizer's variables (`save_own_variables`) once it has taken a step, or None."""
    restore_optimizer_state(task)
    optimizer = getattr(task, "optimizer", None)
    if task._recipe is None or optimizer is None or not optimizer.built or int(optimizer.iterations.numpy()) == 0:
        return None
    state = {}
    optimizer.save_own_variables(state)
    return state


def restore_optimizer_state(task):
    """Loads the optimizer state `tasks.load` found (read when training needs it, not at load: a
    model loaded to predict never reads it)."""
    directory, task._saved_optimizer_directory = task._saved_optimizer_directory, None
    state = read_optimizer_state(directory) if directory else None
    if state is None or task._recipe is None:
        return
    build_optimizer(task)
    if len(state) != len(task.optimizer.variables):
        warnings.warn(f"{directory}: the saved optimizer state has {len(state)} variables but this "
                      f"task's optimizer has {len(task.optimizer.variables)} (trainable layers changed "
                      "since the save?): training continues with a fresh optimizer", stacklevel=3)
        return
    task.optimizer.load_own_variables(state)


def check_learning_rate_callbacks(task, callbacks):
    """Callbacks that set the learning rate need a constant one, not the recipe's schedule."""
    setters = [c for c in callbacks or [] if isinstance(c, (keras.callbacks.ReduceLROnPlateau,
                                                             keras.callbacks.LearningRateScheduler))]
    schedule = getattr(task.optimizer, "_learning_rate", None) if task.optimizer is not None else None
    if setters and isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        raise TaskInputError(f"callbacks: {type(setters[0]).__name__} sets the learning rate, but the "
                             "fine-tuning recipe's is a schedule (warmup + linear decay); compile(...) "
                             "with a constant learning rate to use it")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Learning rate and batch size of a fine-tuning run, and why (`note`, for messages)."""

    learning_rate: float
    batch_size: int
    note: str = ""


# Under this many examples the BERT paper's 2e-5 / 32 takes too few steps to leave chance level
# (the shipped 200 sample reviews: dev accuracy 0.60; 1e-4 / 16: 0.94).
SMALL_DATA_EXAMPLES = 1000


def recipe_for_data(x, *, learning_rate=None, batch_size=None):
    """The default fine-tuning recipe for `x`: 1e-4 / batch 16 on small data, else 2e-5 / 32.

    Values given are kept; a dataset of unknown size takes the paper's recipe.

    >>> recipe_for_data(["a text"] * 200)
    Recipe(learning_rate=0.0001, batch_size=16, note=' (small data: 200 examples)')
    >>> recipe_for_data(["a text"] * 5000).learning_rate
    2e-05
    """
    if learning_rate is not None and batch_size is not None:
        return Recipe(learning_rate, batch_size)
    try:
        count = None if isinstance(x, tf.data.Dataset) else num_rows(x)
    except TaskInputError:
        count = None
    small = count is not None and count < SMALL_DATA_EXAMPLES
    return Recipe(learning_rate if learning_rate is not None else (1e-4 if small else 2e-5),
                  batch_size if batch_size is not None else (16 if small else 32),
                  f" (small data: {count} examples)" if small else "")


class RecipeCompile:
    """`compile` of a task (mixed into `TextTask`): keras-hub's `"auto"`, the recipe compiled
    again by a bare `compile()` or `compile_recipe(...)`, and Keras' compile config of a task
    whose recipe `from_config` restores."""

    def _named_metric(self, name):
        """The metric object a family means by `name` in `compile(metrics=[...])`, or None (Keras' own
        names); classifiers: `"f1"`, `"macro_f1"`, `"matthews_corrcoef"` (`bert_keras.metrics.compiled`)."""
        return None

    def _init_recipe_state(self):
        self._recipe = None  # the recipe in use (None: a compile of your own), with its step count
        self._recipe_settings = {}  # the last recipe's settings, what a bare compile() uses again
        self.__dict__["_recipe_compile_arguments"] = None  # loss / metrics / options of the last recipe compile
        self._saved_optimizer_directory = None  # `load`: where an optimizer.npz waits for the first fit

    def compile(self, *args, **kwargs):
        """As `keras.Model.compile`, with keras-hub's `"auto"` defaults.

        `optimizer` omitted or `"auto"` compiles the fine-tuning recipe (`compile_recipe`) with
        the task's current settings: a bare `compile()` after changing `trainable` (Keras' way to
        freeze or unfreeze) gives a fresh BERT optimizer, not Keras' RMSprop at 1e-3. `loss` /
        `metrics` omitted or `"auto"`: the head's own. Any other optimizer replaces the recipe
        (`compile_recipe()` brings it back).

        The heads output logits: Keras' cross-entropy named by a string
        (`"sparse_categorical_crossentropy"`, `"categorical_crossentropy"`) is read as its
        `from_logits=True` form, and a loss object built with `from_logits=False` is refused
        (on logits it trains to nothing: the loss sticks at ln(classes)). Padded tokens stay
        skipped unless the step now compiles with XLA or runs on a TPU.
        """
        optimizer, arguments = compile_arguments(self, args, kwargs)
        if is_auto(optimizer):
            self._compile_recipe(compile_arguments=arguments)
            return
        self._recipe = None
        if arguments.get("auto_scale_loss", True):  # as Keras would, but the same choice on every replica
            optimizer = with_loss_scaling(optimizer, self)
        super().compile(optimizer=optimizer, **arguments)
        self.use_skip_padding("auto")

    def compile_recipe(self, *, learning_rate=None, warmup_ratio=None, weight_decay=None):
        """Compiles BERT's fine-tuning recipe again, with a fresh optimizer: AdamW without decay
        on LayerNorm / biases, linear warmup over `warmup_ratio` of the steps, then linear decay
        to 0 at the last step the next `fit` runs, global-norm clipping at 1.0
        (`bert_keras.models.compile_for_finetuning`). Settings not given keep the task's (from
        `from_pretrained`, a previous call, or the saved model); the loss and metrics are the
        head's own.

        >>> task.backbone.trainable = True              # doctest: +SKIP
        >>> task.compile_recipe(learning_rate=1e-4)     # doctest: +SKIP
        """
        given = {"learning_rate": learning_rate, "warmup_ratio": warmup_ratio, "weight_decay": weight_decay}
        self._compile_recipe(**{key: value for key, value in given.items() if value is not None},
                             compile_arguments={"loss": self.default_loss(),
                                                "metrics": self.default_metrics() or None})

    @property
    def recipe(self):
        """The fine-tuning recipe's settings (`learning_rate`, `warmup_ratio`, `weight_decay`),
        or None while a compile of your own (another optimizer) replaces it."""
        return None if self._recipe is None else dict(self._recipe)

    def _compile_recipe(self, **settings):
        """The recipe with these settings over the task's last ones (families without an objective
        override it)."""
        compile_recipe(self, **settings)

    def get_compile_config(self):
        # The recipe is restored by `from_config`; a compile of your own (optimizer, loss,
        # metrics) is saved as Keras saves it, and `load_model` compiles it again.
        if self._recipe is not None or not self.compiled:
            return None
        return super().get_compile_config()

    def compile_from_config(self, config):
        """Compiles again what `get_compile_config` saved (Keras' own, which skips a model whose
        `compile` is overridden), with the optimizer built so that its saved state loads."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)
