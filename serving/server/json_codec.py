"""The REST codec: TF Serving's JSON bodies <-> numpy, with every client mistake a clear 400.

- `DecodeBudget` + `decoded_json_bytes`: JSON values decoded at once are bounded in memory,
  not only in wire bytes: `[],` is 3 bytes of body and about 90 bytes of Python objects, so a
  body within `max_request_bytes` could decode to 30 times its size; its bound is checked
  from the body's text before the decoder runs.
- `parse_json_body`: bytes -> the JSON object, refusing what Python's json module would
  accept but TF Serving's decoder does not (NaN / Infinity, numbers that overflow a double),
  and turning every decoder failure (malformed text, nesting deeper than the recursion limit,
  integers of more than 4,300 digits) into INVALID_ARGUMENT.
- `decode_predict_json` / `json_to_ndarray`: the row ("instances") or columnar ("inputs")
  format, {"b64": ...} for bytes. Nesting is walked level by level and never deeper than the
  input's rank; every value is checked against the dtype's range (4294967297 for DT_INT32
  is an error, never wrapped to 1); shape, rows, bytes and the token budget are checked on
  the shape before the numpy array exists (`request_validation.check_declared_size`).
- `encode_predict_json` ("predictions" / "outputs"), `examples_from_json` +
  `example_from_features` (:classify / :regress bodies) and the result encoders.

Example:
    >>> from serving.server.signatures import TensorSpecInfo, DT_INT32
    >>> spec = {"ids": TensorSpecInfo("ids", DT_INT32, (None, None))}
    >>> arrays, columnar = decode_predict_json(parse_json_body(b'{"inputs": {"ids": [[1, 2]]}}'), spec)
    >>> arrays["ids"].tolist(), columnar
    ([[1, 2]], True)
    >>> decode_predict_json({"inputs": {"ids": [[4294967297]]}}, spec)
    Traceback (most recent call last):
    ...
    serving.server.errors.ServingError: INVALID_ARGUMENT: input 'ids': 4294967297 is out of range for DT_INT32 [-2147483648, 2147483647]
"""

from __future__ import annotations

import base64
import json
import math
import re
import sys
import threading
import time
from contextlib import contextmanager
from typing import Mapping

import numpy as np

from pipelines.json_objects import RepeatedKeyError, object_of_unique_keys
from serving.server.errors import ServingError, name_list
from serving.server.request_validation import STRING_ELEMENT_BYTES, Limits, check_declared_size, check_examples_size
from serving.server.signatures import DT_BOOL, DT_STRING, TensorSpecInfo, dtype_name

MAX_RANK = 32  # nesting of a tensor of unknown rank


def _bad_json(message):
    return ServingError("INVALID_ARGUMENT", message)


def _no_constant(name):
    raise _bad_json(f"malformed JSON: {name} is not a number TF Serving accepts")


def _finite_float(text):
    value = float(text)
    if math.isinf(value):
        raise _bad_json(f"malformed JSON: number {text[:40]} overflows a double")
    return value


# An upper bound of the Python memory of one decoded JSON value: a list or dict (56-232 bytes
# and its slot in its parent), a str (49 bytes + its text, counted in the body's length), an
# int (28) or a float (24). Every value after a container's first follows a "," and every
# container opens with "[" or "{", so values <= their count + 1, counted outside string
# literals (a text full of commas is one value).
DECODED_BYTES_PER_VALUE = 96

# A JSON string literal, in the unrolled form whose runs of plain characters the regex engine
# scans in C (no backtracking). An unterminated one runs to the end of the body (where JSON's
# parser stops too): had it to end with a quote, the engine would try again from every later
# quote, each time to the end, and a 40 KB body of escaped quotes held the GIL for seconds.
_STRING_LITERAL = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)


def decoded_json_bytes(body: bytes) -> int:
    """An upper bound of the memory `json.loads(body)` takes, from the text alone (C-speed scans)."""
    structure = _STRING_LITERAL.sub(b'""', body)
    values = structure.count(b",") + structure.count(b"[") + structure.count(b"{") + 1
    return len(body) + DECODED_BYTES_PER_VALUE * values


class DecodeBudget:
    """Bytes of decoded JSON held at once by all requests (thread-safe).

    `hold(body)` waits until the body's decoded bound fits beside the requests being
    answered, up to `wait_s`, then UNAVAILABLE (503: retry later); a body whose bound alone
    is over the budget is RESOURCE_EXHAUSTED (429) at once, before anything is decoded.
    """

    def __init__(self, budget_bytes, wait_s=30.0):
        self.budget_bytes = int(budget_bytes)
        self.wait_s = wait_s
        self._held = 0
        self._room = threading.Condition()

    @contextmanager
    def hold(self, body: bytes):
        need = decoded_json_bytes(body)
        if need > self.budget_bytes:
            raise ServingError(
                "RESOURCE_EXHAUSTED",
                f"request body of {len(body):,} bytes holds up to {need // DECODED_BYTES_PER_VALUE:,} JSON "
                f"values, about {need / 2**20:,.0f} MiB decoded: over the server's "
                f"{self.budget_bytes / 2**20:,.0f} MiB for decoded requests; send fewer values per request")
        deadline = time.monotonic() + self.wait_s
        with self._room:
            while self._held and self._held + need > self.budget_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServingError("UNAVAILABLE", "the server is decoding too many large JSON requests; "
                                                      "retry later")
                self._room.wait(left)
            self._held += need
        try:
            yield
        finally:
            with self._room:
                self._held -= need
                self._room.notify_all()


def parse_json_body(body: bytes):
    """The JSON object of a request body.

    Raises:
        ServingError: INVALID_ARGUMENT for an empty body, text that is not UTF-8 or not JSON,
            NaN / Infinity / overflowing numbers, integers over 4,300 digits, nesting beyond
            Python's recursion limit, a key repeated in one object, or a top level that is not
            an object.
    """
    if not body:
        raise _bad_json("empty request body: expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _bad_json(f"malformed JSON: request body is not UTF-8 (byte {error.start})") from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                           object_pairs_hook=object_of_unique_keys)
    except ServingError:
        raise
    except RepeatedKeyError as error:  # Python's decoder keeps the last value, TF Serving's (RapidJSON) the first:
        # the same request meant two things (`{"instances": ["a"], "instances": ["b", "c"]}`)
        raise _bad_json(f"malformed JSON: key {error.args[0][:100]!r} appears more than once in one object "
                        "(servers differ on which one they read): send it once") from None
    except json.JSONDecodeError as error:
        raise _bad_json(f"malformed JSON in request body: {error.msg} at line {error.lineno} column "
                        f"{error.colno} (char {error.pos})") from None
    except RecursionError:
        raise _bad_json("malformed JSON: nesting is too deep") from None
    except ValueError:  # int() of more than sys.get_int_max_str_digits() digits
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise _bad_json(f"malformed JSON: a number has more than {limit} digits") from None
    if not isinstance(value, dict):
        raise _bad_json(f"request body must be a JSON object, got {type(value).__name__}")
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value)
    return value


# Python's decoder turns "\ud800" into a str no UTF-8 encoder accepts; TF Serving's (RapidJSON)
# refuses it. Only an escape can make one (the body decoded as UTF-8 holds none), so the
# walk below runs only when the text has a surrogate escape at all.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_lone_surrogates(value):
    """INVALID_ARGUMENT when a key or string of `value` holds an unpaired UTF-16 surrogate."""
    stack = [value]
    while stack:  # iterative: the nesting is as deep as the decoder allowed
        item = stack.pop()
        if isinstance(item, str):
            strings = (item,)
        elif isinstance(item, dict):
            strings = item.keys()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for text in strings:
            match = _LONE_SURROGATE.search(text)
            if match:
                raise _bad_json(f"malformed JSON: the string escape \\u{ord(match.group(0)):04x} is a lone UTF-16 "
                                "surrogate (not a character); escape characters above U+FFFF as a surrogate pair")


def _is_b64(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and "b64" in value


def _b64decode(value, where):
    data = value["b64"]
    if not isinstance(data, str):
        raise _bad_json(f'{where}: value of "b64" must be a string')
    if len(data) % 4 in (2, 3) and not data.endswith("="):
        data += "=" * (4 - len(data) % 4)  # padding is optional, as in TF Serving's absl::Base64Unescape
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise _bad_json(f'{where}: value of "b64" is not valid base64') from None


def _flatten(value, max_rank, where, shape_text):
    """(shape, flat leaves) of nested lists, walked level by level; ragged or too deep -> 400."""
    shape = []
    level = [value]
    while True:
        lists = sum(type(v) is list for v in level)
        if lists == 0:
            return tuple(shape), level
        if lists != len(level):
            raise _bad_json(f"{where}: nested lists have different depths")
        if len(shape) >= max_rank:
            raise _bad_json(f"{where}: lists nested {len(shape) + 1} deep, but its shape {shape_text} has rank {max_rank}")
        size = len(level[0])
        if any(len(v) != size for v in level):
            raise _bad_json(f"{where}: nested lists have different lengths")
        shape.append(size)
        if size == 0:
            return tuple(shape), []
        level = [item for v in level for item in v]


def _string_leaf(value, where):
    if type(value) is str:
        return value.encode("utf-8")
    if _is_b64(value):
        return _b64decode(value, where)
    raise _bad_json(f'{where}: expected a string or {{"b64": ...}} for a DT_STRING input, '
                    f"got {type(value).__name__}")


def _numeric_leaves(leaves, spec, where, finite=True):
    """Leaves as a flat numpy array of `spec`'s dtype; type and range checked, never wrapped.

    `finite=False` (a client reading a response) lets NaN / Infinity outputs through.
    """
    np_dtype = spec.np_dtype
    name = dtype_name(spec.dtype)
    if spec.dtype == DT_BOOL:
        if not all(type(v) is bool for v in leaves):
            raise _bad_json(f"{where}: expected true/false for DT_BOOL")
        return np.array(leaves, dtype=np.bool_)
    kinds = {type(v) for v in leaves}
    if not kinds <= {int, float}:
        bad = next(v for v in leaves if type(v) not in (int, float))
        raise _bad_json(f"{where}: expected numbers for {name}, got {type(bad).__name__} {json.dumps(bad)[:60]}")
    if np_dtype.kind in "iu":
        if float in kinds:
            if not all(type(v) is int or v.is_integer() for v in leaves):
                raise _bad_json(f"{where}: expected integers for {name}, got fractional values")
            leaves = [int(v) for v in leaves]
        info = np.iinfo(np_dtype)
        if leaves:
            low, high = min(leaves), max(leaves)
            for bad in (low, high):
                if not info.min <= bad <= info.max:
                    text = str(bad) if abs(bad) < 10**40 else f"an integer of {bad.bit_length()} bits"
                    raise _bad_json(f"{where}: {text} is out of range for {name} [{info.min}, {info.max}]")
        return np.array(leaves, dtype=np_dtype)
    if np_dtype.kind == "c":
        raise _bad_json(f"{where}: {name} values cannot be written in JSON (TF Serving's REST API has no "
                        "complex numbers); send them over gRPC")
    try:
        wide = np.array(leaves, dtype=np.float64)
    except OverflowError:
        raise _bad_json(f"{where}: a number is out of range for {name}") from None
    largest = _float_max(np_dtype)
    if finite and wide.size and np.abs(wide).max() > largest:
        raise _bad_json(f"{where}: a number is out of range for {name} (largest {largest})")
    return wide.astype(np_dtype)


def _float_max(np_dtype) -> float:
    """The largest finite value of a float dtype, bfloat16 (an ml_dtypes type numpy's finfo refuses) included."""
    try:
        return float(np.finfo(np_dtype).max)
    except ValueError:
        import ml_dtypes  # TensorFlow's own dependency: bfloat16 and the float8 types

        return float(ml_dtypes.finfo(np_dtype).max)


def json_to_ndarray(value, spec: TensorSpecInfo, where: str, limits: Limits | None = None) -> np.ndarray:
    """A JSON value (nested lists) as a numpy array of `spec`'s dtype.

    Args:
        value: The decoded JSON value.
        spec: The signature input (or output) it is read as: dtype and rank decide.
        where: Prefix for error messages, e.g. "input 'text'".
        limits: Request limits checked on the shape before the array is built (None: none,
            for a client reading a response).
    """
    max_rank = len(spec.shape) if spec.shape is not None else MAX_RANK
    shape, leaves = _flatten(value, max_rank, where, spec.shape_text())
    if limits is not None:
        name = spec.name
        check_declared_size(name, shape, STRING_ELEMENT_BYTES if spec.dtype == DT_STRING else spec.np_dtype.itemsize,
                            limits)
    if spec.dtype == DT_STRING:
        array = np.empty(len(leaves), dtype=object)
        array[:] = [_string_leaf(v, where) for v in leaves]
    else:
        array = _numeric_leaves(leaves, spec, where, finite=limits is not None)
    return array.reshape(shape)


def decode_predict_json(body: Mapping, inputs: Mapping[str, TensorSpecInfo], limits: Limits | None = None):
    """Numpy inputs from a REST predict body, in TF Serving's row or columnar format.

    Row format: {"instances": [row, ...]} where a row is a value (single-input signature)
    or {"input name": value, ...}. Columnar: {"inputs": value} or {"inputs": {"name": value}}.
    Bytes are {"b64": "..."}; plain strings are UTF-8.

    Args:
        body: The decoded JSON object.
        inputs: The signature's inputs.
        limits: The request limits (see `json_to_ndarray`).

    Returns:
        (dict of numpy arrays, columnar) where `columnar` says which response format to use.
    """
    if not isinstance(body, Mapping):
        raise _bad_json("request body must be a JSON object")
    has_rows, has_cols = "instances" in body, "inputs" in body
    if has_rows == has_cols:
        raise _bad_json('request must have exactly one of "instances" (row format) or "inputs" (columnar format)')
    names = list(inputs)

    def read(name, value):
        return json_to_ndarray(value, inputs[name], f"input '{name}'", limits)

    if has_rows:
        rows = body["instances"]
        if not isinstance(rows, list):
            raise _bad_json('"instances" must be a list')
        if not rows:
            raise _bad_json('"instances" is empty')
        named = isinstance(rows[0], dict) and not _is_b64(rows[0])
        if not named:
            if len(names) != 1:
                raise _bad_json(
                    f"signature has {len(names)} inputs {names}: each instance must be an object "
                    '{"input name": value, ...}'
                )
            return {names[0]: read(names[0], rows)}, False
        keys = set(rows[0])
        columns = {key: [] for key in rows[0]}
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or _is_b64(row):
                raise _bad_json(f"instance {i} is not an object like instance 0")
            if row.keys() != keys:
                raise _bad_json(f"instance {i} has inputs {name_list(row)} but instance 0 has {name_list(keys)}")
            for key, value in row.items():
                columns[key].append(value)
        _check_names(columns, names)
        return {k: read(k, v) for k, v in columns.items()}, False
    value = body["inputs"]
    if isinstance(value, dict) and not _is_b64(value):
        _check_names(value, names)
        return {k: read(k, v) for k, v in value.items()}, True
    if len(names) != 1:
        raise _bad_json(f'signature has {len(names)} inputs {names}: "inputs" must be an object keyed by input name')
    return {names[0]: read(names[0], value)}, True


def _check_names(given, names):
    unknown = set(given) - set(names)
    if unknown:
        raise _bad_json(f"unknown input(s) {name_list(unknown)}; signature inputs: {name_list(names, limit=20)}")


def _json_strings(array: np.ndarray, binary: bool):
    """Nested lists of str (UTF-8) or {"b64": ...} (binary or not UTF-8) for a string array."""

    def one(v):
        if not binary:
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return {"b64": base64.b64encode(v).decode("ascii")}

    if array.ndim == 0:
        return one(array.item())
    flat = [one(v) for v in array.ravel().tolist()]
    return np.array(flat, dtype=object).reshape(array.shape).tolist() if array.ndim > 1 else flat


def ndarray_to_json(array: np.ndarray, name: str = ""):
    """A numpy array as JSON-ready nested lists (strings decoded; "*_bytes" names -> b64).

    Raises:
        ServingError: UNIMPLEMENTED for complex outputs, which JSON (and TF Serving's REST API)
            cannot hold.
    """
    if array.dtype == object or array.dtype.kind in "SU":
        if array.dtype.kind == "U":
            return array.tolist()
        return _json_strings(array, binary=name.endswith("_bytes"))
    if array.dtype.kind == "c":
        raise ServingError("UNIMPLEMENTED", f"output '{name}' is {array.dtype.name}, which the REST API cannot "
                                            "write as JSON; ask for it over gRPC, or leave it out with the "
                                            "gRPC output_filter")
    if array.dtype.kind not in "biuf":  # bfloat16 and other ml_dtypes floats: their items are not JSON numbers
        return array.astype(np.float32).tolist()
    return array.tolist()


def encode_predict_json(outputs: Mapping[str, np.ndarray], columnar: bool) -> dict:
    """The REST predict response body for signature outputs.

    Row format answers {"predictions": [...]}: one value per row for a single output, else
    one {"output name": value} object per row (all outputs must share the batch dim).
    Columnar format answers {"outputs": value | {"name": value}}.

    Args:
        outputs: {name: numpy array}.
        columnar: True for requests that used "inputs".
    """
    if columnar:
        if len(outputs) == 1:
            ((name, array),) = outputs.items()
            return {"outputs": ndarray_to_json(array, name)}
        return {"outputs": {k: ndarray_to_json(v, k) for k, v in outputs.items()}}
    if len(outputs) == 1:
        ((name, array),) = outputs.items()
        if array.ndim == 0:
            raise ServingError(
                "INVALID_ARGUMENT",
                f"output '{name}' is a scalar and cannot be returned per instance; use the columnar \"inputs\" format",
            )
        return {"predictions": ndarray_to_json(array, name)}
    batch = None
    columns = {}
    for name, array in outputs.items():
        if array.ndim == 0 or (batch is not None and array.shape[0] != batch):
            raise ServingError(
                "INVALID_ARGUMENT",
                f"output '{name}' has shape {list(array.shape)}, which does not share the batch dimension "
                f"of the other outputs; use the columnar \"inputs\" format",
            )
        batch = array.shape[0]
        columns[name] = ndarray_to_json(array, name)
    names = list(columns)
    return {"predictions": [{n: columns[n][i] for n in names} for i in range(batch)]}


_INT64 = np.iinfo(np.int64)


def _feature_value(value, where, depth=0):
    if _is_b64(value):
        return _b64decode(value, where)
    if type(value) is list and depth == 0:
        return [_feature_value(v, where, 1) for v in value]
    if type(value) is int and not _INT64.min <= value <= _INT64.max:
        raise _bad_json(f"{where}: an integer of {value.bit_length()} bits is out of the int64 range of a tf.Example")
    if isinstance(value, (str, bool, int, float)):
        return value
    raise _bad_json(f"{where}: a feature is a string, {{\"b64\": ...}}, a number or a flat list of them; "
                    f"got {json.dumps(value)[:60]}")


def examples_from_json(body: Mapping):
    """(examples, context) from a REST classify/regress body {"examples": [...], "context": {...}}.

    Feature values: strings (UTF-8 bytes), {"b64": ...}, ints, floats, or flat lists of one kind.
    """
    if not isinstance(body, Mapping):
        raise _bad_json("request body must be a JSON object")
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise _bad_json('"examples" must be a non-empty list of objects')
    out = []
    for i, ex in enumerate(examples):
        if not isinstance(ex, dict):
            raise _bad_json(f"example {i} must be an object of features")
        out.append({k: _feature_value(v, f"example {i} feature '{k[:64]}'") for k, v in ex.items()})
    context = body.get("context")
    if context is not None:
        if not isinstance(context, dict):
            raise _bad_json('"context" must be an object of features')
        context = {k: _feature_value(v, f"context feature '{k[:64]}'") for k, v in context.items()}
    return out, context


def serialized_examples(examples, context, limits: Limits | None = None) -> list:
    """Serialized tf.Examples of feature dicts; a context is prepended to each (TF Serving's merge).

    Args:
        examples: Feature dicts (from `examples_from_json`).
        context: The shared context's feature dict, or None.
        limits: Checked on the merged size (`check_examples_size`) before anything is merged.
    """
    prefix = example_from_features(context, "context").SerializeToString() if context else b""
    if limits is not None and len(examples) > limits.max_batch_size_per_request:
        check_examples_size(len(examples), len(prefix), 0, limits)  # too many: refused before building them
    serialized = [example_from_features(ex, f"example {i}").SerializeToString() for i, ex in enumerate(examples)]
    if limits is not None:
        check_examples_size(len(serialized), len(prefix), sum(map(len, serialized)), limits)
    return [prefix + ex for ex in serialized] if prefix else serialized


def example_from_features(features: Mapping, where: str = "example"):
    """A tf.train.Example from {name: str | bytes | int | float | list of one of them}."""
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    for key, value in features.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        feature = example.features.feature[key]
        if all(isinstance(v, (str, bytes)) for v in values):
            feature.bytes_list.value.extend(v.encode("utf-8") if isinstance(v, str) else v for v in values)
        elif all(isinstance(v, (int, bool)) for v in values):
            feature.int64_list.value.extend(int(v) for v in values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            feature.float_list.value.extend(float(v) for v in values)
        else:
            raise ServingError(
                "INVALID_ARGUMENT", f"{where} feature '{key}': values must all be strings, all ints or all numbers"
            )
    return example


def classify_results_json(results) -> dict:
    """REST classify body {"results": [[[label, score], ...], ...]} from engine results."""
    return {"results": [[[label, score] for label, score in row] for row in results]}


def regress_results_json(results) -> dict:
    """REST regress body {"results": [value, ...]}."""
    return {"results": list(results)}


def signature_def_map_json(sig_map) -> dict:
    """The REST /metadata "signature_def" body: the SignatureDefMap as proto JSON, every field
    printed as TF Serving prints it (`always_print_fields_with_no_presence`, proto field names):
    default values too, so each signature has "inputs", "outputs", "method_name" and "defaults"
    (`__saved_model_init_op`'s "method_name" is ""), each tensor "name", "dtype" and
    "tensor_shape" with "unknown_rank", each dimension "size" and "name". A client written against
    TF Serving that reads `signature["method_name"]` or `dim["name"]` finds them here too."""
    import inspect

    from google.protobuf import json_format

    # protobuf >= 5.26 renamed `including_default_value_fields`; one of them is there.
    option = ("always_print_fields_with_no_presence"
              if "always_print_fields_with_no_presence" in inspect.signature(json_format.MessageToDict).parameters
              else "including_default_value_fields")
    return json_format.MessageToDict(sig_map, preserving_proto_field_name=True, **{option: True})
