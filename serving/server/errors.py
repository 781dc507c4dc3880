"""The one error type of the embedded server, and its mapping to gRPC and HTTP status codes.

Every engine method raises `ServingError` with a canonical status code name (the names
gRPC and TensorFlow share) and a message that names the problem: the model, version,
signature, input name or row. Transports turn it into a gRPC status or an HTTP status
with the same table TF Serving's REST handler uses, so a client sees the same codes
from `bert-keras serve` as from `tensorflow_model_server`.

Example:
    >>> from serving.server.errors import ServingError, http_status
    >>> err = ServingError("NOT_FOUND", "model 'x' not found; models: ['bert']")
    >>> err.code, http_status(err.code)
    ('NOT_FOUND', 404)
    >>> str(err)
    "NOT_FOUND: model 'x' not found; models: ['bert']"
"""

from __future__ import annotations

# Canonical codes in the order of their numbers (google.rpc.Code == tensorflow.error.Code
# == grpc.StatusCode numbering), so `CODES.index(name)` is the wire number.
CODES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)

# TF Serving's ToHTTPStatusCode (tensorflow_serving/model_servers/http_rest_api_handler):
# FAILED_PRECONDITION and OUT_OF_RANGE are client errors (400), CANCELLED is nginx's 499.
_HTTP_STATUS = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}


class ServingError(Exception):
    """A request failed with a canonical status code.

    Args:
        code: A canonical code name, e.g. "INVALID_ARGUMENT", "NOT_FOUND",
            "RESOURCE_EXHAUSTED", "UNAVAILABLE", "FAILED_PRECONDITION", "INTERNAL",
            "DEADLINE_EXCEEDED" (any name in `CODES` except "OK").
        message: What went wrong, naming the model / version / input / row involved.
    """

    def __init__(self, code: str, message: str):
        if code not in _HTTP_STATUS or code == "OK":
            raise ValueError(f"ServingError code must be one of {CODES[1:]}, got {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self):  # picklable (a process-pool transport may send it back)
        return (ServingError, (self.code, self.message))


class TaskSizeError(ServingError):
    """A request (or warmup record) of more rows than batching's `max_batch_size`: refused in TF
    Serving's words ("Task size 40 is larger than maximum input batch size 16"), which
    `serving.client` recognises to send the request again in parts.

    Attributes:
        rows: the request's rows.
        limit: the batching's `max_batch_size`.
    """

    def __init__(self, rows: int, limit: int, hint: str = ""):
        super().__init__("INVALID_ARGUMENT", f"Task size {rows} is larger than maximum input batch size {limit}"
                                             + (f" ({hint})" if hint else ""))
        self.rows = rows
        self.limit = limit
        self.hint = hint

    def __reduce__(self):  # ServingError's would come back as the base class, without rows / limit
        return (TaskSizeError, (self.rows, self.limit, self.hint))


class NotRetriedLoadError(ServingError):
    """A version's load failed in a way another attempt on the same files fails again (a warmup
    record of more rows than batching's `max_batch_size`, a warmup file of more records than TF
    Serving reads): the version ends at once with this
    error instead of waiting out --max-num-load-retries x --load-retry-interval-micros (5 x 60 s);
    once its files change, the next poll loads it again."""

    def __reduce__(self):
        return (NotRetriedLoadError, (self.code, self.message))


def name_list(names, limit: int = 5, width: int = 64) -> str:
    """Client-supplied names for an error message, bounded: the first `limit`, and how many more.

    A request may carry thousands of names, each as long as the request allows; the message
    must stay short (it travels back in a gRPC trailer or a JSON body, and into the log).

    Example:
        >>> name_list(["b", "a"] + [f"x{i}" for i in range(10)], limit=3)
        "['a', 'b', 'x0'] and 9 more"
        >>> name_list(["y" * 100], width=8)
        "['yyyyyyyy...']"
    """
    names = sorted(names)
    shown = [n if len(n) <= width else n[:width] + "..." for n in names[:limit]]
    more = len(names) - len(shown)
    return f"{shown}" + (f" and {more} more" if more > 0 else "")


def grpc_status(code: str):
    """The `grpc.StatusCode` member for a canonical code name.

    Example:
        >>> grpc_status("RESOURCE_EXHAUSTED").name
        'RESOURCE_EXHAUSTED'

    Args:
        code: A name from `CODES`.
    """
    import grpc  # only transports need grpc; keep this module importable without it

    try:
        return getattr(grpc.StatusCode, code)
    except AttributeError:
        raise ValueError(f"unknown status code {code!r}; expected one of {CODES}") from None


def http_status(code: str) -> int:
    """The HTTP status TF Serving's REST API answers for a canonical code name.

    Example:
        >>> [http_status(c) for c in ("INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE")]
        [400, 404, 429, 503]

    Args:
        code: A name from `CODES`.
    """
    try:
        return _HTTP_STATUS[code]
    except KeyError:
        raise ValueError(f"unknown status code {code!r}; expected one of {CODES}") from None


def code_number(code: str) -> int:
    """The wire number of a code name (tensorflow.error.Code / grpc numbering): "NOT_FOUND" -> 5."""
    return CODES.index(code)


def _assertion_text(line: str) -> str:
    """"assertion failed: [input \\'text\\': invalid UTF-8 at row] [1]" -> "input 'text': invalid UTF-8 at row 1";
    "[msg] [Condition x == y ...] ..." (tf.debugging.assert_*) -> "msg".

    `Assert` prints each of its data items in brackets, separated by "] [". They are split
    there, not by counting brackets: a message holding a half-open range ("ids must be in
    [0, 127)") left the count unbalanced, and the client read the raw
    "[input \\'token_ids\\': ids must be in [0, 127) (the vocabulary) at row] [0]".

    >>> _assertion_text("assertion failed: [input \\\\'token_ids\\\\': ids must be in [0, 127) at row] [3]")
    "input 'token_ids': ids must be in [0, 127) at row 3"
    """
    body = line[len("assertion failed:"):].strip()
    if not (body.startswith("[") and body.endswith("]")):
        return body
    kept = []
    for part in body[1:-1].split("] ["):
        if part.startswith("Condition ") or part.startswith("x (") or part.startswith("y ("):
            break  # tf.debugging.assert_* boilerplate and the tensor values that follow
        kept.append(part.replace("\\'", "'").replace('\\"', '"'))
    return " ".join(kept) if kept else body


def _clean_tf_message(message: str) -> str:
    """The op's own message from a `tf.errors.OpError` raised by a SavedModel function.

    Eager calls wrap it in "Graph execution error: Detected at node X defined at (most recent
    call last): <python stack>" and add "[[{{node X}}]]" / "[Op:__inference_...]" trailers;
    tf.debugging asserts add "assertion failed: [...] [Condition x == y ...]". The client
    needs the message itself (for the exporter's checks: "input 'text': invalid UTF-8").
    """
    lines = message.splitlines()
    if lines and lines[0].startswith("Graph execution error"):
        lines = lines[1:]
    kept, in_stack = [], False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("Detected at node"):
            in_stack = True
            continue
        if in_stack:
            if not stripped or line[:1].isspace() or stripped.startswith(("<stack traces", "File ")):
                continue
            in_stack = False
        if not stripped or stripped.startswith(("[[{{node", "[[node")):
            continue
        for marker in ("[[{{", "[[node", "[Op:"):  # node / function trailers, also mid-line
            cut = stripped.find(marker)
            if cut >= 0:
                stripped = stripped[:cut].rstrip()
        if not stripped:
            continue
        if stripped.startswith("assertion failed:"):
            stripped = _assertion_text(stripped)
        # tf.debugging.check_numerics(x, message) used to raise a custom error appends this
        for suffix in (" : Tensor had NaN values", " : Tensor had Inf values", " : Tensor had Inf and NaN values"):
            if stripped.endswith(suffix):
                stripped = stripped[: -len(suffix)]
        kept.append(stripped)
    return " ".join(kept) if kept else message.strip()


def from_tf_error(exc: BaseException, context: str = "") -> ServingError:
    """A `ServingError` with the code of a `tf.errors.OpError` raised by a model's graph.

    InvalidArgumentError -> INVALID_ARGUMENT, ResourceExhaustedError -> RESOURCE_EXHAUSTED,
    and so on (OpError.error_code uses the same numbering as `CODES`). Any other exception
    becomes INTERNAL.

    Args:
        exc: The exception raised while running a signature.
        context: Prefix for the message, e.g. "model 'bert' version 2 signature 'serving_default'".
    """
    if isinstance(exc, ServingError):
        return exc
    number = getattr(exc, "error_code", None)
    raw = getattr(exc, "message", None) or str(exc)
    if isinstance(number, int) and 0 < number < len(CODES):
        code, text = CODES[number], _clean_tf_message(raw)
    else:
        code, text = "INTERNAL", f"{type(exc).__name__}: {raw}"
    return ServingError(code, f"{context}: {text}" if context else text)
