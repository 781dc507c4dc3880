"""Apache Beam is optional (`pip install bert-keras[beam]`): the runners the package names, and a
one-line error naming the extra to install when Beam is missing.

The Beam paths (`pipelines.pretraining.beam_pipeline`, `pipelines.tokenizer.beam_vocab`) import
`apache_beam` at module level; callers import them within `beam_imports(runner)`, and build their
pipeline with `beam_pipeline(runner, pipeline_args)`.

`DirectRunner` means Beam's in-process portable runner (`FnApiRunner`), the one the tests compare
byte for byte with the local path. Beam 2.77's `DirectRunner` would first try Prism: it downloads a
Go binary from GitHub when the pipeline runs (`urlopen` without a timeout: behind a firewall that
drops packets, a stall of the TCP connect timeout), and when that fails falls back to `FnApiRunner`,
leaving an empty `beam-temp*` directory in the temporary directory each time. `PrismRunner` is there
for whoever wants Prism.

>>> parse_runner("direct"), parse_runner("DataflowRunner")
('DirectRunner', 'DataflowRunner')
"""

import contextlib
import importlib
import re
from typing import Optional

from pipelines.environment import MissingDependencyError

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner", "PrismRunner")


class MissingBeamError(MissingDependencyError):
    """A Beam runner was asked for and `apache_beam` is not installed."""


def parse_runner(value: Optional[str]) -> Optional[str]:
    """A `--runner` value, checked: one of `RUNNERS` (case as Beam spells them), or None for the local path."""
    if value is None:
        return None
    for runner in RUNNERS:
        if value.lower() in (runner.lower(), runner.lower().replace("runner", "")):
            return runner
    raise ValueError(f"Unknown runner {value!r}; choose one of {', '.join(RUNNERS)}.")


def stray_beam_words(options):
    """The words of `options` (a command's words after `--`) that are no Beam pipeline option: Beam's
    are `--name` or `--name=value`, and a word after a `--name` without `=` is its value
    (`--project my-project`). A stray one is most often a file (a shell-expanded pattern, a name
    starting with '-'), which Beam would drop with a log warning.

    >>> stray_beam_words(["--direct_num_workers=2", "--project", "p", "-odd.txt", "b.txt"])
    ['-odd.txt', 'b.txt']
    """
    return [option for i, option in enumerate(options) if not option.startswith("--")
            and (i == 0 or not options[i - 1].startswith("--") or "=" in options[i - 1])]


@contextlib.contextmanager
def beam_imports(runner):
    """Within it, a missing `apache_beam` raises `MissingBeamError` naming the extra to install
    (`beam`, or `beam-gcp` for Dataflow); any other import error is raised as it is (Beam is
    there and one of its own imports failed: the traceback names it)."""
    try:
        yield
    except ImportError as error:
        if (error.name or "").split(".")[0] != "apache_beam":
            raise
        extra = "beam-gcp" if str(runner).lower().startswith("dataflow") else "beam"
        raise MissingBeamError(f"runner {runner} needs Apache Beam, which is not installed: pip install "
                               f"'bert-keras[{extra}]' (in a checkout: pip install -e '.[{extra}]'), or run "
                               "without a runner, on this machine") from None


def beam_pipeline(runner, pipeline_args=()):
    """A `beam.Pipeline` on `runner` with `pipeline_args` (Beam's own flags; `--runner` is `runner`).

    A batch pipeline on `DirectRunner` runs on `FnApiRunner` directly, with the options as Beam's
    `DirectRunner` gives them (`--direct_num_workers`, `--direct_running_mode` apply); with
    `--streaming`, Beam's `DirectRunner` chooses as it does. Any other runner is Beam's.
    """
    import apache_beam as beam
    from apache_beam.options.pipeline_options import StandardOptions

    options = pipeline_options(runner, pipeline_args)
    if runner != "DirectRunner" or options.view_as(StandardOptions).streaming:
        return beam.Pipeline(options=options)
    return beam.Pipeline(runner=_fn_api_runner(options), options=options)


def pipeline_options(runner, pipeline_args=()):
    """Beam's `PipelineOptions` for `runner` and `pipeline_args`, every option one Beam knows.

    Beam itself only logs "Discarding unparseable args" for an option it does not know and runs
    without it: a misspelt `--direct_num_workrs=4` ran on one worker, a misspelt Dataflow option
    went unseen until the job. These pipelines define no options of their own, so an option no
    registered `PipelineOptions` class knows is a mistake: `ValueError` naming it (and Beam's
    closest option).

    In a quiet process (`pipelines.tensorflow_logs.quiet`: `bert-keras` without `--verbose`) the SDK
    worker processes log only what is CRITICAL (`--default_sdk_harness_log_level=CRITICAL`, unless
    given): with `--direct_running_mode=multi_processing`, each worker wrote ~25 INFO / WARNING lines
    of its start-up to the command's stderr, and the traceback of a failing element several times
    over; the failure itself comes back to the caller (`worker_errors`).
    """
    import difflib

    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.tensorflow_logs import quiet

    args = list(pipeline_args) + [f"--runner={runner}"]
    if quiet() and not any(arg.split("=", 1)[0] == "--default_sdk_harness_log_level" for arg in args):
        args.append("--default_sdk_harness_log_level=CRITICAL")
    known = set(PipelineOptions([]).get_all_options())
    given = PipelineOptions(args).get_all_options(retain_unknown_options=True)
    unknown = [name for name in given if name not in known]
    if unknown:
        shown = [next((arg.split("=", 1)[0] for arg in args
                       if arg.lstrip("-").split("=", 1)[0].replace("-", "_") == name), f"--{name}")
                 for name in unknown]
        close = difflib.get_close_matches(shown[0].lstrip("-").replace("-", "_"), known, n=1)
        raise ValueError(f"unknown Beam pipeline option{'s' if len(shown) > 1 else ''} {', '.join(shown)}"
                         + (f" (did you mean --{close[0]}?)" if close else ""))
    return PipelineOptions(args)


def _fn_api_runner(options):
    """`FnApiRunner` set up as Beam 2.77's `SwitchingDirectRunner` sets it up (the pipeline options go
    to the SDK workers in the provision info, as `--direct_running_mode=multi_processing` needs); in a
    quiet process, its worker processes start quietly (`quiet_worker_command`)."""
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle
    from apache_beam.transforms import environments

    from pipelines.tensorflow_logs import quiet

    class QuietWorkersFnApiRunner(fn_runner.FnApiRunner):
        """`run_pipeline` sets `_default_environment` to a `SubprocessSDKEnvironment` running
        `python -m apache_beam.runners.worker.sdk_worker_main` for `multi_processing`: that command
        is swapped for `quiet_worker_command()` as it is set."""

        @property
        def _default_environment(self):
            return self._environment

        @_default_environment.setter
        def _default_environment(self, environment):
            if isinstance(environment, environments.SubprocessSDKEnvironment):
                environment = environments.SubprocessSDKEnvironment.from_command_string(quiet_worker_command())
            self._environment = environment

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    runner_class = QuietWorkersFnApiRunner if quiet() else fn_runner.FnApiRunner
    return runner_class(provision_info=provision)


def quiet_worker_command():
    """The shell command of a Beam SDK worker process (`--direct_running_mode=multi_processing`) that
    writes no log line of its start-up to the terminal.

    Beam's own, `python -m apache_beam.runners.worker.sdk_worker_main`, imports Beam's BigQuery
    client, whose "apitools not found" is a `logging.warning` on a root logger without handlers:
    Python then installs a stderr handler (`logging.basicConfig`), and every worker printed
    "WARNING:root:apitools not found, ..." and "INFO:__main__:Logging handler created." into the
    command's output, before `--default_sdk_harness_log_level` applies. A `NullHandler` on the root
    logger first keeps that handler out; the worker's records still go to the runner (Beam's log
    handler), and a crash's traceback still reaches stderr (it is not a log record). The traceback of
    an element that fails (a corpus line that is not UTF-8), which `sdk_worker` prints to stderr
    besides logging it and sending it back to the runner (`worker_errors` raises it as the project's
    one-line error), is not printed: it came before that line as ~60 lines of Beam's frames.

    >>> "sdk_worker_main" in quiet_worker_command()
    True
    """
    import shlex
    import sys

    code = ("import logging, runpy; logging.getLogger().addHandler(logging.NullHandler()); "
            "from apache_beam.runners.worker import sdk_worker; sdk_worker.print = lambda *args, **kwargs: None; "
            "runpy.run_module('apache_beam.runners.worker.sdk_worker_main', run_name='__main__', alter_sys=True)")
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


# The last line of a worker's traceback that names an exception class of this project.
_PROJECT_EXCEPTION = re.compile(r"^((?:pipelines|bert_keras|serving)(?:\.\w+)+): (.+)$", re.MULTILINE)


@contextlib.contextmanager
def worker_errors():
    """Around running a pipeline: an error of this project raised in a Beam worker *process* comes
    back as itself, with its own message.

    In-process runners raise a DoFn's exception as it is; with `--direct_running_mode=multi_processing`
    (or any runner whose workers are other processes) Beam raises `RuntimeError` holding the worker's
    traceback as text: `bert-keras` printed that whole traceback as a crash (exit status 1) instead of
    its one-line error naming the file and line (`pipelines.corpus.CorpusError`, exit status 2).
    Any other error is raised as it is.
    """
    try:
        yield
    except RuntimeError as error:
        own = remote_error(str(error))
        if own is None:
            raise
        raise own from None


def remote_error(traceback_text):
    r"""The exception of this project that `traceback_text` (a worker's traceback) ends with, rebuilt
    from its class and message; None when it names none.

    >>> remote_error("Traceback ...\npipelines.corpus.CorpusError: a.txt, line 2: not valid UTF-8")
    CorpusError('a.txt, line 2: not valid UTF-8')
    >>> remote_error("Traceback ...\nValueError: boom") is None
    True
    """
    found = _PROJECT_EXCEPTION.findall(traceback_text)
    if not found:
        return None
    name, message = found[-1]
    module_name, _, class_name = name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(message)
    except Exception:  # not a class that takes a message: the RuntimeError stays
        pass
    return None
