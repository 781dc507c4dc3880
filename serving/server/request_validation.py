"""Check a request's inputs against its signature before it is batched or run.

A bad request must fail alone, with INVALID_ARGUMENT naming the input (and row) at fault,
and never reach a batch it would make fail for everyone. Checked, in order: input names
(missing / extra), dtype, rank and known dimensions, empty batch, rows over
`Limits.max_batch_size_per_request` (RESOURCE_EXHAUSTED), request size, and for text inputs
(string inputs of predict signatures, see `SignatureInfo.text_inputs`) invalid UTF-8. The
model's graph makes the same UTF-8 check (so real TF Serving rejects it too); checking here
first gives a readable message and keeps the bad row out of a merged batch.

A text with no token (empty, only whitespace, or only characters BERT's cleaning drops, such
as U+200B) is NOT refused: it is a valid request, passed to the model, which answers it as it
answers an empty input (`[CLS] [SEP]`) and flags the row with its `empty` output
(`serving/signatures/text_inputs.py`), as `predict` does in Python.

`check_declared_size` is the part both codecs call on a DECLARED shape, before they allocate:
rows, bytes and the token budget of a `token_ids` input (rows x sequence length,
RESOURCE_EXHAUSTED with the limit in the message).

Example:
    >>> import numpy as np
    >>> from serving.server.signatures import SignatureInfo, TensorSpecInfo, DT_STRING
    >>> sig = SignatureInfo("serving_default", "tensorflow/serving/predict",
    ...                     {"text": TensorSpecInfo("text", DT_STRING, (None,))}, {})
    >>> arrays, rows = validate_inputs(sig, {"text": np.array([b"hi"], dtype=object)}, Limits())
    >>> rows
    1
    >>> validate_inputs(sig, {"text": np.array([b"hi", b" "], dtype=object)}, Limits())[1]  # answered
    2
    >>> validate_inputs(sig, {"text": np.array([b"hi", b"caf\\xc3"], dtype=object)}, Limits())
    Traceback (most recent call last):
    ...
    serving.server.errors.ServingError: INVALID_ARGUMENT: input 'text' row 1: invalid UTF-8 at byte 3
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import numpy as np

from serving.server.errors import ServingError, name_list
from serving.server.signatures import DT_STRING, SignatureInfo, dtype_name

_OBJECT = np.dtype(object)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-request limits.

    Args:
        max_batch_size_per_request: Most rows one request may send (RESOURCE_EXHAUSTED above).
        max_request_bytes: Most bytes of input data in one request (RESOURCE_EXHAUSTED above).
        max_string_bytes: Longest single string (INVALID_ARGUMENT above). A 1 MB text is fine:
            models truncate long text, they do not fail on it.
        max_tokens_per_request: Most elements of a `token_ids` input (rows x sequence length)
            in one request (RESOURCE_EXHAUSTED above): the cost bound of the token signatures.
        max_windows_per_request: Most windows one request of a long-text signature may read
            (its texts' windows at most, each non-whitespace byte a possible piece:
            `serving.server.window_cost`;
            RESOURCE_EXHAUSTED above): the cost bound of the windowed signatures, whose rows
            alone allow 1,024 documents of `max_length` pieces. The default, 1,024, keeps one
            request to a few seconds of a MiniLM-sized model on two cores (docs/serving.md).
    """

    max_batch_size_per_request: int = 1024
    max_request_bytes: int = 64 << 20
    max_string_bytes: int = 16 << 20
    max_tokens_per_request: int = 16384
    max_windows_per_request: int = 1024

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if getattr(self, field.name) < 1:
                raise ValueError(f"Limits.{field.name} must be >= 1, got {getattr(self, field.name)}")

    def for_warmup(self) -> Limits:
        """The limits a version's own warmup records are replayed under (`serving.server.warmup`).

        The cost limits (rows, tokens, windows per request) are the operator's bound on what a
        CLIENT may ask; the export's warmup requests (8 rows of sample texts, a long-text model's
        windows) are the model's, run once at load. Held to them, `--max-rows-per-request 4` or a
        low `--max-windows-per-request` failed every load with RESOURCE_EXHAUSTED and the model was
        never served. The byte limits stay (at least the defaults): they guard the parser against
        a corrupt record declaring a huge shape.
        """
        lifted = _UNBOUNDED
        return dataclasses.replace(
            self, max_batch_size_per_request=lifted, max_tokens_per_request=lifted, max_windows_per_request=lifted,
            max_request_bytes=max(self.max_request_bytes, Limits.max_request_bytes),
            max_string_bytes=max(self.max_string_bytes, Limits.max_string_bytes))


_UNBOUNDED = 1 << 62  # a cost limit lifted (`Limits.for_warmup`): rows are still bounded by the bytes


TOKEN_INPUT = "token_ids"  # the input whose element count is the token budget's measure
# What one string element costs the server at least (a Python bytes object and its pointer),
# counted against max_request_bytes: a message of a million empty strings is not small.
STRING_ELEMENT_BYTES = 64


def check_declared_size(name: str, shape, itemsize: int, limits: Limits, where: str = "") -> None:
    """Refuse a declared shape over the limits, before any array of that shape exists.

    Args:
        name: The input's name (`token_ids` is held to `limits.max_tokens_per_request`).
        shape: Declared dimensions (ints).
        itemsize: Bytes per element (`STRING_ELEMENT_BYTES` for strings, whose own bytes are
            counted again as they are checked).
        limits: The request limits.
        where: Message prefix.

    Raises:
        ServingError: RESOURCE_EXHAUSTED naming the limit.
    """
    if shape and shape[0] > limits.max_batch_size_per_request:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"{where}input '{name}' has {shape[0]} rows; the limit per request is "
            f"{limits.max_batch_size_per_request}",
        )
    count = math.prod(shape)
    if count * itemsize > limits.max_request_bytes:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"{where}input '{name}' of shape {list(shape)} needs {count * itemsize} bytes; the limit is "
            f"{limits.max_request_bytes}",
        )
    if name == TOKEN_INPUT and count > limits.max_tokens_per_request:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"{where}input '{name}' of shape {list(shape)} holds {count} tokens (rows x sequence length); "
            f"the limit per request is {limits.max_tokens_per_request} (--max-tokens-per-request)",
        )


def check_window_count(windows: int, texts: int, limits: Limits, where: str = "") -> None:
    """RESOURCE_EXHAUSTED when a request's `texts` may read up to `windows` windows, over the limit."""
    if windows > limits.max_windows_per_request:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"{where}{texts} text(s) may read up to {windows} windows (each byte that is not whitespace "
            f"may be a word piece), more "
            f"than the limit of {limits.max_windows_per_request} windows per request "
            "(--max-windows-per-request): send fewer or shorter texts per request")


def check_examples_size(count: int, context_bytes: int, example_bytes: int, limits: Limits) -> None:
    """Refuse Classify / Regress examples over the limits before they are merged with their context.

    TF Serving's merge prepends the context to every example, so a request of `count` examples
    and one shared context becomes `count x context_bytes + example_bytes` bytes: a 1 MB context
    and 1,000 tiny examples make 1 GB from a 1 MB request. Counted here, on sizes alone.

    Args:
        count: Number of examples.
        context_bytes: Serialized size of the shared context (0 without one).
        example_bytes: Serialized size of all examples together.
        limits: The request limits (rows: `max_batch_size_per_request`; bytes: `max_request_bytes`,
            each example also costing `STRING_ELEMENT_BYTES` as a string element).

    Raises:
        ServingError: RESOURCE_EXHAUSTED naming the limit.
    """
    if count > limits.max_batch_size_per_request:
        raise ServingError("RESOURCE_EXHAUSTED", f"request has {count} examples; the limit per request is "
                                                 f"{limits.max_batch_size_per_request}")
    merged = count * (context_bytes + STRING_ELEMENT_BYTES) + example_bytes
    if merged > limits.max_request_bytes:
        shared = f" with the context of {context_bytes} bytes copied into each" if context_bytes else ""
        raise ServingError("RESOURCE_EXHAUSTED", f"request has {count} examples{shared}: {merged} bytes of input; "
                                                 f"the limit is {limits.max_request_bytes}")


def _invalid(where, message):
    return ServingError("INVALID_ARGUMENT", f"{where}{message}")


def _as_string_array(name, value, where):
    """An object array of bytes for a DT_STRING input (str elements are UTF-8 encoded)."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object)
    if array.dtype.kind == "U":
        encoded = np.empty(array.size, dtype=object)
        encoded[:] = [s.encode("utf-8") for s in array.ravel().tolist()]
        array = encoded.reshape(array.shape)
    elif array.dtype.kind == "S":
        array = array.astype(object)
    elif array.dtype != _OBJECT:
        raise _invalid(where, f"input '{name}' expects DT_STRING but got {array.dtype} values")
    return array


def _check_strings(name, array, text, limits, where):
    """Types, sizes and (for text inputs) UTF-8; returns total bytes. A text with no token passes."""
    total = 0
    converted = None
    row_size = (math.prod(array.shape[1:]) or 1) if array.ndim >= 1 else 1
    for index, value in enumerate(array.flat):
        if type(value) is not bytes:
            if isinstance(value, str):
                value = value.encode("utf-8")
            elif isinstance(value, (bytes, bytearray, memoryview)):
                value = bytes(value)
            else:
                raise _invalid(
                    where, f"input '{name}' row {index // row_size}: expected bytes or str, got {type(value).__name__}"
                )
            if converted is None:
                converted = array.copy() if array.ndim else np.array(array, dtype=object)
            converted.flat[index] = value
        size = len(value)
        total += size
        if size > limits.max_string_bytes:
            raise _invalid(
                where,
                f"input '{name}' row {index // row_size}: string of {size} bytes exceeds the limit of "
                f"{limits.max_string_bytes} bytes",
            )
        if text:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _invalid(
                    where, f"input '{name}' row {index // row_size}: invalid UTF-8 at byte {exc.start}"
                ) from None
    return (array if converted is None else converted), total


def validate_inputs(signature: SignatureInfo, inputs: Mapping, limits: Limits, *, where: str = ""):
    """Check and normalise a request's inputs.

    Args:
        signature: The signature the request runs.
        inputs: {input name: numpy array (or nested lists / str)}. Numeric ndarrays must have
            the signature's exact dtype (as in TF Serving); plain lists are converted to it.
            String inputs accept object arrays of bytes/str and numpy str/bytes arrays.
        limits: Size limits.
        where: Message prefix naming model/version/signature, e.g. "model 'm' version 1: ".

    Returns:
        (arrays, rows): {name: numpy array} ready for tf.constant (strings as object arrays of
        bytes), and the batch size (dim 0 shared by every input), or None when the inputs do
        not share one (such a request runs unbatched).

    Raises:
        ServingError: INVALID_ARGUMENT naming the input / row, or RESOURCE_EXHAUSTED for size limits.
    """
    specs = signature.inputs
    if inputs.keys() != specs.keys():
        missing = set(specs) - set(inputs)
        extra = set(inputs) - set(specs)
        parts = []
        if missing:
            parts.append(f"missing input(s) {name_list(missing, limit=20)}")
        if extra:  # the client's names: thousands of them must not make a huge message
            parts.append(f"unknown input(s) {name_list(extra)}")
        raise _invalid(
            where, f"{'; '.join(parts)}; signature '{signature.name}' takes inputs {name_list(specs, limit=20)}"
        )
    text_inputs = signature.text_inputs
    arrays = {}
    total_bytes = 0
    dims0 = {}
    for name, spec in specs.items():
        value = inputs[name]
        if spec.dtype == DT_STRING:
            array = _as_string_array(name, value, where)
        else:
            expected = spec.np_dtype
            if isinstance(value, np.ndarray):
                array = value
                if array.dtype != expected:
                    raise _invalid(
                        where,
                        f"input '{name}' expects {dtype_name(spec.dtype)} ({expected}) but got {array.dtype}",
                    )
            else:
                try:
                    array = np.asarray(value, dtype=expected)
                except (TypeError, ValueError) as exc:
                    raise _invalid(where, f"input '{name}': cannot convert to {expected}: {exc}") from None
        if spec.shape is not None:
            if array.ndim != len(spec.shape) or any(
                want is not None and got != want for got, want in zip(array.shape, spec.shape)
            ):
                raise _invalid(
                    where,
                    f"input '{name}' expects shape {spec.shape_text()} but got {list(array.shape)}",
                )
        itemsize = STRING_ELEMENT_BYTES if spec.dtype == DT_STRING else array.itemsize
        check_declared_size(name, array.shape, itemsize, limits, where)
        if array.ndim >= 1:
            if array.shape[0] == 0:
                raise _invalid(where, f"input '{name}' has an empty batch (dimension 0 is 0)")
            dims0[name] = array.shape[0]
        if spec.dtype == DT_STRING:
            array, size = _check_strings(name, array, name in text_inputs, limits, where)
            total_bytes += size
        else:
            total_bytes += array.nbytes
        arrays[name] = array
    if total_bytes > limits.max_request_bytes:
        raise ServingError(
            "RESOURCE_EXHAUSTED",
            f"{where}request carries {total_bytes} bytes of input; the limit is {limits.max_request_bytes}",
        )
    rows = None
    if dims0 and len(dims0) == len(specs):
        values = set(dims0.values())
        if len(values) == 1:
            rows = values.pop()
        elif signature.batchable:
            raise _invalid(
                where,
                "inputs have different numbers of rows: "
                + ", ".join(f"'{k}' has {v}" for k, v in sorted(dims0.items())),
            )
    return arrays, rows
