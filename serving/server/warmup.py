"""Warmup replay: run a version's `assets.extra/tf_serving_warmup_requests` before it serves.

TF Serving reads up to 1,000 `PredictionLog` records from that file and replays them
against a newly loaded version before routing requests to it, so the first real request
does not pay for graph tracing. The same happens here, through the engine's array core
(`InferenceEngine.run` / `run_examples`), one record at a time, run at once rather than
queued; a record that fails fails the load, with the record's index and the reason in the
version's status. TF Serving replays through its batching session, so under batching a
record of more rows than `max_batch_size` fails its load ("Task size 8 is larger than
maximum input batch size 4"): it fails here too, saying how to export a fitting file, and at
once (`NotRetriedLoadError`: retrying the same file cannot help). With `allowed_batch_sizes` a
record is padded up to the next allowed size, as that session pads it, so the shapes warmed up
are those the batches run with.

Example:
    >>> replay_warmup(engine, servable)   # called by the registry while loading   # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os

from serving.server.errors import NotRetriedLoadError, ServingError, TaskSizeError, from_tf_error
from serving.server.signatures import CLASSIFY_METHOD, REGRESS_METHOD
from serving.server.tensor_proto import ndarray_from_proto, serialized_examples_from_input
from serving.warmup import MAX_WARMUP_RECORDS, WARMUP_FILE

log = logging.getLogger(__name__)


def _replay_one(engine, servable, entry):
    # The model's own requests: not held to the per-request cost limits of clients
    # (`Limits.for_warmup`), or a low --max-rows-per-request failed every load.
    limits = engine.limits.for_warmup()
    kind = entry.WhichOneof("log_type")
    if kind == "predict_log":
        request = entry.predict_log.request
        inputs = {name: ndarray_from_proto(p, name, limits) for name, p in request.inputs.items()}
        engine.run(servable, request.model_spec.signature_name, inputs,
                   output_filter=list(request.output_filter), batch=False, limits=limits)
    elif kind in ("classify_log", "regress_log"):
        request = getattr(entry, kind).request
        method = CLASSIFY_METHOD if kind == "classify_log" else REGRESS_METHOD
        engine.run_examples(servable, method, request.model_spec.signature_name,
                            serialized_examples_from_input(request.input, limits), batch=False, limits=limits)
    else:
        raise ServingError("INVALID_ARGUMENT", f"log type {kind!r} is not supported for warmup")


def replay_warmup(engine, servable) -> None:
    """Replay the warmup records of `servable` (a missing file is fine).

    Args:
        engine: The `InferenceEngine` (its `run`, `run_examples` and `limits`).
        servable: The `ServableVersion` being loaded.

    Raises:
        ServingError: the failing record's index and reason (fails the load).
    """
    path = os.path.join(servable.path, WARMUP_FILE)
    if not os.path.exists(path):
        return
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    try:
        records = [r.numpy() for r in tf.data.TFRecordDataset(path).take(MAX_WARMUP_RECORDS + 1)]
    except tf.errors.OpError as exc:
        raise from_tf_error(exc, f"reading warmup file {path}") from None
    if len(records) > MAX_WARMUP_RECORDS:
        raise NotRetriedLoadError("INVALID_ARGUMENT", f"Number of warmup records exceeds the maximum "
                                                      f"({MAX_WARMUP_RECORDS}) at {path}, as TF Serving refuses it")
    for index, record in enumerate(records):
        try:
            _replay_one(engine, servable, prediction_log_pb2.PredictionLog.FromString(record))
        except TaskSizeError as exc:  # the same file fails the same way again: no load retries
            raise NotRetriedLoadError(exc.code, (
                f"warmup record {index} of {path} failed: Task size {exc.rows} is larger than maximum input "
                f"batch size {exc.limit} (tensorflow_model_server fails this load the same way: export with "
                f"--max-batch-size {exc.limit} (max_batch_size={exc.limit} in Python) for warmup requests "
                f"of at most {exc.limit} rows, or --warmup-requests 0; or serve with --max-batch-size "
                f"{exc.rows} or more)")) from None
        except ServingError as exc:
            raise ServingError(exc.code, f"warmup record {index} of {path} failed: {exc.message}") from None
        except Exception as exc:  # a corrupt record
            raise ServingError("INVALID_ARGUMENT", f"warmup record {index} of {path}: {exc}") from None
    log.info("model %r version %d: replayed %d warmup request(s)", servable.model_name, servable.version, len(records))
