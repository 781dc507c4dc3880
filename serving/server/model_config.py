"""TF Serving's models.config (a ModelServerConfig text proto): parse into `ModelSource`s, format back.

The file is read as `tensorflow_model_server --model_config_file=...` reads it: protobuf's
`text_format` on TF Serving's own `ModelServerConfig`. The fields the embedded server honours are
an allow-list (`HONOURED_FIELDS`): setting any other is an error, never a setting ignored in
silence. Errors name the file, then line:column where text_format gives one (or else the config
entry), and what to change.

Example:
    >>> text = '''
    ... model_config_list {
    ...   config {
    ...     name: "bert"  base_path: "/models/bert"  model_platform: "tensorflow"
    ...     model_version_policy { specific { versions: 1 versions: 3 } }  # or latest { num_versions: 2 }, all {}
    ...     version_labels { key: "stable" value: 1 }
    ...     version_labels { key: "canary" value: 3 }
    ...   }
    ... }'''
    >>> parse_models_config(text)
    [ModelSource(name='bert', base_path='/models/bert', version_policy='specific', num_versions=1,
                 versions=(1, 3), labels={'stable': 1, 'canary': 3})]
    >>> try:
    ...     parse_models_config(text.replace("versions: 3", "version: 3"))
    ... except ModelConfigError as error:
    ...     print(error)
    models.config:5:51: unknown field 'version' in Specific (expected one of: versions)
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message,
    message_factory,
    text_format,
)
from tensorflow_serving.config import model_server_config_pb2

from pipelines.atomic_writes import write_text
from serving.server.version_files import MAX_VERSION, MIN_VERSION

VERSION_POLICIES = ("latest", "all", "specific")

# Names travel in REST paths (/v1/models/<name>) and gRPC ModelSpec; keep them path-safe.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@dataclasses.dataclass
class ModelSource:
    """One served model: where its versions live and which of them to serve.

    Example:
        >>> ModelSource("bert", "/models/bert", version_policy="specific", versions=(1, 2),
        ...             labels={"stable": 1}).versions
        (1, 2)

    Args:
        name: Model name clients put in ModelSpec.name.
        base_path: Directory holding one sub-directory per version ("1", "2", ...).
        version_policy: "latest" (the `num_versions` highest versions), "all", or "specific"
            (exactly `versions`).
        num_versions: How many versions "latest" serves.
        versions: The versions "specific" serves.
        labels: Version labels, e.g. {"stable": 1, "canary": 2}; requests may name a label
            instead of a version.
    """

    name: str
    base_path: str
    version_policy: str = "latest"
    num_versions: int = 1
    versions: Sequence[int] = ()
    labels: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"model name {self.name!r} must be non-empty and use only letters, digits, '_', '.', '-'")
        model = f"model {self.name!r}"
        if not self.base_path:
            raise ValueError(f"{model}: base_path is empty")
        self.base_path = os.fspath(self.base_path)
        if self.version_policy not in VERSION_POLICIES:
            raise ValueError(f"{model}: version_policy must be one of {VERSION_POLICIES}, got {self.version_policy!r}")
        if int(self.num_versions) < 1:
            raise ValueError(f"{model}: num_versions must be >= 1, got {self.num_versions}")
        self.num_versions = int(self.num_versions)
        versions = tuple(int(v) for v in self.versions)
        if any(not MIN_VERSION <= v <= MAX_VERSION for v in versions):  # 0 and -1 are versions (version_of_name)
            raise ValueError(f"{model}: versions must be int64 numbers, got {versions}")
        if self.version_policy == "specific" and not versions:
            raise ValueError(f"{model}: version_policy 'specific' needs at least one version")
        if self.version_policy != "specific" and versions:
            raise ValueError(f"{model}: versions={versions} is only used with version_policy='specific'")
        self.versions = tuple(sorted(set(versions)))
        labels = {}
        for key, value in dict(self.labels).items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"{model}: version label names must be non-empty strings")
            if re.fullmatch(r"[0-9]+", key):
                # A numeric label would be ambiguous with a version in REST paths (ASCII digits
                # only: "/versions/" reads no other, see rest_service).
                raise ValueError(f"{model}: version label {key!r} must not be a number")
            if not MIN_VERSION <= int(value) <= MAX_VERSION:
                raise ValueError(f"{model}: label {key!r} points to version {value}, past int64")
            labels[key] = int(value)
        self.labels = labels

    @classmethod
    def for_base_path(cls, base_path, name=None, num_versions=1):
        """The `num_versions` latest versions under `base_path`, named after its directory by default.

        >>> ModelSource.for_base_path("/models/sentiment/").name
        'sentiment'
        """
        base = os.path.abspath(os.fspath(base_path))
        return cls(name or os.path.basename(base.rstrip(os.sep)), base, version_policy="latest",
                   num_versions=num_versions)

    def describe_versions(self):
        """Which versions this source serves, in words ("the latest version", "versions 1, 3").

        >>> ModelSource("bert", "/models/bert", version_policy="specific", versions=(1, 3)).describe_versions()
        'versions 1, 3'
        """
        if self.version_policy == "latest":
            return "the latest version" if self.num_versions == 1 else f"the latest {self.num_versions} versions"
        if self.version_policy == "all":
            return "all versions"
        return "versions " + ", ".join(map(str, self.versions))


class ModelConfigError(ValueError):
    """A config file that does not follow the schema; the message starts with "file:line:column:" or "file:"."""


# The fields the embedded server honours, per message of TF Serving's schema; setting any other is an error.
HONOURED_FIELDS = {
    "ModelServerConfig": ("model_config_list",), "ModelConfigList": ("config",),
    "ModelConfig": ("name", "base_path", "model_platform", "model_version_policy", "version_labels"),
    "ServableVersionPolicy": VERSION_POLICIES, "Latest": ("num_versions",), "All": (), "Specific": ("versions",),
    "VersionLabelsEntry": ("key", "value"),
}
_WHY_NOT = {
    "custom_model_config": "the embedded server serves model_config_list only",
    "model_type": 'deprecated in TF Serving; use model_platform: "tensorflow"',
    "logging_config": "request logging is not implemented by the embedded server",
}

# Deepest message nesting read (a models.config nests 5 deep): deeper text is an error naming the
# line, not a RecursionError from text_format's recursive parser.
MAX_NESTING = 64


def _schema():
    """ModelServerConfig as TF Serving declares it, except that version_labels reads as a list of
    entries, not as a map (which keeps the last of a label set twice, in silence)."""
    pool, added = descriptor_pool.DescriptorPool(), set()

    def add(file):
        for dependency in file.dependencies:
            add(dependency)
        if file.name not in added:
            added.add(file.name)
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            for nested in (n for m in proto.message_type for n in m.nested_type):
                nested.options.ClearField("map_entry")
            pool.Add(proto)

    add(model_server_config_pb2.DESCRIPTOR)
    return pool, message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.ModelServerConfig"))


_POOL, _ServerConfig = _schema()


def _error(source, message, line=None, column=None) -> ModelConfigError:
    return ModelConfigError(":".join(str(part) for part in (source, line, column) if part is not None) + f": {message}")


def _from_parse_error(exc: text_format.ParseError, text: str, source) -> ModelConfigError:
    """text_format's error as "file:line:column: what" (and for an unknown field, what is known)."""
    line, message = exc.GetLine(), str(exc)
    if line is not None:
        message = message.split(" : ", 1)[-1]  # text_format's own "line:column : "
        lines = text.split("\n")  # as text_format splits it; its message may quote the whole line: cut it
        quoted = f"'{lines[line - 1]}': " if 0 < line <= len(lines) else None
        message = message[len(quoted):] if quoted and message.startswith(quoted) else message
    unknown = re.fullmatch(r'Message type "[\w.]*?(\w+)" has no field named "(.*)"\.', message)
    if unknown and unknown[1] in HONOURED_FIELDS:
        message = (f"unknown field {unknown[2]!r} in {unknown[1]} "
                   f"(expected one of: {', '.join(HONOURED_FIELDS[unknown[1]]) or 'none'})")
    return _error(source, message, line, exc.GetColumn())


def _tokens(text: str, source: str) -> text_format.Tokenizer:
    """text_format's tokenizer over `text`, after a pass that refuses what text_format reads in
    silence or recurses on: non-ASCII outside strings ('９' reads as 9) and nesting past MAX_NESTING."""
    tokens, depth = text_format.Tokenizer(text.split("\n")), 0
    try:
        while not tokens.AtEnd():
            if not tokens.token.startswith(("'", '"')) and not tokens.token.isascii():
                raise tokens.ParseError(f"{tokens.token!r} is not ASCII: outside quoted strings, write names "
                                        "with ASCII letters and numbers with the digits 0-9")
            depth += (tokens.token in ("{", "<")) - (tokens.token in ("}", ">"))
            if depth > MAX_NESTING:
                raise tokens.ParseError(f"messages nested more than {MAX_NESTING} deep")
            tokens.NextToken()
    except text_format.ParseError as exc:
        raise _from_parse_error(exc, text, source) from None
    return text_format.Tokenizer(text.split("\n"))


def _where(number: int, config) -> str:
    return f"config #{number}" + (f" ({config.name!r})" if config.name else "")


def _refuse_unhonoured(proto, source: str, where: str = "") -> None:
    for field, value in proto.ListFields():
        if field.name not in HONOURED_FIELDS[proto.DESCRIPTOR.name]:
            why = _WHY_NOT.get(field.name, "the embedded server does not read it")
            raise _error(source, f"{where}{field.name} is not supported ({why}); remove it")
        for number, item in enumerate(value if field.is_repeated else (value,), 1):
            if field.message_type is not None:
                _refuse_unhonoured(item, source, f"{_where(number, item)}: " if field.name == "config" else where)


def _model_source(config, where: str, source: str) -> ModelSource:
    for required in ("name", "base_path"):
        if not getattr(config, required):
            raise _error(source, f'{where} is missing {required} (add {required}: "...")')
    if config.model_platform not in ("", "tensorflow"):
        raise _error(source, f'{where}: model_platform {config.model_platform!r} is not supported (only "tensorflow")')
    policy = config.model_version_policy
    kind = policy.WhichOneof("policy_choice")
    if config.HasField("model_version_policy") and kind is None:
        raise _error(source, f"{where}: model_version_policy must set one of latest {{}}, all {{}}, specific {{}}")
    if kind == "specific" and not policy.specific.versions:
        raise _error(source, f"{where}: specific {{ }} needs at least one versions: N")
    labels = {}
    for entry in config.version_labels:
        if entry.key in labels:
            raise _error(source, f"{where}: version label {entry.key!r} is set twice; keep one")
        labels[entry.key] = entry.value
    try:  # num_versions 0 is "not set" in proto3, and TF Serving reads it as 1
        return ModelSource(config.name, config.base_path, kind or "latest", policy.latest.num_versions or 1,
                           tuple(policy.specific.versions), labels)
    except ValueError as exc:
        raise _error(source, str(exc)) from None


def parse_models_config(text: str, *, source: str = "models.config") -> list:
    """Parse a models.config text proto into `ModelSource`s (strict; errors name file and place).

    Example:
        >>> parse_models_config('model_config_list { config { name: "m" base_path: "/m" '
        ...                     'model_version_policy { specific { versions: 2 } } } }')[0].versions
        (2,)

    Args:
        text: The file's content.
        source: Name used in error messages ("path/models.config:7:12: ...").

    Raises:
        ModelConfigError: Text that is not a ModelServerConfig, a field outside `HONOURED_FIELDS`
            (model_type, logging_config, custom_model_config), a bad value, a name used twice.
    """
    _tokens(text, source)
    try:
        server = text_format.Parse(text, _ServerConfig(), descriptor_pool=_POOL)
    except text_format.ParseError as exc:
        raise _from_parse_error(exc, text, source) from None
    except (message.DecodeError, RecursionError) as exc:  # not expected after _tokens; never a traceback
        raise _error(source, f"cannot read it as a ModelServerConfig ({type(exc).__name__})") from None
    _refuse_unhonoured(server, source)
    if not server.model_config_list.config:
        raise _error(source, "model_config_list has no config { ... } entries" if server.HasField("model_config_list")
                     else "missing model_config_list { config { ... } }")
    models, first = [], {}
    for number, config in enumerate(server.model_config_list.config, 1):
        model = _model_source(config, _where(number, config), source)
        if model.name in first:
            raise _error(source, f"{_where(number, config)}: model name {model.name!r} is used twice "
                                 f"(first by config #{first[model.name]}); give each model its own name")
        first[model.name] = number
        models.append(model)
    return models


BATCHING_FIELDS = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
# The repeated field: `allowed_batch_sizes: 8  allowed_batch_sizes: 16` or `allowed_batch_sizes: [8, 16]`.
ALLOWED_BATCH_SIZES = "allowed_batch_sizes"
# A bool: false is what the embedded server does; true is refused (`parse_batching_parameters`).
PAD_VARIABLE_LENGTH_INPUTS = "pad_variable_length_inputs"


def parse_batching_parameters(text: str, *, source: str = "batching_parameters.txt") -> dict:
    """TF Serving's `--batching_parameters_file` (a BatchingParameters text proto) -> settings.

    tensorflow-serving-api ships no BatchingParameters, so this reads text_format's tokens a field
    at a time: `max_batch_size { value: 32 }` (the wrapper TF Serving writes) or `max_batch_size: 32`.

    Example:
        >>> parse_batching_parameters("max_batch_size { value: 48 }  pad_variable_length_inputs: false")
        {'max_batch_size': 48, 'ignored': []}
        >>> parse_batching_parameters("max_batch_size { value: 48 }  thread_pool_name { value: 'x' }")
        {'max_batch_size': 48, 'ignored': ['thread_pool_name']}
        >>> parse_batching_parameters("max_batch_size { value: 16 } allowed_batch_sizes: [4, 8] allowed_batch_sizes: 16")
        {'max_batch_size': 16, 'allowed_batch_sizes': (4, 8, 16), 'ignored': []}

    Returns:
        {field: int} for the fields the embedded server honours (`BATCHING_FIELDS`),
        "allowed_batch_sizes": a tuple of ints in file order (when given), and "ignored": the
        names of the other fields (thread_pool_name, ...), in file order.
        `serving.server.batching.BatchingOptions` checks the values, as TF Serving does at load.
        `pad_variable_length_inputs: false` is what the embedded server does (requests whose inputs
        differ past the batch dimension run in separate batches); `true` is refused: TF Serving then
        pads merged inputs to the longest with each tensor's first element (for BERT token IDs, the
        [CLS] id with a mask of 1: other answers) and answers at the padded length, which the
        embedded server does not reproduce.

    Raises:
        ModelConfigError: unparsable text or a non-integer value, naming the line.
    """
    tokens, values, ignored = _tokens(text, source), {}, []
    try:
        while not tokens.AtEnd():
            name = tokens.ConsumeIdentifier()
            line = tokens.ParseErrorPreviousToken("").GetLine()
            colon = tokens.TryConsume(":")
            closer = "}" if tokens.TryConsume("{") else ">" if tokens.TryConsume("<") else None
            if not colon and not closer:
                raise _error(source, f"expected ':' or '{{' after {name}", line)
            if name == ALLOWED_BATCH_SIZES:
                if closer:  # a repeated integer, not a { value: N } wrapper: TF Serving fails to parse it
                    raise _error(source, f"{name}: N or {name}: [N, N, ...] expected (a repeated integer, "
                                         "not { value: N })", line)
                values.setdefault(name, ())
                listed = tokens.TryConsume("[")
                while not (listed and tokens.TryConsume("]")):  # [] is an empty list
                    raw = tokens.token
                    try:
                        values[name] += (tokens.ConsumeInteger(),)
                    except text_format.ParseError:
                        raise _error(source, f"{name} must be integers, got {raw!r}", line) from None
                    if not listed or tokens.TryConsume("]"):
                        break
                    if not tokens.TryConsume(","):
                        raise _error(source, f"{name}: [N, N, ...] expected", line)
            elif name == PAD_VARIABLE_LENGTH_INPUTS:
                raw = tokens.token
                try:
                    if closer:  # a plain bool in BatchingParameters, not a { value: ... } wrapper
                        raise text_format.ParseError()
                    pad = tokens.ConsumeBool()
                except text_format.ParseError:
                    raise _error(source, f"{name}: true or false expected, got {raw!r}", line) from None
                if pad:
                    raise _error(source, (
                        f"{name}: true is not supported by the embedded server: tensorflow_model_server would pad "
                        "the inputs of merged requests to the longest with each tensor's first element (for BERT "
                        "token IDs the [CLS] id, with a mask of 1: other answers) and answer at the padded length; "
                        "the embedded server runs requests of different lengths in separate batches instead. "
                        f"Remove the line or set {name}: false"), line)
            elif name not in BATCHING_FIELDS:  # skip its value, whatever it is (_tokens bounds the nesting)
                ignored.append(name)
                depth = 1 if closer or tokens.TryConsume("[") else 0
                while True:
                    if tokens.AtEnd() and depth:
                        raise _error(source, f"{name} is not closed", line)
                    depth += (tokens.token in ("{", "<", "[")) - (tokens.token in ("}", ">", "]"))
                    tokens.NextToken()
                    if depth <= 0:
                        break
            else:
                if closer and not (tokens.TryConsume("value") and tokens.TryConsume(":")):
                    raise _error(source, f"{name} {{ value: N }} expected", line)
                raw = tokens.token
                try:
                    values[name] = tokens.ConsumeInteger()
                except text_format.ParseError:
                    raise _error(source, f"{name} must be an integer, got {raw!r}", line) from None
                if closer and not tokens.TryConsume(closer):
                    raise _error(source, f"{name} {{ value: N }} expected", line)
            tokens.TryConsume(",") or tokens.TryConsume(";")
    except text_format.ParseError as exc:
        raise _from_parse_error(exc, text, source) from None
    values["ignored"] = ignored
    return values


def read_batching_parameters(path) -> dict:
    """`parse_batching_parameters` of a file (TF Serving's `--batching_parameters_file`)."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        return parse_batching_parameters(f.read(), source=path)


def read_models_config(path) -> list:
    """Read a models.config file; relative base_paths are taken relative to the file's directory."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ModelConfigError(f"{path}: cannot read models.config: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ModelConfigError(f"{path}: models.config is not UTF-8 text") from None
    models = parse_models_config(text, source=path)
    for model in models:
        if not os.path.isabs(model.base_path):
            model.base_path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), model.base_path))
    return models


def format_models_config(models: Sequence[ModelSource]) -> str:
    """The models.config text proto for `models`, in order (labels sorted by name), via text_format.

    Example:
        >>> models = [ModelSource("m", "/m", "specific", versions=(1, 2), labels={"stable": 1})]
        >>> parse_models_config(format_models_config(models)) == models
        True
    """
    server = model_server_config_pb2.ModelServerConfig()
    server.model_config_list.SetInParent()
    for m in models:
        config = server.model_config_list.config.add(name=m.name, base_path=m.base_path, model_platform="tensorflow")
        policy = config.model_version_policy
        if m.version_policy == "latest":
            policy.latest.num_versions = m.num_versions
        elif m.version_policy == "all":
            policy.all.SetInParent()
        else:
            policy.specific.versions.extend(m.versions)
        config.version_labels.update(m.labels)
    return text_format.MessageToString(server, as_utf8=True)


def write_models_config(path, models: Sequence[ModelSource]) -> None:
    """Write `format_models_config(models)` to `path` atomically."""
    write_text(path, format_models_config(models))
