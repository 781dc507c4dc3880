"""Pick a `tf.distribute` strategy by name: auto, default, mirrored, multiworker or tpu.

Models, optimizers and metrics must be created inside `strategy.scope()`;
`model.fit` then splits each global batch across the replicas.
"""

import json
import logging
import os

logger = logging.getLogger(__name__)

STRATEGY_NAMES = ("auto", "default", "mirrored", "multiworker", "tpu")


class StrategyError(ValueError):
    """The requested strategy cannot be created here (no TPU, bad TF_CONFIG, ...)."""


def get_strategy(name="auto", tpu=None):
    """Create the distribution strategy called `name`.

    * `default`: no distribution (one device), `tf.distribute.get_strategy()`.
    * `mirrored`: `MirroredStrategy` over the local GPUs (data parallel, all-reduce).
    * `multiworker`: `MultiWorkerMirroredStrategy`, one process per machine,
      configured by the `TF_CONFIG` environment variable (`cluster` + `task`).
    * `tpu`: `TPUStrategy` on the TPU named by `tpu` ("" or "local" for a TPU VM,
      a name or grpc:// address for a TPU node).
    * `auto`: the strategy whose `scope()` the caller is in, if any (a second
      strategy inside it fails: "Mixing different tf.distribute.Strategy
      objects"); else TPU if a TPU resolver answers, else mirrored with more
      than one GPU, else default.

    Example:

    >>> strategy = get_strategy("default")
    >>> strategy.num_replicas_in_sync
    1

    Args:
        name: str. One of `STRATEGY_NAMES`.
        tpu: str or None. TPU name/address for `tpu` (and tried by `auto`).

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        StrategyError: unknown name, no TPU reachable, or missing/invalid TF_CONFIG.
    """
    import tensorflow as tf

    if name not in STRATEGY_NAMES:
        raise StrategyError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGY_NAMES)}")
    if name == "auto":
        return _auto_strategy(tpu)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu)


def check_tf_config(environ=None):
    """Validate `TF_CONFIG` for multi-worker training and return it parsed.

    `MultiWorkerMirroredStrategy` without a usable TF_CONFIG silently falls back
    to a single worker; here that is an error that says what is missing.

    Example:

    >>> check_tf_config({"TF_CONFIG": '{"cluster": {"worker": ["host:1234"]}, '
    ...                  '"task": {"type": "worker", "index": 0}}'})["task"]
    {'type': 'worker', 'index': 0}

    Args:
        environ: mapping to read TF_CONFIG from (default `os.environ`).

    Returns:
        dict, the parsed TF_CONFIG.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    example = ('TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
               '"task": {"type": "worker", "index": 0}}\'')
    if not text:
        raise StrategyError(f"--strategy multiworker needs the TF_CONFIG environment variable, e.g. {example}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({error}); expected e.g. {example}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not cluster.get("worker") and not cluster.get("chief"):
        raise StrategyError(f"TF_CONFIG has no cluster.worker (or cluster.chief) address list; expected e.g. {example}")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise StrategyError(f"TF_CONFIG has no task.type/task.index; expected e.g. {example}")
    members = cluster.get(task["type"]) or []
    if not 0 <= int(task["index"]) < len(members):
        raise StrategyError(
            f"TF_CONFIG task {task['type']}:{task['index']} is not in cluster.{task['type']} "
            f"({len(members)} address(es))"
        )
    return config


def is_chief(strategy):
    """Whether this process should write checkpoints, logs and the final model.

    True without multi-worker training; with it, only for the chief (or worker 0
    when the cluster has no chief). Other workers still take part in saving
    (saving runs collective ops) but write to a throw-away directory.

    Example:

    >>> import tensorflow as tf
    >>> is_chief(tf.distribute.get_strategy())
    True
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not in_multi_worker_mode(strategy):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans more than one worker process (MultiWorkerMirrored over a cluster)."""
    return bool(getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)())


def gather_from_replicas(strategy, value):
    """The int `value` of every replica, in replica order: one all-gather (a collective).

    Every worker must call it at the same point of its program, as with any
    collective. Used to agree on a resume point before training starts.

    Example:

    >>> import tensorflow as tf
    >>> gather_from_replicas(tf.distribute.get_strategy(), 3)
    [3]
    """
    import tensorflow as tf

    local = tf.constant([int(value)], tf.int64)

    @tf.function
    def gather():
        return tf.distribute.get_replica_context().all_gather(local, axis=0)

    gathered = strategy.experimental_local_results(strategy.run(gather))[0]
    return [int(v) for v in gathered.numpy()]


def _tpu_strategy(tpu):
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as error:
        where = f"TPU {tpu!r}" if tpu else "a local TPU (pass --tpu NAME for a TPU node)"
        raise StrategyError(f"cannot connect to {where}: {error}") from None
    return tf.distribute.TPUStrategy(resolver)


def _auto_strategy(tpu):
    import tensorflow as tf

    if tf.distribute.has_strategy():  # called in a strategy's scope: that one
        return tf.distribute.get_strategy()
    # Only look for a TPU where one can exist: a name was given, or this is a
    # TPU VM / Colab TPU runtime. Probing elsewhere costs seconds of timeouts.
    if tpu or os.environ.get("TPU_NAME") or os.path.exists("/dev/accel0") or os.environ.get("COLAB_TPU_ADDR"):
        try:
            return _tpu_strategy(tpu or os.environ.get("TPU_NAME"))
        except StrategyError as error:
            logger.warning("auto strategy: no TPU (%s); trying GPUs", error)
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def is_default_strategy(strategy):
    """Whether `strategy` is tf.distribute's "no strategy" (one device), in or out of a scope.

    Example:

    >>> import tensorflow as tf
    >>> is_default_strategy(tf.distribute.get_strategy())
    True
    """
    return type(strategy).__name__.startswith("_Default")  # tf.distribute's private class


def describe(strategy):
    """One line for logs, e.g. 'MirroredStrategy, 8 replicas'.

    Example:

    >>> import tensorflow as tf
    >>> describe(tf.distribute.get_strategy())
    'no distribution (one device), 1 replica'
    """
    count = strategy.num_replicas_in_sync
    name = type(strategy).__name__
    if is_default_strategy(strategy):
        name = "no distribution (one device)"
    return f"{name}, {count} replica{'s' if count != 1 else ''}"
