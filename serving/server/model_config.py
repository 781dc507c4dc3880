"""TF Serving's models.config (a ModelServerConfig text proto): parse into `ModelSource`s, format back.

The embedded server and `tensorflow_model_server --model_config_file=...` read the same file,
so a deployment directory works with either. Only the fields the embedded server honours are
accepted, and everything else is an error naming the line, so a typo (`num_version`) never
turns silently into a default:

    model_config_list {
      config {
        name: "bert"
        base_path: "/models/bert"
        model_platform: "tensorflow"
        model_version_policy { latest { num_versions: 2 } }   # or all {} / specific { versions: 1 versions: 3 }
        version_labels { key: "stable" value: 1 }
        version_labels { key: "canary" value: 3 }
      }
    }

The parser is self-contained (a tokenizer plus a schema walk) because older
tensorflow-serving-api wheels ship no `model_server_config_pb2`; where that module exists the
tests check that both read a file the same way.

Example:
    >>> models = parse_models_config('model_config_list { config { name: "m" base_path: "/m" } }')
    >>> models[0].name, models[0].version_policy, models[0].num_versions
    ('m', 'latest', 1)
    >>> print(format_models_config(models))  # doctest: +NORMALIZE_WHITESPACE
    model_config_list {
      config {
        name: "m"
        base_path: "/m"
        model_platform: "tensorflow"
        model_version_policy {
          latest {
            num_versions: 1
          }
        }
      }
    }
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Mapping, Sequence

from pipelines.atomic_writes import write_text

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
            raise ValueError(
                f"model name {self.name!r} must be non-empty and use only letters, digits, '_', '.', '-'"
            )
        if not self.base_path:
            raise ValueError(f"model {self.name!r}: base_path is empty")
        self.base_path = os.fspath(self.base_path)
        if self.version_policy not in VERSION_POLICIES:
            raise ValueError(
                f"model {self.name!r}: version_policy must be one of {VERSION_POLICIES}, "
                f"got {self.version_policy!r}"
            )
        if int(self.num_versions) < 1:
            raise ValueError(f"model {self.name!r}: num_versions must be >= 1, got {self.num_versions}")
        self.num_versions = int(self.num_versions)
        versions = tuple(int(v) for v in self.versions)
        if any(v < 1 for v in versions):
            raise ValueError(f"model {self.name!r}: versions must be positive integers, got {versions}")
        if self.version_policy == "specific" and not versions:
            raise ValueError(f"model {self.name!r}: version_policy 'specific' needs at least one version")
        if self.version_policy != "specific" and versions:
            raise ValueError(
                f"model {self.name!r}: versions={versions} is only used with version_policy='specific'"
            )
        self.versions = tuple(sorted(set(versions)))
        labels = {}
        for key, value in dict(self.labels).items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"model {self.name!r}: version label names must be non-empty strings")
            if re.fullmatch(r"[0-9]+", key):
                # A numeric label would be ambiguous with a version in REST paths (ASCII digits
                # only: "/versions/" reads no other, see rest_service).
                raise ValueError(f"model {self.name!r}: version label {key!r} must not be a number")
            if int(value) < 1:
                raise ValueError(f"model {self.name!r}: label {key!r} points to version {value} (< 1)")
            labels[key] = int(value)
        self.labels = labels


class ModelConfigError(ValueError):
    """A models.config file that does not follow the schema; the message starts with "file:line:"."""


# ----------------------------------------------------------------------------- tokenizer

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+) |
    (?P<nl>\n) |
    (?P<comment>\#[^\n]*) |
    (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)[fF]?) |
    (?P<ident>[A-Za-z_][A-Za-z0-9_]*) |
    (?P<punct>[{}<>:;,\[\]])
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}


def _unescape(body: str, where: str) -> str:
    """Decode a text-proto string literal body (C escapes, octal, hex) as UTF-8."""
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        i += 1
        esc = body[i]
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            i += 1
        elif esc in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i:]).group(0)
            out.append(int(digits, 8) & 0xFF)
            i += len(digits)
        elif esc in "xX":
            match = re.match(r"[0-9a-fA-F]{1,2}", body[i + 1 :])
            if not match:
                raise ModelConfigError(f"{where}: bad \\x escape in string")
            out.append(int(match.group(0), 16))
            i += 1 + len(match.group(0))
        else:
            raise ModelConfigError(f"{where}: unknown escape \\{esc} in string")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelConfigError(f"{where}: string is not valid UTF-8") from None


class _Tokens:
    def __init__(self, text: str, source: str):
        self.source = source
        self.items = []  # (kind, value, line)
        line, pos = 1, 0
        while pos < len(text):
            match = _TOKEN_RE.match(text, pos)
            if not match:
                raise ModelConfigError(f"{source}:{line}: unexpected character {text[pos]!r}")
            kind = match.lastgroup
            value = match.group(0)
            if kind == "nl":
                line += 1
            elif kind == "string":
                self.items.append(("string", _unescape(value[1:-1], f"{source}:{line}"), line))
            elif kind not in ("ws", "comment"):
                self.items.append((kind, value, line))
            pos = match.end()
        self.index = 0
        self.last_line = line

    def peek(self):
        return self.items[self.index] if self.index < len(self.items) else ("eof", "", self.last_line)

    def take(self):
        token = self.peek()
        self.index += 1
        return token

    def error(self, message, line=None):
        return ModelConfigError(f"{self.source}:{line if line is not None else self.peek()[2]}: {message}")


@dataclasses.dataclass
class _Field:
    name: str
    line: int
    value: object = None  # scalar: (kind, value); message: list[_Field]
    is_message: bool = False


# Deepest message nesting read (a models.config nests 5 deep): deeper text is an error naming the
# line, not a RecursionError from the parser's recursion.
MAX_NESTING = 64


def _parse_message(tokens: _Tokens, closer: str | None, depth: int = 0) -> list:
    if depth > MAX_NESTING:
        raise tokens.error(f"messages nested more than {MAX_NESTING} deep")
    fields = []
    while True:
        kind, value, line = tokens.peek()
        if kind == "eof":
            if closer is not None:
                raise tokens.error(f"missing '{closer}' at end of file")
            return fields
        if kind == "punct" and value == closer:
            tokens.take()
            return fields
        if kind != "ident":
            raise tokens.error(f"expected a field name, got {value!r}")
        tokens.take()
        name = value
        kind, value, _ = tokens.peek()
        has_colon = kind == "punct" and value == ":"
        if has_colon:
            tokens.take()
            kind, value, _ = tokens.peek()
        if kind == "punct" and value in ("{", "<"):
            tokens.take()
            body = _parse_message(tokens, "}" if value == "{" else ">", depth + 1)
            fields.append(_Field(name, line, body, is_message=True))
        elif not has_colon:
            raise tokens.error(f"expected ':' or '{{' after field name {name!r}")
        elif kind == "punct" and value == "[":
            tokens.take()  # list syntax for repeated scalars: versions: [1, 2]
            while True:
                k, v, l = tokens.take()
                if k == "punct" and v == "]":
                    break
                if k not in ("string", "number", "ident"):
                    raise tokens.error(f"expected a value in the list for {name!r}, got {v!r}", l)
                fields.append(_Field(name, l, (k, v)))
                k, v, l = tokens.peek()
                if k == "punct" and v == ",":
                    tokens.take()
        else:
            tokens.take()
            if kind not in ("string", "number", "ident"):
                raise tokens.error(f"expected a value for {name!r}, got {value!r}", line)
            if kind == "string":  # adjacent literals concatenate, as in C and protobuf
                while tokens.peek()[0] == "string":
                    value += tokens.take()[1]
            fields.append(_Field(name, line, (kind, value)))
        kind, value, _ = tokens.peek()
        if kind == "punct" and value in (",", ";"):
            tokens.take()


# ----------------------------------------------------------------------------- schema walk


class _Walker:
    def __init__(self, source: str):
        self.source = source

    def error(self, line, message):
        return ModelConfigError(f"{self.source}:{line}: {message}")

    def check_fields(self, fields, message_name, allowed, repeated=(), unsupported=None):
        """Reject unknown fields and repeats of non-repeated ones; return {name: [fields]}."""
        unsupported = unsupported or {}
        seen = {}
        for f in fields:
            if f.name in unsupported:
                raise self.error(f.line, f"{message_name}.{f.name} is not supported: {unsupported[f.name]}")
            if f.name not in allowed:
                raise self.error(
                    f.line,
                    f"unknown field {f.name!r} in {message_name} (expected one of: {', '.join(allowed)})",
                )
            if f.name in seen and f.name not in repeated:
                raise self.error(
                    f.line, f"{message_name}.{f.name} is set twice (first on line {seen[f.name][0].line})"
                )
            seen.setdefault(f.name, []).append(f)
        return seen

    def message(self, f, message_name):
        if not f.is_message:
            raise self.error(f.line, f"{message_name}.{f.name} must be a message ({f.name} {{ ... }})")
        return f.value

    def string(self, f, message_name):
        if f.is_message or f.value[0] != "string":
            raise self.error(f.line, f"{message_name}.{f.name} must be a quoted string")
        return f.value[1]

    def integer(self, f, message_name):
        if f.is_message or f.value[0] != "number" or not re.fullmatch(r"[-+]?[0-9]+", f.value[1]):
            raise self.error(f.line, f"{message_name}.{f.name} must be an integer")
        return int(f.value[1])

    def server_config(self, fields):
        seen = self.check_fields(
            fields,
            "ModelServerConfig",
            ("model_config_list",),
            unsupported={"custom_model_config": "the embedded server serves model_config_list only"},
        )
        if "model_config_list" not in seen:
            raise self.error(1, "missing model_config_list { config { ... } }")
        block = seen["model_config_list"][0]
        configs = self.check_fields(
            self.message(block, "ModelServerConfig"), "model_config_list", ("config",), repeated=("config",)
        ).get("config", [])
        if not configs:
            raise self.error(block.line, "model_config_list has no config { ... } entries")
        models, names = [], {}
        for f in configs:
            model = self.model_config(self.message(f, "model_config_list"), f.line)
            if model.name in names:
                raise self.error(f.line, f"model name {model.name!r} is used twice (first on line {names[model.name]})")
            names[model.name] = f.line
            models.append(model)
        return models

    def model_config(self, fields, line):
        where = "config"
        seen = self.check_fields(
            fields,
            where,
            ("name", "base_path", "model_platform", "model_version_policy", "version_labels"),
            repeated=("version_labels",),
            unsupported={
                "model_type": "deprecated in TF Serving; use model_platform: \"tensorflow\"",
                "logging_config": "request logging is not implemented by the embedded server",
            },
        )
        for required in ("name", "base_path"):
            if required not in seen:
                raise self.error(line, f"config is missing {required}")
        name = self.string(seen["name"][0], where)
        base_path = self.string(seen["base_path"][0], where)
        if "model_platform" in seen:
            platform = self.string(seen["model_platform"][0], where)
            if platform != "tensorflow":
                raise self.error(
                    seen["model_platform"][0].line,
                    f"model_platform {platform!r} is not supported (only \"tensorflow\")",
                )
        policy = {"version_policy": "latest", "num_versions": 1, "versions": ()}
        if "model_version_policy" in seen:
            policy = self.version_policy(seen["model_version_policy"][0])
        labels, label_lines = {}, {}
        for f in seen.get("version_labels", []):
            label_fields = self.check_fields(self.message(f, where), "version_labels", ("key", "value"))
            if "key" not in label_fields or "value" not in label_fields:
                raise self.error(f.line, "version_labels needs both key and value")
            key = self.string(label_fields["key"][0], "version_labels")
            value = self.integer(label_fields["value"][0], "version_labels")
            if key in labels:
                raise self.error(f.line, f"version label {key!r} is set twice (first on line {label_lines[key]})")
            labels[key], label_lines[key] = value, f.line
        try:
            return ModelSource(name=name, base_path=base_path, labels=labels, **policy)
        except ValueError as exc:
            raise self.error(line, str(exc)) from None

    def version_policy(self, f):
        where = "model_version_policy"
        seen = self.check_fields(self.message(f, "config"), where, VERSION_POLICIES)
        if len(seen) != 1:
            raise self.error(
                f.line,
                f"{where} must set exactly one of latest {{}}, all {{}}, specific {{}}; got {sorted(seen) or 'none'}",
            )
        (kind, (block,)), = seen.items()
        body = self.message(block, where)
        if kind == "latest":
            latest = self.check_fields(body, "latest", ("num_versions",))
            num = self.integer(latest["num_versions"][0], "latest") if "num_versions" in latest else 1
            if num < 1:
                raise self.error(block.line, f"latest.num_versions must be >= 1, got {num}")
            return {"version_policy": "latest", "num_versions": num, "versions": ()}
        if kind == "all":
            self.check_fields(body, "all", ())
            return {"version_policy": "all", "num_versions": 1, "versions": ()}
        specific = self.check_fields(body, "specific", ("versions",), repeated=("versions",))
        versions = [self.integer(v, "specific") for v in specific.get("versions", [])]
        if not versions:
            raise self.error(block.line, "specific { } needs at least one versions: N")
        for v, vf in zip(versions, specific["versions"]):
            if v < 1:
                raise self.error(vf.line, f"specific.versions must be positive, got {v}")
        return {"version_policy": "specific", "num_versions": 1, "versions": tuple(versions)}


def parse_models_config(text: str, *, source: str = "models.config") -> list:
    """Parse a models.config text proto into `ModelSource`s (strict; errors name the line).

    Example:
        >>> parse_models_config('model_config_list { config { name: "m" base_path: "/m" '
        ...                     'model_version_policy { specific { versions: 2 } } } }')[0].versions
        (2,)

    Args:
        text: The file's content.
        source: Name used in error messages ("path/models.config:7: ...").

    Raises:
        ModelConfigError: Unknown or repeated fields, wrong value types, unsupported
            settings (model_type, logging_config, custom_model_config), duplicate model names.
    """
    tokens = _Tokens(text, source)
    fields = _parse_message(tokens, None)
    return _Walker(source).server_config(fields)


BATCHING_FIELDS = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")


def parse_batching_parameters(text: str, *, source: str = "batching_parameters.txt") -> dict:
    """TF Serving's `--batching_parameters_file` (a BatchingParameters text proto) -> settings.

    The same tokenizer and parser as models.config. Both forms TF Serving accepts are read:
    `max_batch_size { value: 32 }` (the wrapper TF Serving writes) and `max_batch_size: 32`.

    Example:
        >>> parse_batching_parameters("max_batch_size { value: 48 }  pad_variable_length_inputs: true")
        {'max_batch_size': 48, 'ignored': ['pad_variable_length_inputs']}

    Returns:
        {field: int} for the fields the embedded server honours (`BATCHING_FIELDS`), plus
        "ignored": the names of the other fields (allowed_batch_sizes, ...), in file order.

    Raises:
        ModelConfigError: unparsable text or a non-integer value, naming the line.
    """
    values, ignored = {}, []
    for field in _parse_message(_Tokens(text, source), None):
        if field.name not in BATCHING_FIELDS:
            ignored.append(field.name)
            continue
        scalar = field.value
        if field.is_message:
            inner = [f for f in field.value if f.name == "value" and not f.is_message]
            if len(inner) != 1 or len(field.value) != 1:
                raise ModelConfigError(f"{source}:{field.line}: {field.name} {{ value: N }} expected")
            scalar = inner[0].value
        kind, raw = scalar
        if kind != "number" or not re.fullmatch(r"-?[0-9]+", raw):
            raise ModelConfigError(f"{source}:{field.line}: {field.name} must be an integer, got {raw!r}")
        values[field.name] = int(raw)
    values["ignored"] = ignored
    return values


def read_models_config(path) -> list:
    """Read a models.config file; relative base_paths are taken relative to the file's directory.

    Args:
        path: The models.config file.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ModelConfigError(f"{path}: cannot read models.config: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ModelConfigError(f"{path}: models.config is not UTF-8 text") from None
    models = parse_models_config(text, source=path)
    folder = os.path.dirname(os.path.abspath(path))
    for model in models:
        if not os.path.isabs(model.base_path):
            model.base_path = os.path.normpath(os.path.join(folder, model.base_path))
    return models


def _quote(value: str) -> str:
    escaped = []
    for ch in value:
        if ch == "\\":
            escaped.append("\\\\")
        elif ch == '"':
            escaped.append('\\"')
        elif ch == "\n":
            escaped.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            escaped.append("\\%03o" % ord(ch))
        else:
            escaped.append(ch)  # non-ASCII stays UTF-8 (both parsers accept it)
    return '"' + "".join(escaped) + '"'


def format_models_config(models: Sequence[ModelSource]) -> str:
    """The models.config text proto for `models` (what `parse_models_config` reads back).

    Args:
        models: The models to serve, in order.
    """
    lines = ["model_config_list {"]
    for m in models:
        lines += [
            "  config {",
            f"    name: {_quote(m.name)}",
            f"    base_path: {_quote(m.base_path)}",
            '    model_platform: "tensorflow"',
            "    model_version_policy {",
        ]
        if m.version_policy == "latest":
            lines += ["      latest {", f"        num_versions: {m.num_versions}", "      }"]
        elif m.version_policy == "all":
            lines += ["      all {", "      }"]
        else:
            lines += ["      specific {"] + [f"        versions: {v}" for v in m.versions] + ["      }"]
        lines.append("    }")
        for key, value in m.labels.items():
            lines += ["    version_labels {", f"      key: {_quote(key)}", f"      value: {value}", "    }"]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_models_config(path, models: Sequence[ModelSource]) -> None:
    """Write `format_models_config(models)` to `path` atomically."""
    write_text(path, format_models_config(models))
