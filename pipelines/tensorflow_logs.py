"""Quiet TensorFlow start-up and chatter: stderr carries only what our code (or yours) says.

Importing `pipelines`, `bert_keras` or `serving` makes a script as quiet as the
`bert-keras` command (`quiet_by_default`); `BERT_KERAS_VERBOSE=1` in the environment,
or the command's `--verbose`, keeps TensorFlow's own logs. A level you set yourself
(`TF_CPP_MIN_LOG_LEVEL`) is kept; 0 keeps TensorFlow's start-up lines too.

TensorFlow and its neighbours talk on stderr whatever the command does: C++ log
lines at import (`failed call to cuInit ... (303)` from the CUDA probe, the
oneDNN `DT_INT64` fallback), Python log records (`Sharding callback duration`
from absl at every checkpoint, AutoGraph's "could not transform", TF's
"is deprecated, please use ... instead" renaming notes), and numpy 2's
`__array__ ... copy keyword` deprecation, raised dozens of times per keras-hub
conversion. `bert-keras` silences exactly these unless `--verbose` is given.

The C++ level is read once, when TensorFlow's shared library loads, so
`configure` must run before anything imports `tensorflow` (`bert-keras`'s
`main` calls it right after parsing the arguments; no subcommand module imports
TensorFlow at import time).

Example:

>>> import os
>>> from pipelines import tensorflow_logs
>>> tensorflow_logs.configure(verbose=False)  # before `import tensorflow`
>>> os.environ["TF_CPP_MIN_LOG_LEVEL"]
'3'
>>> import logging
>>> logging.getLogger("tensorflow").level == logging.ERROR
True
"""

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import tempfile
import warnings

from pipelines.tensorflow_import import LoaderAround

# Python loggers whose records below ERROR are TensorFlow's chatter, not the command's:
# "tensorflow": AutoGraph's "could not transform", deprecation/renaming notes;
# "absl": TF's checkpoint saver ("Sharding callback duration"), SavedModel export ("input name(s)
# ... will be renamed to ..."), Keras' absl messages. Both reach stderr whenever a command sets up
# INFO logging for its own progress lines (`logging.basicConfig(level=INFO)`).
NOISY_LOGGERS = ("tensorflow", "absl")

# (message regex, category) of Python warnings that say nothing to a user of the command.
NOISY_WARNINGS = (
    # numpy 2 vs TF tensors / keras-hub variables: 30-100 per keras-hub conversion.
    (r"__array__ implementation doesn't accept a copy keyword", DeprecationWarning),
    # Keras at the end of every evaluate/predict over a finite tf.data dataset of unknown length
    # (the dataset ends where it should; the warning is meant for fit with steps_per_epoch).
    (r"Your input ran out of data", UserWarning),
)


# Messages of Python log records (any logger) that say nothing to a user of the command.
NOISY_RECORDS = re.compile(
    # Apache Beam's GCP clients, logged on the root logger when `apache_beam` loads without them
    # (the `beam` extra has no GCP: Dataflow is `beam-gcp`).
    r"^apitools not found, and bigquery client libraries are not available")


class _DropNoisyRecords(logging.Filter):
    def filter(self, record):
        return not NOISY_RECORDS.match(str(record.msg))


def _plain_warning(message, category, filename, lineno, line=None):
    """A warning as the command prints it: one line, no source location (`--verbose` shows it).
    A `warnings.formatwarning`: code that records warnings (`catch_warnings(record=True)`,
    `pytest.warns`) still gets them."""
    return f"warning: {message}\n"


# Whether `quiet_by_default` chose the C++ level (not the user): `configure(verbose=True)` may undo it.
_LEVEL_CHOSEN_HERE = False
# Whether the process is quiet (`quiet_by_default` or `configure(verbose=False)` ran last): what
# `quiet` tells the code that starts worker processes of its own (Apache Beam's SDK workers).
_QUIET = False


def quiet():
    """True when this process drops library chatter (`quiet_by_default`, `configure(verbose=False)`):
    worker processes it starts should be as quiet (`pipelines.beam_runner.pipeline_options`)."""
    return _QUIET


def quiet_by_default():
    """What importing the project does: `configure(verbose=False)`, keeping a level you set.

    Skipped when `BERT_KERAS_VERBOSE` is set (not "0"). Runs before TensorFlow loads when the
    project is imported first; after, only the Python loggers and warnings can be quieted.
    `TF_CPP_MIN_LOG_LEVEL=0` of your own asks for every C++ line: TensorFlow's start-up lines
    (`LOAD_TIME_NOISE`) are kept too (they were dropped whatever the level said).
    """
    global _LEVEL_CHOSEN_HERE, _QUIET
    if os.environ.get("BERT_KERAS_VERBOSE", "0") not in ("", "0"):
        return
    _QUIET = True
    users_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    if users_level is None:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        _LEVEL_CHOSEN_HERE = True
    if users_level is None or users_level.strip() != "0":
        quiet_tensorflow_load()
    for name in NOISY_LOGGERS:
        _logger(name).setLevel(logging.ERROR)
    filter_noisy_warnings()


def configure(verbose=False):
    """Sets TensorFlow's C++ log level, the noisy Python loggers and warning filters.

    Call it before TensorFlow is imported: the C++ level is read when its library loads.

    Args:
        verbose: False (the default of `bert-keras`): C++ lines, TF/absl records below
            ERROR and the known noisy warnings are dropped. True: TensorFlow logs
            everything again (C++ level 0 unless `TF_CPP_MIN_LOG_LEVEL` was set by the
            user, Python loggers at INFO) and no warning is filtered.
    """
    global _QUIET
    _QUIET = not verbose
    if verbose:
        if _LEVEL_CHOSEN_HERE:  # undo the import-time default, not a level the user set
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietLoadFinder)]
        for name in NOISY_LOGGERS:
            _logger(name).setLevel(logging.INFO)
        _unfilter_noisy_warnings()
        return
    # 3 = FATAL only: the CUDA probe and oneDNN report at ERROR level on healthy machines.
    # Real failures still reach the user as Python exceptions with TensorFlow's message.
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    # gRPC's C core logs its errors itself ("add_port.cc:83] Failed to add port" before the server's
    # own message says the port is taken); the user's setting wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    quiet_tensorflow_load()
    for name in NOISY_LOGGERS:
        _logger(name).setLevel(logging.ERROR)
    if not any(isinstance(f, _DropNoisyRecords) for f in logging.getLogger().filters):
        logging.getLogger().addFilter(_DropNoisyRecords())
    filter_noisy_warnings()
    warnings.formatwarning = _plain_warning


# C++ lines TensorFlow prints while its libraries load, on healthy CPU machines. From 2.21 they go
# through absl logging before it is initialised, which TF_CPP_MIN_LOG_LEVEL no longer silences.
LOAD_TIME_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:.]+ +\d+ (port|cudart_stub|cuda_platform|cpu_feature_guard)\.cc:\d+\]"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags)")


def quiet_tensorflow_load():
    """Makes the first `import tensorflow` drop `LOAD_TIME_NOISE` from stderr (any other line stays).

    A one-shot import hook, so commands that never load TensorFlow (`--help`) do not pay for it.
    """
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietLoadFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietLoadFinder())


class _QuietLoadFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = LoaderAround(spec.loader, _load_time_noise_filtered)
        return spec


@contextlib.contextmanager
def _load_time_noise_filtered():
    """Captures file descriptor 2 (C++ writes there), then replays what is not `LOAD_TIME_NOISE`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not LOAD_TIME_NOISE.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


_PROJECT_DIRECTORIES = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name) + os.sep
    for name in ("bert_keras", "pipelines", "serving"))


def caller_stacklevel():
    """The `stacklevel` that makes a `warnings.warn` in the calling function name the first frame
    outside this project (and `contextlib`): the user's line, however deep the call came from."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (frame.f_code.co_filename.startswith(_PROJECT_DIRECTORIES)
                                        or frame.f_code.co_filename == contextlib.__file__):
        frame, level = frame.f_back, level + 1
    return level


def filter_noisy_warnings():
    """Installs `ignore` filters for `NOISY_WARNINGS` (again, inside a `catch_warnings`).

    Example:

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     filter_noisy_warnings()
    ...     warnings.warn("__array__ implementation doesn't accept a copy keyword", DeprecationWarning)
    >>> caught
    []
    """
    for message, category in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


@contextlib.contextmanager
def collected_warnings(verbose=False):
    """Every Python warning raised inside (none hidden by "once"), collected into the yielded list,
    to print as plain lines; `NOISY_WARNINGS` dropped unless `verbose`.

    >>> with collected_warnings() as caught:
    ...     warnings.warn("tanh-GELU", UserWarning)
    >>> [str(w.message) for w in caught]
    ['tanh-GELU']
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if not verbose:
            filter_noisy_warnings()  # numpy's copy-keyword notes from keras-hub
        yield caught


def _unfilter_noisy_warnings():
    noisy = {(message, category) for message, category in NOISY_WARNINGS}
    warnings.filters[:] = [f for f in warnings.filters
                           if not (f[0] == "ignore" and f[1] is not None
                                   and (f[1].pattern, f[2]) in noisy)]


def _logger(name):
    if name == "absl":
        # absl installs its own Logger subclass under this name: create it through absl.
        try:
            from absl import logging as absl_logging
        except ImportError:  # absl comes with TensorFlow; without it there is nothing to quiet
            return logging.getLogger(name)
        return absl_logging.get_absl_logger()
    return logging.getLogger(name)
