"""`ExportOptions`: how an export is written and checked, one record for Python and the command line.

Each field is a keyword of `serving.exporter.export_saved_model` (and so of `task.export(...)`) with
its default, and a flag of `bert-keras export` (`pipelines.command_options`). Plain Python: the
command's `--help` imports no TensorFlow.

>>> options = ExportOptions(quantize="int8")
>>> options.tokenizer_backend, options.warmup_requests, options.check
('tf_text', 2, True)
"""

import dataclasses
from typing import Optional

from pipelines.command_options import option
from serving.op_sets import matching_release

DEFAULT_WARMUP_REQUESTS = 2
DEFAULT_RELEASE = matching_release()  # the installed TensorFlow's (serving/op_sets.py)
TOKENIZER_BACKENDS = ("tf_text", "core")


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """What `export_saved_model` takes besides the model and where it goes (see its Args)."""

    version: Optional[int] = option(None, "version number, at most 9223372036854775807 (int64, as TF Serving "
                                    "reads it) (default: highest existing + 1, or 1)",
                                    type="model_version")
    tokenizer_backend: str = option("tf_text", "tf_text (fast; TF-Text ops; the default) or core (core TF ops only: "
                                               "any stock tensorflow/serving image runs it)", "--tokenizer",
                                    choices=TOKENIZER_BACKENDS)
    strict: bool = option(False, "fail, writing nothing, when the op audit finds ops the targeted "
                                 "tensorflow/serving release cannot run")
    release: str = option(DEFAULT_RELEASE, f"tensorflow/serving release to audit for (default {DEFAULT_RELEASE}: "
                                           "the installed TensorFlow's; TF Serving X.Y runs SavedModels of "
                                           "TensorFlow X.Y)")
    overwrite: bool = option(False, "replace an existing --version")
    quantize: Optional[str] = option(None, "int8: the encoder's dense layers in dynamic-range int8 (per-channel "
                                           "weights; oneDNN quantized matmul kernels, x86-64 servers) (default "
                                           "none)", choices=("none", "int8"))
    check: bool = option(True, "skip the fresh-process check of the export's outputs", "--no-check")
    warmup_requests: int = option(DEFAULT_WARMUP_REQUESTS, "warmup requests to write, batch sizes 1 and 8 "
                                                           "alternating, none over --max-batch-size (default 2; "
                                                           "0: none)", metavar="N")
    max_batch_size: Optional[int] = option(None, "the max_batch_size of the batching that will serve the export "
                                                 "(serve --max-batch-size, batching_parameters.txt): no warmup "
                                                 "request holds more rows (tensorflow_model_server fails to load "
                                                 "a version whose warmup request exceeds it) (default: no cap)",
                                           metavar="N", type="positive_int")
