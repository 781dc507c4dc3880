"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests`.

TF Serving replays the records of this file through a model version before it
marks the version AVAILABLE, so that the first real request does not pay for
graph optimisation and memory allocation. The file is silently ignored when it
is misplaced or malformed (tensorflow/serving#1414, #1679): it must be a
TFRecord file of `tensorflow.serving.PredictionLog` protos with
`predict_log.request` set, at exactly `<version>/assets.extra/tf_serving_warmup_requests`.

Requests alternate between batch sizes (default 1 and 8), so that both the
single-request path and a batched shape are warm. TF Serving replays them through
its batching session: with batching on, a request of more rows than `max_batch_size`
fails the model's load ("Task size 8 is larger than maximum input batch size 4"), so
`warmup_batch_sizes(max_batch_size)` caps them at the server's `max_batch_size`.

Example:

    >>> logs = warmup_logs("sentiment", {"text": ["Great film.", "Bad film."]}, num_requests=2)
    >>> write_warmup_file("models/sentiment/1", logs)
    'models/sentiment/1/assets.extra/tf_serving_warmup_requests'
    >>> [len(log.predict_log.request.inputs["text"].string_val) for log in
    ...  read_warmup_file("models/sentiment/1")]
    [1, 8]
"""

import numbers
import os

import numpy as np

from pipelines.atomic_writes import staged_path

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# TF Serving fails a load whose warmup file holds more records (saved_model_warmup_util's
# kMaxNumRecords): "Number of warmup records exceeeds the maximum (1000)".
MAX_WARMUP_RECORDS = 1000
DEFAULT_BATCH_SIZES = (1, 8)


def warmup_batch_sizes(max_batch_size=None):
    """The batch sizes of the warmup requests: `DEFAULT_BATCH_SIZES`, none above `max_batch_size`
    (the batching's of the server that loads the export; None: no cap).

    >>> warmup_batch_sizes(), warmup_batch_sizes(4), warmup_batch_sizes(1), warmup_batch_sizes(32)
    ((1, 8), (1, 4), (1,), (1, 8))
    """
    if max_batch_size is None:
        return DEFAULT_BATCH_SIZES
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, numbers.Integral) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive integer, not {max_batch_size!r}")
    return tuple(sorted({min(size, int(max_batch_size)) for size in DEFAULT_BATCH_SIZES}))


def warmup_logs(model_name, inputs, *, num_requests=2, batch_sizes=DEFAULT_BATCH_SIZES,
                signature_name="serving_default"):
    """`PredictionLog`s of `num_requests` predict requests built from sample `inputs`.

    Args:
        model_name: the served model's name (`model_spec.name`).
        inputs: `{input name: list of rows}` (str/bytes rows; a row may be a list,
            e.g. multiple-choice `endings`); rows are reused cyclically.
        num_requests: how many requests.
        batch_sizes: request i has `batch_sizes[i % len(batch_sizes)]` rows.
        signature_name: the signature the requests call.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    num_rows = len(next(iter(inputs.values())))
    logs = []
    for i in range(num_requests):
        size = batch_sizes[i % len(batch_sizes)]
        rows = [(i * size + j) % num_rows for j in range(size)]
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature_name
        for name, values in inputs.items():
            array = np.array([_encode(values[r]) for r in rows], dtype=object)
            request.inputs[name].CopyFrom(tf.make_tensor_proto(array, dtype=tf.string))
        logs.append(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def write_warmup_file(version_dir, logs):
    """Writes `logs` as `<version_dir>/assets.extra/tf_serving_warmup_requests` (atomically)."""
    import tensorflow as tf

    path = os.path.join(version_dir, WARMUP_FILE)
    with staged_path(path) as staging:
        with tf.io.TFRecordWriter(staging) as writer:
            for log in logs:
                writer.write(log.SerializeToString())
    return path


def read_warmup_file(path):
    """The `PredictionLog`s of a warmup file (or of a version directory's warmup file)."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    if os.path.isdir(path):
        path = os.path.join(path, WARMUP_FILE)
    logs = []
    for record in tf.data.TFRecordDataset(path):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        logs.append(log)
    return logs


def request_arrays(log):
    """`{input name: numpy array}` of a `PredictionLog`'s predict request."""
    import tensorflow as tf

    return {name: tf.make_ndarray(proto) for name, proto in log.predict_log.request.inputs.items()}


def _encode(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_encode(v) for v in value]
    return value.encode("utf-8") if isinstance(value, str) else value
