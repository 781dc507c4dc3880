"""TF Serving's batching_parameters.txt (a BatchingParameters text proto), tuned for BERT.

Server-side batching does nothing useful until tuned (tensorflow/serving#1312,
#1904). The file written here holds the settings for the chosen device and,
as comments, the other device's values and why each number is what it is.

Example:

>>> print(format_batching_parameters(gpu=False))     # doctest: +ELLIPSIS
# TF Serving batching parameters...
>>> CPU_BATCHING.max_batch_size, GPU_BATCHING.max_batch_size
(32, 64)
"""

import dataclasses
import textwrap

from serving.server.batching import check_allowed_batch_sizes


@dataclasses.dataclass(frozen=True)
class BatchingSettings:
    """The BatchingParameters fields this kit sets (all exist in every TF Serving 2.x).

    Args:
        max_batch_size: rows in one batch; requests with more rows are rejected.
        batch_timeout_micros: how long the oldest request waits for company.
        num_batch_threads: batches that run at the same time.
        max_enqueued_batches: queue bound; beyond it requests fail fast (UNAVAILABLE).
        allowed_batch_sizes: batch sizes a formed batch is padded up to (empty: none).
    """

    max_batch_size: int
    batch_timeout_micros: int
    num_batch_threads: int
    max_enqueued_batches: int
    allowed_batch_sizes: tuple = ()

    def __post_init__(self):
        # TF Serving refuses to load a model otherwise; the embedded server holds its sizes to the same rule.
        object.__setattr__(self, "allowed_batch_sizes", check_allowed_batch_sizes(
            self.allowed_batch_sizes, self.max_batch_size, where="BatchingSettings.allowed_batch_sizes"))
        if min(self.max_batch_size, self.num_batch_threads, self.max_enqueued_batches) < 1:
            raise ValueError("max_batch_size, num_batch_threads and max_enqueued_batches must be >= 1")


CPU_BATCHING = BatchingSettings(
    max_batch_size=32, batch_timeout_micros=2000, num_batch_threads=4, max_enqueued_batches=100,
)
GPU_BATCHING = BatchingSettings(
    max_batch_size=64, batch_timeout_micros=1000, num_batch_threads=2, max_enqueued_batches=200,
    allowed_batch_sizes=(8, 16, 32, 64),
)


def cpu_batching(cpus):
    """CPU settings with one batch thread per core the server may use."""
    return dataclasses.replace(CPU_BATCHING, num_batch_threads=max(1, int(cpus)))


_EXPLANATIONS = {
    "max_batch_size": (
        "Largest batch formed from concurrent requests (rows, summed over requests). BERT's cost grows "
        "linearly with rows on CPU, so big batches buy little there (CPU: 16-32); a GPU is only busy "
        "with 32-128 rows (GPU: 64). A single request with more rows than this is rejected: clients "
        "send at most this many texts per request."
    ),
    "batch_timeout_micros": (
        "How long the first request of a batch waits for others. It is the latency added at low load: "
        "keep it below your p50 model latency (CPU: 2000 = 2 ms; GPU: 1000, the GPU finishes a batch "
        "quickly and idles otherwise)."
    ),
    "num_batch_threads": (
        "Batches processed at the same time. CPU: about the number of cores the container may use "
        "(each batch also spreads over TensorFlow's intra-op threads). GPU: 1-2, one device runs one "
        "batch at a time and more threads only queue on it."
    ),
    "max_enqueued_batches": (
        "Bound of the waiting queue, in batches. Past it requests fail at once with UNAVAILABLE "
        "(back-pressure) instead of timing out late; max_enqueued_batches x max_batch_size rows can "
        "wait (CPU: 100, GPU: 200)."
    ),
    "pad_variable_length_inputs": (
        "false on purpose. true pads tensors of unequal length in a batch with the FIRST ELEMENT of "
        "each tensor (tensorflow_serving/batching/batching_util.cc), which turns padding_mask padding "
        "into 1s: wrong answers for the token_ids signature. Exported models do not need it: the text "
        "signatures pad in the graph, and token_ids clients send fixed-length rows (seq_length)."
    ),
    "allowed_batch_sizes": (
        "Formed batches are padded up to the next allowed size, so the model sees few distinct shapes "
        "(fewer GPU kernel variants and cuDNN autotuning runs). The last entry must equal "
        "max_batch_size. CPU: none (padding rows would be computed for nothing). GPU: 8, 16, 32, 64."
    ),
}


def _field_lines(settings):
    lines = {
        "max_batch_size": [f"max_batch_size {{ value: {settings.max_batch_size} }}"],
        "batch_timeout_micros": [f"batch_timeout_micros {{ value: {settings.batch_timeout_micros} }}"],
        "num_batch_threads": [f"num_batch_threads {{ value: {settings.num_batch_threads} }}"],
        "max_enqueued_batches": [f"max_enqueued_batches {{ value: {settings.max_enqueued_batches} }}"],
        "pad_variable_length_inputs": ["pad_variable_length_inputs: false"],
        "allowed_batch_sizes": [f"allowed_batch_sizes: {size}" for size in settings.allowed_batch_sizes],
    }
    return lines


def format_batching_parameters(gpu=False, settings=None):
    """The batching_parameters.txt text: active settings for the device, the other in comments.

    Args:
        gpu: tune for a GPU server (tensorflow/serving:X-gpu image).
        settings: override the active `BatchingSettings`.
    """
    active = settings or (GPU_BATCHING if gpu else CPU_BATCHING)
    other = CPU_BATCHING if gpu else GPU_BATCHING
    device, other_device = ("GPU", "CPU") if gpu else ("CPU", "GPU")
    out = [
        "# TF Serving batching parameters (a BatchingParameters text proto, see",
        "# tensorflow_serving/servables/tensorflow/session_bundle_config.proto), read by",
        "#   tensorflow_model_server --enable_batching=true --batching_parameters_file=THIS_FILE",
        f"# Written by `bert-keras deploy-kit` for {device}; the {other_device} values are in the comments.",
        "# Batching merges concurrent requests of one signature into one model call: more throughput,",
        "# at most batch_timeout_micros more latency. Measure with your own traffic before tuning.",
        "",
    ]
    active_lines, other_lines = _field_lines(active), _field_lines(other)
    for field, explanation in _EXPLANATIONS.items():
        out += [f"# {line}" for line in textwrap.wrap(f"{field}: {explanation}", 96)]
        if other_lines[field] != active_lines[field] and other_lines[field]:
            out += [f"#   {other_device}: {line}" for line in other_lines[field]]
        out += active_lines[field] or [f"# (no {field} on {device})"]
        out.append("")
    return "\n".join(out)

