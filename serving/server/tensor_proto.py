"""The gRPC codec: `tensorflow.TensorProto` <-> numpy, every size checked before anything is allocated.

A TensorProto declares a shape and carries values; the two must agree. `ndarray_from_proto`
reads the declared shape and checks it against the request limits (rows, bytes, the token
budget of a `token_ids` input: `request_validation.check_declared_size`) before numpy or
TensorFlow allocate anything. A 51-byte request declaring 250,000,000 strings is therefore
refused in microseconds, and the array built is never larger than the limits allow.

The values must agree with the shape as TensorFlow's own reader (`Tensor::FromProto`, which
TF Serving uses) has them agree: `tensor_content` exactly the declared bytes; a typed
repeated field at most the declared count, a shorter one filled out with its last value
(what `tf.make_tensor_proto("text", shape=[2])` sends), none at all meaning the dtype's
zero. More values than the shape holds is INVALID_ARGUMENT.

Values come from `tensor_content` (a fixed-size dtype: one copy; DT_STRING: TensorFlow's
encoding of a string list, varint32 lengths then the bytes) or the typed repeated field of the dtype (`string_val`, `int_val`, `int64_val`, `float_val`, ...). Integer
values out of the dtype's range are refused, never wrapped.

Example:
    >>> import numpy as np
    >>> proto = proto_from_ndarray(np.array([b"hello", b"world"], dtype=object))
    >>> ndarray_from_proto(proto, "text").tolist()
    [b'hello', b'world']
    >>> proto.tensor_shape.dim[0].size = 3                # TF's short form: the last value repeats
    >>> ndarray_from_proto(proto, "text").tolist()
    [b'hello', b'world', b'world']
    >>> proto.tensor_shape.dim[0].size = 250_000_000      # declared, not sent
    >>> ndarray_from_proto(proto, "text", Limits())
    Traceback (most recent call last):
    ...
    serving.server.errors.ServingError: RESOURCE_EXHAUSTED: input 'text' has 250000000 rows; the limit per request is 1024
"""

from __future__ import annotations

import math

import numpy as np

from serving.server.errors import ServingError
from serving.server.request_validation import STRING_ELEMENT_BYTES, Limits, check_declared_size, check_examples_size
from serving.server.signatures import (
    _DT_OF_NUMPY,
    _NUMPY_OF_DT,
    DT_BOOL,
    DT_DOUBLE,
    DT_FLOAT,
    DT_HALF,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_STRING,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    dtype_name,
)

# The repeated field that holds each dtype's values when tensor_content is empty (tensor.proto).
_VALUE_FIELD = {
    DT_FLOAT: "float_val",
    DT_DOUBLE: "double_val",
    DT_INT32: "int_val",
    DT_INT16: "int_val",
    DT_INT8: "int_val",
    DT_UINT8: "int_val",
    DT_UINT16: "int_val",
    DT_INT64: "int64_val",
    DT_UINT32: "uint32_val",
    DT_UINT64: "uint64_val",
    DT_BOOL: "bool_val",
    DT_HALF: "half_val",  # float16 bit patterns
    DT_STRING: "string_val",
}
MAX_RANK = 32  # TensorShape allows 254; no signature of a served model has more than a handful
MAX_SPAN = 1 << 48  # product of the non-zero dims: far above any limit, below numpy's own refusal


def _invalid(name, message):
    return ServingError("INVALID_ARGUMENT", f"input '{name}': {message}")


def declared_shape(proto, name: str) -> tuple:
    """The dims a TensorProto declares, checked (known rank, no negative dim, rank <= MAX_RANK)."""
    if proto.tensor_shape.unknown_rank:
        raise _invalid(name, "tensor_shape has unknown_rank set")
    dims = proto.tensor_shape.dim
    if len(dims) > MAX_RANK:
        raise _invalid(name, f"rank {len(dims)} is over the limit of {MAX_RANK}")
    shape = tuple(d.size for d in dims)
    if any(s < 0 for s in shape):
        raise _invalid(name, f"negative dimension in shape {list(shape)}")
    if math.prod(s for s in shape if s) > MAX_SPAN:  # numpy refuses such a shape even with 0 elements
        raise _invalid(name, f"shape {list(shape)} is too large")
    return shape


def check_declared_inputs(protos, limits: Limits) -> None:
    """Refuse a request's inputs over the limits TOGETHER, from their declared shapes and the
    bytes of their strings, before any of them becomes an array.

    Each input is also held to the limits alone (`ndarray_from_proto`); checked only one by one,
    20 inputs of `[1024, 16384]` floats in TensorFlow's short form (one value, repeated) made a
    683-byte request allocate 1.3 GB before its input names were refused. A short string field
    is filled with its last value, so one 15 MiB string declared `[1024]` is 15 GiB of text to
    check, refused here at once.

    Args:
        protos: {input name: TensorProto}.
        limits: The request limits (`max_request_bytes` for all inputs together).

    Raises:
        ServingError: INVALID_ARGUMENT for a malformed shape; RESOURCE_EXHAUSTED over a limit.
    """
    total = 0
    for name, proto in protos.items():
        shape = declared_shape(proto, name)
        count = math.prod(shape)
        if proto.dtype == DT_STRING:
            check_declared_size(name, shape, STRING_ELEMENT_BYTES, limits)
            values = proto.string_val
            text = len(proto.tensor_content) if proto.tensor_content else sum(len(v) for v in values)
            if values and len(values) < count:
                text += (count - len(values)) * len(values[-1])  # TensorFlow's filling of a short field
            # as the checks one by one count them: the elements (`check_declared_size`) or their bytes
            # (`validate_inputs`), whichever is more; a request either accepted stays accepted
            total += max(count * STRING_ELEMENT_BYTES, text)
        elif proto.dtype in _NUMPY_OF_DT:
            itemsize = _NUMPY_OF_DT[proto.dtype].itemsize
            check_declared_size(name, shape, itemsize, limits)
            total += count * itemsize
        if total > limits.max_request_bytes:
            raise ServingError("RESOURCE_EXHAUSTED",
                               f"the request's {len(protos)} input(s) hold over {total} bytes together; the limit "
                               f"is {limits.max_request_bytes}")


def ndarray_from_proto(proto, name: str = "tensor", limits: Limits | None = None) -> np.ndarray:
    """The numpy array a TensorProto holds (DT_STRING -> object array of bytes).

    Args:
        proto: A `tensorflow.TensorProto`.
        name: Input name, for error messages and the token budget (`token_ids`).
        limits: Request limits checked on the declared shape before allocating (the server
            always passes its own; None, for a client reading a response, checks none).

    Raises:
        ServingError: INVALID_ARGUMENT for a malformed proto (unknown rank, a dtype the server
            does not read, a value count or byte size that disagrees with the shape, integers out
            of range); RESOURCE_EXHAUSTED when the declared shape is over a limit.
    """
    shape = declared_shape(proto, name)
    count = math.prod(shape)
    dt = proto.dtype
    field = _VALUE_FIELD.get(dt)
    if field is None:
        raise _invalid(name, f"dtype {dtype_name(dt)} is not supported; send one of "
                             f"{sorted(dtype_name(d) for d in _VALUE_FIELD)}")
    np_dtype = _NUMPY_OF_DT[dt]
    content = proto.tensor_content
    if content and dt == DT_STRING:
        if limits is not None:
            check_declared_size(name, shape, STRING_ELEMENT_BYTES, limits)
        return _strings_from_content(content, count, name).reshape(shape)
    values = None if content else getattr(proto, field)
    if content:
        if len(content) != count * np_dtype.itemsize:
            raise _invalid(name, f"tensor_content has {len(content)} bytes; shape {list(shape)} of "
                                 f"{dtype_name(dt)} needs {count * np_dtype.itemsize}")
    elif len(values) > count:
        raise _invalid(name, f"shape {list(shape)} declares {count} values but the TensorProto carries {len(values)}")
    if limits is not None:
        check_declared_size(name, shape, STRING_ELEMENT_BYTES if dt == DT_STRING else np_dtype.itemsize, limits)
    if values is not None and len(values) < count:
        # TensorFlow's reader fills a short repeated field with its last value (none: zeros);
        # only now, with the declared size within the limits, is the full array built.
        return _filled(values, count, shape, dt, np_dtype, name, field)
    if dt == DT_STRING:
        array = np.empty(count, dtype=object)
        if count:
            array[:] = list(values)
        return array.reshape(shape)
    if content:
        return np.frombuffer(content, dtype=np_dtype).reshape(shape)
    return _values_array(values, dt, np_dtype, name, field).reshape(shape)


def _strings_from_content(content, count, name):
    """The `count` strings of a DT_STRING `tensor_content`, in TensorFlow's encoding
    (`port::EncodeStringList`: each length as a varint32, then the bytes of all, in order); content
    that is not exactly that is INVALID_ARGUMENT, as TensorFlow's reader refuses it."""
    lengths, position = [], 0
    for _ in range(count):
        length = shift = 0
        while True:
            if position >= len(content) or shift > 28:
                raise _invalid(name, f"tensor_content is not {count} strings in TensorFlow's encoding "
                                     "(varint32 lengths, then the bytes)")
            byte = content[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        lengths.append(length)
    if position + sum(lengths) != len(content):
        raise _invalid(name, f"tensor_content has {len(content)} bytes; {count} strings of lengths "
                             f"{lengths[:8]}{'...' if count > 8 else ''} need {position + sum(lengths)}")
    array = np.empty(count, dtype=object)
    for i, length in enumerate(lengths):
        array[i] = content[position:position + length]
        position += length
    return array


def _values_array(values, dt, np_dtype, name, field):
    """The flat numeric array of a typed repeated field; integers out of range refused."""
    if dt == DT_HALF:  # half_val: each value's 16 bits in an int32
        bits = np.array(values, dtype=np.int64)
        if bits.size and (bits.min() < 0 or bits.max() > 0xFFFF):
            raise _invalid(name, "half_val holds values outside [0, 65535] (each is the 16 bits of "
                                 "one float16)")
        return bits.astype(np.uint16).view(np.float16)
    if np_dtype.kind in "iu" and field == "int_val" and dt != DT_INT32:
        wide = np.array(values, dtype=np.int64)
        info = np.iinfo(np_dtype)
        if wide.size and (wide.min() < info.min or wide.max() > info.max):
            raise _invalid(name, f"int_val holds values outside the range of {dtype_name(dt)} "
                                 f"[{info.min}, {info.max}]")
        return wide.astype(np_dtype)
    return np.array(values, dtype=np_dtype)


def _filled(values, count, shape, dt, np_dtype, name, field):
    """The short form: `values` then its last value (or the dtype's zero) up to `count`."""
    if dt == DT_STRING:
        array = np.empty(count, dtype=object)
        array[:] = values[-1] if len(values) else b""
        array[: len(values)] = list(values)
        return array.reshape(shape)
    head = _values_array(values, dt, np_dtype, name, field) if len(values) else np.zeros(0, np_dtype)
    array = np.full(count, head[-1] if head.size else 0, dtype=np_dtype)
    array[: head.size] = head
    return array.reshape(shape)


def proto_from_ndarray(array: np.ndarray, proto=None):
    """A TensorProto for a numpy array (object/bytes/str arrays become DT_STRING).

    Args:
        array: Output of a signature (or any array).
        proto: An empty TensorProto to fill in place (e.g. `response.outputs[name]`, which
            saves copying the content a second time); a new one when None.
    """
    if proto is None:
        from tensorflow.core.framework import tensor_pb2

        proto = tensor_pb2.TensorProto()
    array = np.asarray(array)
    dt = _DT_OF_NUMPY.get(array.dtype)
    if dt is not None:
        proto.dtype = dt
        proto.tensor_content = np.ascontiguousarray(array).tobytes()
    elif array.dtype == object or array.dtype.kind in "SU":
        flat = array.ravel().tolist()
        if not all(type(v) is bytes for v in flat):
            flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in flat]
        proto.dtype = DT_STRING
        proto.string_val.extend(flat)
    else:  # big-endian or exotic dtypes: let TF decide
        import tensorflow as tf

        proto.CopyFrom(tf.make_tensor_proto(array))
        return proto
    dims = proto.tensor_shape.dim
    for size in array.shape:
        dims.add().size = size
    return proto


def serialized_examples_from_input(input_proto, limits: Limits | None = None) -> list:
    """Serialized tf.Examples of a Classify/Regress `tensorflow.serving.Input` proto.

    With `example_list_with_context`, the context's bytes are prepended to each example's,
    as TF Serving does (a tf.Example parses the concatenation as the merged features).

    Args:
        input_proto: A `tensorflow.serving.Input`.
        limits: Checked on the merged size (`check_examples_size`) before any merged example
            exists; None checks nothing.
    """
    which = input_proto.WhichOneof("kind")
    if which == "example_list":
        examples, context = input_proto.example_list.examples, b""
    elif which == "example_list_with_context":
        examples = input_proto.example_list_with_context.examples
        context = input_proto.example_list_with_context.context.SerializeToString()
    else:
        return []
    if limits is not None:
        check_examples_size(len(examples), len(context), sum(ex.ByteSize() for ex in examples), limits)
    return [context + ex.SerializeToString() for ex in examples]
