"""TF Serving's gRPC API (PredictionService, ModelService, grpc.health.v1): the gRPC adapter of `InferenceEngine`.

`GrpcApi` translates each request proto with the gRPC codec (`tensor_proto`: TensorProtos
read with every size checked before allocation) into one call of the engine's array core,
and the answer back into TF Serving's response proto. The servicers turn a `ServingError`
into the gRPC status TF Serving would answer with, so the stock `tensorflow_serving.apis`
stubs (and any TF Serving client) work unchanged. Anything unexpected is logged and answered
INTERNAL without internals: one bad request never takes the server down.

Example (loopback, any free port):

    import grpc
    from concurrent import futures
    from serving.server.grpc_service import add_services

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    health = add_services(server, engine)      # engine: a started InferenceEngine
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    health.set_serving(True)
"""

import logging
import threading
import time

import grpc
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from serving.server.batching import CLIENT_ALIVE
from serving.server.errors import ServingError, code_number, grpc_status, name_list
from serving.server.signatures import signature_def_map_any
from serving.server.tensor_proto import (check_declared_inputs, ndarray_from_proto, proto_from_ndarray,
                                         serialized_examples_from_input)

logger = logging.getLogger(__name__)

HEALTH_SERVICE = "grpc.health.v1.Health"


def _spec(request, *, name_required=True):
    """(name, version or None, label or None) of a request's ModelSpec; INVALID_ARGUMENT without one,
    or (as TF Serving's `ServableRequestFromModelSpec`) without a name.

    The version is a oneof: a label set to "" is a label (TF Serving: "Unrecognized servable
    version label"), not the latest version. GetModelStatus looks the name up without the check
    (`name_required=False`): TF Serving answers NOT_FOUND there.
    """
    if not request.HasField("model_spec"):
        raise ServingError("INVALID_ARGUMENT", "Missing ModelSpec")
    spec = request.model_spec
    if name_required and not spec.name:
        raise ServingError("INVALID_ARGUMENT", "ModelSpec has no name specified.")
    choice = spec.WhichOneof("version_choice")
    version = spec.version.value if choice == "version" else None
    return spec.name, version, (spec.version_label if choice == "version_label" else None)


def _fill_spec(spec, name, version, signature_name):
    spec.name = name
    spec.version.value = version
    spec.signature_name = signature_name


def _fill_classifications(result, rows):
    """A `ClassificationResult` (Classify's, or a MultiInference task's) from rows of (label, score)."""
    for row in rows:
        classifications = result.classifications.add()
        for class_label, score in row:
            item = classifications.classes.add()
            item.label = class_label
            item.score = score


class GrpcApi:
    """TF Serving's request protos in, response protos out, over an engine's array core.

    Example:
        >>> api = GrpcApi(engine)                       # doctest: +SKIP
        >>> api.predict(predict_request).outputs["label"]   # doctest: +SKIP

    Args:
        engine: An `InferenceEngine`.
    """

    def __init__(self, engine):
        self.engine = engine

    def predict(self, request):
        """PredictRequest -> PredictResponse (model_spec carries the resolved version and signature)."""
        name, version, label = _spec(request)
        limits = self.engine.limits
        check_declared_inputs(request.inputs, limits)  # all inputs together, before any array is built
        inputs = {key: ndarray_from_proto(proto, key, limits) for key, proto in request.inputs.items()}
        resolved, signature_name, outputs = self.engine.predict_arrays(
            name, version=version, version_label=label, signature_name=request.model_spec.signature_name,
            inputs=inputs, output_filter=list(request.output_filter))
        response = predict_pb2.PredictResponse()
        _fill_spec(response.model_spec, name, resolved, signature_name)
        for key, array in outputs.items():
            proto_from_ndarray(array, response.outputs[key])
        return response

    def classify(self, request):
        """ClassificationRequest (tf.Examples) -> ClassificationResponse."""
        name, version, label = _spec(request)
        serialized = serialized_examples_from_input(request.input, self.engine.limits)
        resolved, signature_name, rows = self.engine.classify_examples(
            name, version=version, version_label=label, signature_name=request.model_spec.signature_name,
            serialized=serialized)
        response = classification_pb2.ClassificationResponse()
        _fill_spec(response.model_spec, name, resolved, signature_name)
        _fill_classifications(response.result, rows)
        return response

    def regress(self, request):
        """RegressionRequest (tf.Examples) -> RegressionResponse."""
        name, version, label = _spec(request)
        serialized = serialized_examples_from_input(request.input, self.engine.limits)
        resolved, signature_name, values = self.engine.regress_examples(
            name, version=version, version_label=label, signature_name=request.model_spec.signature_name,
            serialized=serialized)
        response = regression_pb2.RegressionResponse()
        _fill_spec(response.model_spec, name, resolved, signature_name)
        for value in values:
            response.result.regressions.add().value = value
        return response

    def multi_inference(self, request):
        """MultiInferenceRequest -> MultiInferenceResponse: classify / regress tasks of one model on
        the same tf.Examples, checked as TF Serving checks them (one model name, no signature twice,
        an empty signature name is serving_default; a method other than classify / regress is
        UNIMPLEMENTED). The first task's ModelSpec picks the version every task runs."""
        from serving.server.signatures import CLASSIFY_METHOD, REGRESS_METHOD

        if not request.tasks:
            raise ServingError("INVALID_ARGUMENT", "MultiInferenceRequest has no tasks")
        tasks, seen = [], set()
        for task in request.tasks:
            if not task.model_spec.name:
                raise ServingError("INVALID_ARGUMENT", "Found ModelSpec with an empty model name.")
            if task.model_spec.name != request.tasks[0].model_spec.name:
                raise ServingError("INVALID_ARGUMENT",
                                   "All ModelSpecs in a MultiInferenceRequest must access the same model name.")
            signature_name = task.model_spec.signature_name or "serving_default"
            if signature_name in seen:
                raise ServingError("INVALID_ARGUMENT", f"Duplicate evaluation of signature: {signature_name[:200]}")
            seen.add(signature_name)
            if task.method_name not in (CLASSIFY_METHOD, REGRESS_METHOD):
                raise ServingError("UNIMPLEMENTED", f"Unsupported signature method_name: {task.method_name[:200]}")
            tasks.append((signature_name, task.method_name))
        first = request.tasks[0]
        name, version, label = _spec(first)
        serialized = serialized_examples_from_input(request.input, self.engine.limits)
        resolved, results = self.engine.multi_inference_examples(
            name, version=version, version_label=label, tasks=tasks, serialized=serialized)
        response = inference_pb2.MultiInferenceResponse()
        for task, (signature_name, method, rows) in zip(request.tasks, results):
            result = response.results.add()
            _fill_spec(result.model_spec, name, resolved, task.model_spec.signature_name)
            if method == CLASSIFY_METHOD:
                _fill_classifications(result.classification_result, rows)
            else:
                for value in rows:
                    result.regression_result.regressions.add().value = value
        return response

    def get_model_metadata(self, request):
        """GetModelMetadataRequest -> GetModelMetadataResponse with metadata["signature_def"] (a
        SignatureDefMap in an Any, type_url type.googleapis.com/tensorflow.serving.SignatureDefMap)."""
        name, version, label = _spec(request)
        fields = list(request.metadata_field)
        if not fields:
            raise ServingError("INVALID_ARGUMENT",
                               "GetModelMetadataRequest must name at least one metadata_field ('signature_def')")
        unsupported = sorted(set(fields) - {"signature_def"})
        if unsupported:
            raise ServingError("INVALID_ARGUMENT", f"metadata field(s) {name_list(unsupported)} not "
                                                   "supported; supported: ['signature_def']")
        resolved, sig_map = self.engine.metadata(name, version, label)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = name
        response.model_spec.version.value = resolved
        response.metadata["signature_def"].CopyFrom(signature_def_map_any(sig_map))
        return response

    def get_model_status(self, request):
        """GetModelStatusRequest -> GetModelStatusResponse (one ModelVersionStatus per version)."""
        name, version, label = _spec(request, name_required=False)
        response = get_model_status_pb2.GetModelStatusResponse()
        for item in self.engine.model_status(name, version, label):
            status = response.model_version_status.add()
            status.version = item["version"]
            status.state = get_model_status_pb2.ModelVersionStatus.State.Value(item["state"])
            status.status.error_code = code_number(item["error_code"])
            status.status.error_message = item["error_message"]
        return response


class MalformedRequest:
    """What a request deserializer returns for bytes that are not the request message.

    grpc answers a deserializer that raises with INTERNAL "Exception deserializing request!";
    malformed bytes are the client's mistake, so the deserializer returns this instead and the
    handler (`_call`) answers INVALID_ARGUMENT.
    """

    def __init__(self, type_name, error):
        self.type_name = type_name
        self.error = error

    def message(self, what):
        return f"{what}: the request bytes are not a valid {self.type_name} ({type(self.error).__name__})"


def lenient_deserializer(request_class):
    """`request_class.FromString`, returning a `MalformedRequest` instead of raising."""
    def parse(data):
        try:
            return request_class.FromString(data)
        except (Exception, RecursionError) as error:  # noqa: BLE001 - DecodeError, nesting, bad UTF-8
            return MalformedRequest(request_class.DESCRIPTOR.full_name, error)
    return parse


def _call(context, method, request, what, metrics=None):
    """Runs `method(request)`; a failure aborts the RPC with a status and a message, never a crash."""
    started = time.perf_counter()
    code = "OK"
    CLIENT_ALIVE.set(getattr(context, "is_active", None))  # a batch drops the request of a client gone
    try:
        if isinstance(request, MalformedRequest):
            raise ServingError("INVALID_ARGUMENT", request.message(what))
        return method(request)
    except ServingError as error:
        code = error.code
        context.abort(grpc_status(error.code), error.message)
    except RecursionError:  # a proto nested past Python's limit is the client's mistake
        code = "INVALID_ARGUMENT"
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{what}: the request is nested too deeply")
    except Exception:  # noqa: BLE001 - the server must keep serving; internals stay in the log
        code = "INTERNAL"
        logger.exception("%s failed", what)
        context.abort(grpc.StatusCode.INTERNAL, f"{what} failed: internal error (see the server log)")
    finally:
        if metrics is not None:
            metrics.record("grpc", what, code, time.perf_counter() - started)


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """`tensorflow.serving.PredictionService`: Predict, Classify, Regress, MultiInference, GetModelMetadata.

    Args:
        engine: an `InferenceEngine`, or any object with the `GrpcApi` methods predict / classify /
            regress / multi_inference / get_model_metadata (proto in, proto out, `ServingError` on failure).
        metrics: optional object with `record(transport, method, code, seconds)`.
    """

    def __init__(self, engine, metrics=None):
        self.engine = GrpcApi(engine) if hasattr(engine, "predict_arrays") else engine
        self.metrics = metrics

    def Predict(self, request, context):  # noqa: N802 - gRPC method name
        return _call(context, self.engine.predict, request, "Predict", self.metrics)

    def Classify(self, request, context):  # noqa: N802
        return _call(context, self.engine.classify, request, "Classify", self.metrics)

    def Regress(self, request, context):  # noqa: N802
        return _call(context, self.engine.regress, request, "Regress", self.metrics)

    def GetModelMetadata(self, request, context):  # noqa: N802
        return _call(context, self.engine.get_model_metadata, request, "GetModelMetadata", self.metrics)

    def MultiInference(self, request, context):  # noqa: N802
        return _call(context, self.engine.multi_inference, request, "MultiInference", self.metrics)


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """`tensorflow.serving.ModelService`: GetModelStatus (reloading the config is not supported).

    Args:
        engine: an `InferenceEngine` or an object with `get_model_status(request) -> GetModelStatusResponse`.
        metrics: optional object with `record(transport, method, code, seconds)`.
    """

    def __init__(self, engine, metrics=None):
        self.engine = GrpcApi(engine) if hasattr(engine, "predict_arrays") else engine
        self.metrics = metrics

    def GetModelStatus(self, request, context):  # noqa: N802
        return _call(context, self.engine.get_model_status, request, "GetModelStatus", self.metrics)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        # The engine polls each model's base path for new versions already; swapping
        # the whole model list at run time is left to a restart.
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "HandleReloadConfigRequest is not supported: new versions under a model's base path "
                      "are picked up by polling; restart the server to change the model list")


class HealthServicer:
    """`grpc.health.v1.Health/Check`: SERVING once the engine is ready, NOT_SERVING while loading or draining.

    Uses grpcio-health-checking's messages when installed; otherwise the two tiny
    messages of health.proto are built here (no extra dependency), wire-compatible
    with every gRPC health client (grpc_health_probe, Kubernetes gRPC probes).
    `Watch` is not offered (unary Check only).

    Args:
        engine: an object with `is_ready() -> bool`.
    """

    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3

    def __init__(self, engine):
        self.engine = engine
        self._serving = False
        self._lock = threading.Lock()
        self.request_class, self.response_class = health_messages()

    def set_serving(self, serving):
        """Marks the server as accepting traffic (True after start) or draining (False)."""
        with self._lock:
            self._serving = bool(serving)

    def Check(self, request, context):  # noqa: N802
        if isinstance(request, MalformedRequest):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message("Check"))
        # "" is the whole server; the two TF Serving services are reported the same way.
        known = ("", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService", HEALTH_SERVICE)
        if request.service not in known:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        with self._lock:
            serving = self._serving
        try:
            ready = serving and self.engine.is_ready()
        except Exception:  # noqa: BLE001 - a failing readiness check means not serving
            logger.exception("is_ready() failed")
            ready = False
        return self.response_class(status=self.SERVING if ready else self.NOT_SERVING)

    def handler(self):
        return grpc.method_handlers_generic_handler(HEALTH_SERVICE, {
            "Check": grpc.unary_unary_rpc_method_handler(
                self.Check,
                request_deserializer=lenient_deserializer(self.request_class),
                response_serializer=self.response_class.SerializeToString,
            ),
        })


_HEALTH_MESSAGES = None


def health_messages():
    """(HealthCheckRequest, HealthCheckResponse) message classes of grpc/health/v1/health.proto."""
    global _HEALTH_MESSAGES
    if _HEALTH_MESSAGES is not None:
        return _HEALTH_MESSAGES
    try:
        from grpc_health.v1 import health_pb2

        _HEALTH_MESSAGES = (health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse)
        return _HEALTH_MESSAGES
    except ImportError:
        pass
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    # The two messages of health.proto, field numbers and enum values as published,
    # in a private pool so that a later `import grpc_health` cannot clash with them.
    fdp = descriptor_pb2.FileDescriptorProto(name="grpc/health/v1/health.proto", package="grpc.health.v1",
                                             syntax="proto3")
    req = fdp.message_type.add(name="HealthCheckRequest")
    req.field.add(name="service", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    resp = fdp.message_type.add(name="HealthCheckResponse")
    enum = resp.enum_type.add(name="ServingStatus")
    for number, name in enumerate(("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")):
        enum.value.add(name=name, number=number)
    resp.field.add(name="status", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_ENUM,
                   label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                   type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _HEALTH_MESSAGES = tuple(
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"grpc.health.v1.{name}"))
        for name in ("HealthCheckRequest", "HealthCheckResponse"))
    return _HEALTH_MESSAGES


def add_services(server, engine, metrics=None):
    """Adds PredictionService, ModelService and grpc.health.v1 to `server`; returns the HealthServicer.

    Args:
        server: a `grpc.Server` not started yet.
        engine: the `InferenceEngine` (or any object with its proto methods and `is_ready`).
        metrics: optional object with `record(transport, method, code, seconds)` (see
            `serving.server.server.ServerMetrics`).
    """
    server.add_generic_rpc_handlers((
        _service_handler("tensorflow.serving.PredictionService", PredictionServicer(engine, metrics)),
        _service_handler("tensorflow.serving.ModelService", ModelServicer(engine, metrics)),
    ))
    health = HealthServicer(engine)
    server.add_generic_rpc_handlers((health.handler(),))
    return health


def _methods():
    """{service: {method: (request class, response class)}} of TF Serving's two services
    (prediction_service.proto, model_service.proto: the generated `add_..._to_server` tables)."""
    from tensorflow_serving.apis import inference_pb2, model_management_pb2

    return {
        "tensorflow.serving.PredictionService": {
            "Classify": (classification_pb2.ClassificationRequest, classification_pb2.ClassificationResponse),
            "Regress": (regression_pb2.RegressionRequest, regression_pb2.RegressionResponse),
            "Predict": (predict_pb2.PredictRequest, predict_pb2.PredictResponse),
            "MultiInference": (inference_pb2.MultiInferenceRequest, inference_pb2.MultiInferenceResponse),
            "GetModelMetadata": (get_model_metadata_pb2.GetModelMetadataRequest,
                                 get_model_metadata_pb2.GetModelMetadataResponse),
        },
        "tensorflow.serving.ModelService": {
            "GetModelStatus": (get_model_status_pb2.GetModelStatusRequest, get_model_status_pb2.GetModelStatusResponse),
            "HandleReloadConfigRequest": (model_management_pb2.ReloadConfigRequest,
                                          model_management_pb2.ReloadConfigResponse),
        },
    }


def _service_handler(service, servicer):
    """The generic handler of a TF Serving service, as its generated `add_..._to_server` builds it,
    with `lenient_deserializer`s: malformed request bytes reach the servicer, which answers
    INVALID_ARGUMENT (grpc's own answer would be INTERNAL)."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name), request_deserializer=lenient_deserializer(request_class),
            response_serializer=response_class.SerializeToString)
        for name, (request_class, response_class) in _methods()[service].items()
    }
    return grpc.method_handlers_generic_handler(service, handlers)
