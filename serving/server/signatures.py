"""A SavedModel's signatures as the server sees them: names, dtypes, shapes, method names.

`read_signatures` reads saved_model.pb (never loading the model) into `SignatureInfo`s
(inputs / outputs as `TensorSpecInfo`: dtype enum and shape with None for unknown dims)
and the `SignatureDefMap` GetModelMetadata answers with (`signature_def_map_any` packs it
in an Any with TF Serving's type_url). The DataType enum constants live here too: both
codecs (`tensor_proto`, `json_codec`) and the request checks speak them.

Example:
    >>> spec = TensorSpecInfo("text", DT_STRING, (None,))
    >>> spec.shape_text(), dtype_name(DT_INT32), numpy_dtype(DT_INT64)
    ('[?]', 'DT_INT32', dtype('int64'))
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Mapping

import numpy as np

from serving.server.errors import ServingError

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
SIGNATURE_DEF_MAP_TYPE_URL = "type.googleapis.com/tensorflow.serving.SignatureDefMap"

# tensorflow.DataType enum values (types.proto) the server converts without TF's help.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_INT64, DT_BOOL, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 9, 10, 17, 19, 22, 23

_NUMPY_OF_DT = {
    DT_FLOAT: np.dtype(np.float32),
    DT_DOUBLE: np.dtype(np.float64),
    DT_INT32: np.dtype(np.int32),
    DT_UINT8: np.dtype(np.uint8),
    DT_INT16: np.dtype(np.int16),
    DT_INT8: np.dtype(np.int8),
    DT_INT64: np.dtype(np.int64),
    DT_BOOL: np.dtype(np.bool_),
    DT_UINT16: np.dtype(np.uint16),
    DT_HALF: np.dtype(np.float16),
    DT_UINT32: np.dtype(np.uint32),
    DT_UINT64: np.dtype(np.uint64),
    DT_STRING: np.dtype(object),
}
_DT_OF_NUMPY = {v: k for k, v in _NUMPY_OF_DT.items() if k != DT_STRING}


def dtype_name(dtype_enum: int) -> str:
    """"DT_FLOAT" for 1, as TF Serving prints dtypes."""
    from tensorflow.core.framework import types_pb2

    try:
        return types_pb2.DataType.Name(dtype_enum)
    except ValueError:
        return f"DT_<{dtype_enum}>"


def numpy_dtype(dtype_enum: int):
    """The numpy dtype of a DataType enum (object for DT_STRING)."""
    if dtype_enum in _NUMPY_OF_DT:
        return _NUMPY_OF_DT[dtype_enum]
    import tensorflow as tf

    return np.dtype(tf.dtypes.as_dtype(dtype_enum).as_numpy_dtype)


@dataclasses.dataclass(frozen=True)
class TensorSpecInfo:
    """One input or output of a SignatureDef.

    Args:
        name: The signature key (e.g. "text").
        dtype: tensorflow.DataType enum value (DT_STRING == 7).
        shape: Dimensions with None for unknown, or None for unknown rank.
    """

    name: str
    dtype: int
    shape: tuple | None

    @property
    def np_dtype(self):
        return numpy_dtype(self.dtype)

    def shape_text(self, shape=None) -> str:
        """"[?,3]" style text of this spec's shape (or of `shape`)."""
        dims = self.shape if shape is None else shape
        if dims is None:
            return "<unknown rank>"
        return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


# String inputs that carry binary data (serialized tf.Example, images): never checked as text.
_BINARY_INPUT_NAMES = frozenset({"inputs", "examples", "serialized_examples", "image", "images"})


@dataclasses.dataclass(frozen=True)
class SignatureInfo:
    """A SignatureDef as the server uses it.

    Args:
        name: Signature key ("serving_default").
        method_name: "tensorflow/serving/predict" | ".../classify" | ".../regress" ("" for
            the init op).
        inputs: {name: TensorSpecInfo}.
        outputs: {name: TensorSpecInfo}.
    """

    name: str
    method_name: str
    inputs: Mapping[str, TensorSpecInfo]
    outputs: Mapping[str, TensorSpecInfo]

    @functools.cached_property  # per-request hot path: computed once per loaded version
    def batchable(self) -> bool:
        """Whether requests can be merged: every input and output has a leading batch dim."""
        specs = list(self.inputs.values()) + list(self.outputs.values())
        return bool(self.inputs) and bool(self.outputs) and all(
            s.shape is not None and len(s.shape) >= 1 and s.shape[0] is None for s in specs
        )

    @functools.cached_property
    def text_inputs(self) -> frozenset:
        """String inputs that hold text (checked for UTF-8 before running).

        Classify/regress inputs and inputs named like binary data ("inputs", "examples",
        "*_bytes", the REST convention for binary) are left alone.
        """
        if self.method_name in (CLASSIFY_METHOD, REGRESS_METHOD):
            return frozenset()
        return frozenset(
            name
            for name, spec in self.inputs.items()
            if spec.dtype == DT_STRING and name not in _BINARY_INPUT_NAMES and not name.endswith("_bytes")
        )


def _spec_from_tensor_info(name, info) -> TensorSpecInfo:
    if info.tensor_shape.unknown_rank:
        shape = None
    else:
        shape = tuple(None if d.size < 0 else d.size for d in info.tensor_shape.dim)
    return TensorSpecInfo(name=name, dtype=info.dtype, shape=shape)


def read_signatures(saved_model_dir: str):
    """Signature metadata of a SavedModel, read from saved_model.pb (or .pbtxt).

    Example:
        >>> infos, sig_map = read_signatures("/models/bert/1")  # doctest: +SKIP
        >>> infos["serving_default"].inputs["text"].shape  # doctest: +SKIP
        (None,)

    Args:
        saved_model_dir: A version directory.

    Returns:
        ({signature key: SignatureInfo}, tensorflow.serving.SignatureDefMap proto with every
        SignatureDef of the first MetaGraph, as GetModelMetadata returns it).
    """
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2

    proto = saved_model_pb2.SavedModel()
    pb = os.path.join(saved_model_dir, "saved_model.pb")
    try:
        if os.path.exists(pb):
            with open(pb, "rb") as f:
                proto.ParseFromString(f.read())
        else:
            pb = os.path.join(saved_model_dir, "saved_model.pbtxt")
            with open(pb, encoding="utf-8") as f:
                text_format.Parse(f.read(), proto)
    except OSError as exc:
        raise ServingError("NOT_FOUND", f"cannot read {pb}: {exc.strerror}") from None
    except Exception as exc:  # DecodeError / ParseError / UnicodeDecodeError
        raise ServingError("DATA_LOSS", f"{pb} is not a valid SavedModel: {type(exc).__name__}: {exc}") from None
    if not proto.meta_graphs:
        raise ServingError("DATA_LOSS", f"{pb} has no MetaGraphDef")
    signature_defs = proto.meta_graphs[0].signature_def
    sig_map = get_model_metadata_pb2.SignatureDefMap()
    infos = {}
    for key in sorted(signature_defs):
        sig = signature_defs[key]
        sig_map.signature_def[key].CopyFrom(sig)
        infos[key] = SignatureInfo(
            name=key,
            method_name=sig.method_name,
            inputs={k: _spec_from_tensor_info(k, v) for k, v in sorted(sig.inputs.items())},
            outputs={k: _spec_from_tensor_info(k, v) for k, v in sorted(sig.outputs.items())},
        )
    return infos, sig_map


def signature_def_map_any(sig_map):
    """`sig_map` packed in a google.protobuf.Any with TF Serving's type_url."""
    from google.protobuf import any_pb2

    packed = any_pb2.Any()
    packed.Pack(sig_map)  # "type.googleapis.com/" + full name, as TF Serving's metadata has
    assert packed.type_url == SIGNATURE_DEF_MAP_TYPE_URL
    return packed
