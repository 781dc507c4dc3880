"""The embedded model server that speaks TF Serving's API (`bert-keras serve`).

The array-only core `InferenceEngine` (Predict / Classify / Regress / MultiInference / metadata / status on
numpy arrays), with version policies, load retries and hot swap (`model_registry`,
`version_files`), server-side batching (`batching`), request checks and limits
(`request_validation`), warmup replay (`warmup`), signatures (`signatures`), models.config
files (`model_config`) and status codes (`errors`); two adapters, each with its codec: gRPC
(`grpc_service` + `tensor_proto`) and REST (`rest_service` + `json_codec`, served by
`http_server`); `server.EmbeddedServer` puts them on ports. Names are imported lazily so that reading a models.config does not import
TensorFlow.

Example:
    >>> from serving.server import InferenceEngine, ModelSource, BatchingOptions   # doctest: +SKIP
    >>> engine = InferenceEngine([ModelSource("bert", "/models/bert")],             # doctest: +SKIP
    ...                          batching=BatchingOptions())
"""

import importlib

_EXPORTS = {
    "InferenceEngine": "serving.server.engine",
    "ModelSource": "serving.server.model_config",
    "ModelConfigError": "serving.server.model_config",
    "parse_models_config": "serving.server.model_config",
    "format_models_config": "serving.server.model_config",
    "read_models_config": "serving.server.model_config",
    "write_models_config": "serving.server.model_config",
    "BatchingOptions": "serving.server.batching",
    "LoadRetryOptions": "serving.server.model_registry",
    "Limits": "serving.server.request_validation",
    "ServingError": "serving.server.errors",
    "grpc_status": "serving.server.errors",
    "http_status": "serving.server.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'serving.server' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
