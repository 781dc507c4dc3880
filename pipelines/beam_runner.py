"""Apache Beam is optional (`pip install bert-keras[beam]`): the runners the package names, and a
one-line error naming the extra to install when Beam is missing.

The Beam paths (`pipelines.pretraining.beam_pipeline`, `pipelines.tokenizer.beam_vocab`) import
`apache_beam` at module level; callers import them within `beam_imports(runner)`.

>>> parse_runner("direct"), parse_runner("DataflowRunner")
('DirectRunner', 'DataflowRunner')
"""

import contextlib
from typing import Optional

from pipelines.environment import MissingDependencyError

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner")


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
