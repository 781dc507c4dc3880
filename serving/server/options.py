"""`ServerOptions`: every setting of the embedded server, checked, and the server they describe.

The settings of `tensorflow_model_server` that `bert-keras serve` takes as flags (a field
`rest_max_threads` is the flag `--rest-max-threads`), so the checks name the flag to change.
This module imports nothing slow: TensorFlow loads only when `build_server` builds the engine,
after `serve_until_shutdown` has installed its signal handlers.

Example:

    from serving.server.options import ServerOptions
    from serving.server.server import serve_until_shutdown

    options = ServerOptions(model_base_path="models/sentiment", port=0, rest_port=0)
    sources, batching = options.model_sources(), options.batching()
    serve_until_shutdown(lambda: options.build_server(sources, batching))

>>> ServerOptions(model_base_path="models/sentiment", max_request_bytes=10).check()
Traceback (most recent call last):
...
serving.server.options.ServerOptionsError: --max-request-bytes must be at least 1024
"""

import dataclasses
import os

from pipelines.command_options import field_values, option

# fields that must be at least 1, and fields that must be positive (seconds)
_AT_LEAST_ONE = ("grpc_max_threads", "grpc_max_concurrent_rpcs", "rest_max_threads", "rest_max_connections",
                 "max_rows_per_request", "max_tokens_per_request", "max_windows_per_request")
_POSITIVE = ("rest_header_timeout_seconds", "rest_body_timeout_seconds")


# the groups of `bert-keras serve --help`
MODELS = "models (one of)"
NETWORK = "network"
LIMITS = "request limits (checked before anything is allocated)"
BATCHING = "batching (like tensorflow_model_server --enable_batching)"


def _option(group, default, help, metavar=None):
    """A field with its flag's group, help and metavar, read by the command line."""
    return option(default, help, group=group, metavar=metavar)


class ServerOptionsError(ValueError):
    """A setting the server cannot start with; the message names its flag."""


def _flag(name):
    return "--" + name.replace("_", "-")


@dataclasses.dataclass
class ServerOptions:
    """What to serve, on which ports, with which limits; defaults are TF Serving's.

    Each field documents itself in `metadata["flag"]["help"]`, which is also the help of its
    flag. Models: `model_base_path` (+ `model_name`, `num_versions`) or `model_config_file`.
    Network: ports (`rest_port` -1: no REST), TLS files, thread and connection caps, REST
    deadlines, `grace_seconds` of drain on SIGTERM. Request limits are checked before anything is
    allocated. Batching: `enable_batching` with TF Serving's four parameters, which a
    `batching_parameters_file` overrides.
    """

    model_base_path: str = _option(MODELS, None, "directory of numbered version directories", "DIR")
    model_name: str = _option(MODELS, None, "name clients use (default: the base path's name)", "NAME")
    model_config_file: str = _option(
        MODELS, None, "TF Serving models.config (model_config_list text proto): several models, "
        "version policies and labels", "FILE")
    num_versions: int = _option(
        MODELS, 1, "serve the N highest versions of --model-base-path (default 1)", "N")
    file_system_poll_wait_seconds: float = _option(
        MODELS, 1.0, "how often to look for new / removed versions (0 = never; default 1)", "S")
    max_num_load_retries: int = _option(
        MODELS, 5, "retries of a version that failed to load (default 5, as TF Serving)", "N")
    load_retry_interval_micros: int = _option(
        MODELS, 60_000_000, "wait between load retries in microseconds (default 60 s, as TF Serving)", "US")
    host: str = _option(NETWORK, "127.0.0.1",
                        "interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0: all)")
    port: int = _option(NETWORK, 8500, "gRPC port (default 8500; 0 = any free port)")
    rest_port: int = _option(NETWORK, 8501, "REST port (default 8501; 0 = any free port; -1 = no REST)")
    tls_cert: str = _option(
        NETWORK, None, "certificate chain: serve gRPC over TLS and REST over HTTPS", "PEM")
    tls_key: str = _option(NETWORK, None, "private key of --tls-cert", "PEM")
    max_request_bytes: int = _option(
        NETWORK, 64 << 20, "largest request accepted, gRPC message or HTTP body (default 64 MiB)", "N")
    grpc_max_threads: int = _option(
        NETWORK, 64, "gRPC requests handled at once, waiting-for-a-batch included (default 64)", "N")
    grpc_max_concurrent_rpcs: int = _option(
        NETWORK, 1024, "gRPC requests accepted at once, queued included; more get RESOURCE_EXHAUSTED "
        "(default 1024)", "N")
    rest_max_threads: int = _option(
        NETWORK, 32, "REST requests handled at once (connections cost no thread; default 32)", "N")
    rest_max_connections: int = _option(
        NETWORK, 1000, "open REST connections at most; more are answered 503 (default 1000)", "N")
    rest_header_timeout_seconds: float = _option(
        NETWORK, 10.0, "a REST request's line and headers must arrive within S seconds (default 10)", "S")
    rest_body_timeout_seconds: float = _option(
        NETWORK, 60.0, "a REST request's body must arrive within S seconds (default 60)", "S")
    grace_seconds: float = _option(
        NETWORK, 30.0, "on SIGTERM, how long in-flight requests may take to finish (default 30)", "S")
    max_rows_per_request: int = _option(
        LIMITS, 1024, "rows (batch dimension) of one request; more: RESOURCE_EXHAUSTED (default 1024)", "N")
    max_tokens_per_request: int = _option(
        LIMITS, 16384, "rows x sequence length of a token_ids input; more: RESOURCE_EXHAUSTED "
        "(default 16384)", "N")
    max_windows_per_request: int = _option(
        LIMITS, 1024, "windows a request of a long-text model may read (each byte that is not whitespace "
        "counted as a possible word piece); more: RESOURCE_EXHAUSTED (default 1024: a few seconds of "
        "a MiniLM-sized model on 2 cores)", "N")
    enable_batching: bool = _option(BATCHING, False, "merge concurrent requests into one model call")
    batching_parameters_file: str = _option(
        BATCHING, None, "TF Serving batching parameters text file (max_batch_size { value: 32 } ...)", "FILE")
    max_batch_size: int = _option(BATCHING, 32, "rows per merged batch (default 32)")
    batch_timeout_micros: int = _option(
        BATCHING, 2000, "longest wait for a batch to fill, in microseconds (default 2000)")
    num_batch_threads: int = _option(BATCHING, 2, "batches run at once (default 2)")
    max_enqueued_batches: int = _option(
        BATCHING, 100, "queued batches before requests are refused with UNAVAILABLE (default 100)")

    @classmethod
    def from_namespace(cls, namespace):
        """The options an `argparse.Namespace` holds (attributes named as the fields; others ignored)."""
        return cls(**field_values(cls, namespace))

    def check(self):
        """Raises `ServerOptionsError` for the network and limit settings the server cannot use."""
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ServerOptionsError("TLS needs both --tls-cert and --tls-key")
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            if path and not os.path.isfile(path):
                raise ServerOptionsError(f"{_flag(name)} {path}: no such file")
        if self.max_request_bytes < 1024:
            raise ServerOptionsError("--max-request-bytes must be at least 1024")
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ServerOptionsError(f"{_flag(name)} must be at least 1")
        for name in _POSITIVE:
            if not getattr(self, name) > 0:
                raise ServerOptionsError(f"{_flag(name)} must be positive")
        if self.max_num_load_retries < 0 or self.load_retry_interval_micros < 0:
            raise ServerOptionsError("--max-num-load-retries and --load-retry-interval-micros must be >= 0")
        if self.port < 0 or self.rest_port < -1:
            raise ServerOptionsError("--port must be >= 0 and --rest-port >= -1 (-1: no REST)")
        # A TCP port is 16 bits: gRPC took --port 70000 as 70000 - 65536 = 4464 without a word.
        for flag, value in (("--port", self.port), ("--rest-port", self.rest_port)):
            if value > 65535:
                raise ServerOptionsError(f"{flag} {value}: a TCP port is at most 65535")
        return self

    def model_sources(self):
        """The `ModelSource`s to serve: the config file's, or the one base path's latest versions."""
        from serving.server.model_config import ModelSource, read_models_config

        if bool(self.model_base_path) == bool(self.model_config_file):
            raise ServerOptionsError("give --model-base-path DIR or --model-config-file FILE (one of them)")
        if self.model_config_file:
            if not os.path.isfile(self.model_config_file):
                raise ServerOptionsError(f"--model-config-file {self.model_config_file}: no such file")
            return read_models_config(self.model_config_file)  # ModelConfigError names file and line
        if not os.path.isdir(self.model_base_path):
            raise ServerOptionsError(f"--model-base-path {self.model_base_path}: no such directory")
        if self.num_versions < 1:
            raise ServerOptionsError("--num-versions must be at least 1")
        try:
            return [ModelSource.for_base_path(self.model_base_path, self.model_name, self.num_versions)]
        except (ValueError, TypeError) as error:
            name = self.model_name or os.path.basename(os.path.abspath(self.model_base_path).rstrip(os.sep))
            raise ServerOptionsError(f"--model-name {name!r}: {error}") from None

    def batching(self, note=None):
        """`BatchingOptions` (None without `enable_batching`); the parameters file overrides the fields.

        Args:
            note: called with a line for each setting of the parameters file the server does not use.
        """
        from serving.server.batching import BatchingOptions
        from serving.server.model_config import BATCHING_FIELDS, read_batching_parameters

        if self.batching_parameters_file and not self.enable_batching:
            raise ServerOptionsError("--batching-parameters-file needs --enable-batching")
        if not self.enable_batching:
            return None
        values = {name: getattr(self, name) for name in BATCHING_FIELDS}
        path = self.batching_parameters_file
        parsed = {}
        if path:
            if not os.path.isfile(path):
                raise ServerOptionsError(f"--batching-parameters-file {path}: no such file")
            parsed = read_batching_parameters(path)  # ModelConfigError names file and line
            for name in parsed.pop("ignored"):
                if note is not None:
                    note(f"{path}: {name} is not used by the embedded server")
            values.update(parsed)
        for name, value in values.items():
            if name in BATCHING_FIELDS and value < (0 if name == "batch_timeout_micros" else 1):
                raise ServerOptionsError(f"{_flag(name)} must be positive, got {value}")
        try:
            return BatchingOptions(**values)
        except ValueError as error:  # allowed_batch_sizes, which only the file sets
            source = ""
            if "max_batch_size" not in parsed and "must match max_batch_size" in str(error):
                default = {field.name: field for field in dataclasses.fields(self)}["max_batch_size"].default
                given = "the --max-batch-size default" if self.max_batch_size == default else "--max-batch-size"
                source = (f" (the file sets no max_batch_size, so {given} {self.max_batch_size} applies: set "
                          "max_batch_size { value: N } in the file or pass --max-batch-size N)")
            raise ServerOptionsError(f"--batching-parameters-file {path}: {error}{source}") from None

    def build_server(self, sources, batching=None):
        """The `EmbeddedServer` of these options serving `sources` (not started)."""
        from serving.server.engine import InferenceEngine, Limits, LoadRetryOptions
        from serving.server.server import EmbeddedServer

        limits = Limits(max_request_bytes=self.max_request_bytes,
                        max_batch_size_per_request=self.max_rows_per_request,
                        max_tokens_per_request=self.max_tokens_per_request,
                        max_windows_per_request=self.max_windows_per_request)
        retries = LoadRetryOptions(max_num_load_retries=self.max_num_load_retries,
                                   load_retry_interval_s=self.load_retry_interval_micros / 1e6)
        engine = InferenceEngine(sources, batching=batching, limits=limits,
                                 poll_interval_s=self.file_system_poll_wait_seconds, load_retries=retries)
        return EmbeddedServer(engine, host=self.host, grpc_port=self.port,
                              rest_port=None if self.rest_port == -1 else self.rest_port,
                              tls_cert=self.tls_cert, tls_key=self.tls_key,
                              max_request_bytes=self.max_request_bytes, grpc_workers=self.grpc_max_threads,
                              grpc_max_concurrent_rpcs=self.grpc_max_concurrent_rpcs,
                              rest_workers=self.rest_max_threads,
                              rest_max_connections=self.rest_max_connections,
                              rest_header_timeout_s=self.rest_header_timeout_seconds,
                              rest_body_timeout_s=self.rest_body_timeout_seconds)


class ServerStartError(ValueError):
    """The server did not start (a model failed to load, a port in use, a bad TLS file): the message says why."""


def start_server(server, sources, batching=None, say=print):
    """Says what is about to load (`loading_line`), then loads the models and opens the ports.

    Raises:
        ServerStartError: what stopped it ("cannot start: ..." for a serving error, else the OS error).
    """
    from serving.server.errors import ServingError

    say(loading_line(sources, batching))
    try:
        server.start()
    except ServingError as error:
        raise ServerStartError(f"cannot start: {error.message}") from None
    except OSError as error:
        raise ServerStartError(str(error)) from None


def loading_line(sources, batching=None):
    """What is about to load: "m (base path)" of each source, and the batching in use."""
    return (f"loading {', '.join(f'{s.name} ({s.base_path})' for s in sources)}"
            + (f" with batching (max_batch_size {batching.max_batch_size}, "
               + (f"padded to {', '.join(map(str, batching.allowed_batch_sizes))} rows, "
                  if batching.allowed_batch_sizes else "")
               + f"timeout {batching.batch_timeout_micros} us)" if batching else ""))


def ready_report(server, sources, *, grace_s, tls_ca=None, program="bert-keras serve"):
    """The lines `program` prints once `server` serves: its addresses and models, each model's
    versions and their states, a warning per model with no AVAILABLE version (its requests answer
    NOT_FOUND until one loads), commands to try (`serving.next_steps.try_commands`) and how to stop."""
    from serving.next_steps import try_commands
    from serving.server.server import version_states

    lines = [f"{program}: ready: gRPC {server.grpc_address}" + (f"  REST {server.rest_url}" if server.rest_url else "")
             + f"  models: {', '.join(source.name for source in sources)}"]
    warnings = []
    for source in sources:
        status, reason = version_states(server.engine, source.name)
        for entry in status:
            failed = entry["error_code"] != "OK"
            problem = f": {entry['error_code']}: {entry['error_message']}" if failed else ""
            lines.append(f"  model {source.name} version {entry['version']}: {entry['state']}{problem}")
        if not any(entry["state"] == "AVAILABLE" for entry in status):
            warnings.append(f"{program}: warning: model {source.name} has no AVAILABLE version ({reason}); "
                            "its requests answer NOT_FOUND until one loads")
        pre_tokenizer = _served_pre_tokenizer(server.engine, source.name)
        if pre_tokenizer:  # raw text is answered without an error, but read as other words
            warnings.append(f"{program}: note: model {source.name} reads text split by {pre_tokenizer} at morpheme "
                            f"boundaries (its model card), which the server does not do: clients split it "
                            f"(bert-keras query --pre-tokenizer {pre_tokenizer})")
    return lines + warnings + ["", "try:", *try_commands(server, sources[0].name, tls_ca,
                                                         _served_example(server.engine, sources[0].name)),
                               f"stop with Ctrl-C or SIGTERM (in-flight requests finish first, up to {grace_s:g} s)"]


def _served_pre_tokenizer(engine, model_name):
    """The morpheme analyzer the clients of a served model's newest AVAILABLE version split its text
    with (its model card's `tokenization.pre_tokenizer`: a (c) Korean vocabulary's kiwi), or None."""
    from serving.model_card import card_pre_tokenizer, read_model_card
    from serving.server.errors import ServingError

    try:
        with engine.servable(model_name) as servable:
            path = servable.path
    except ServingError:
        return None
    try:
        return card_pre_tokenizer(read_model_card(path))
    except (OSError, ValueError):  # no card: another exporter's SavedModel
        return None


def _served_example(engine, model_name):
    """`(query arguments, REST instance)` of a request a served model's newest AVAILABLE version
    answers (its model card, else its `serving_default` inputs), or None (none loaded): what the
    `try:` lines send. A fixed "some text" failed as printed for a sentence-pair classifier."""
    from serving.next_steps import version_dir_example
    from serving.server.errors import ServingError
    from serving.server.engine import DEFAULT_SIGNATURE
    from serving.server.signatures import DT_STRING

    try:
        with engine.servable(model_name) as servable:
            signature = servable.signatures.get(DEFAULT_SIGNATURE)
            inputs = None if signature is None else {
                name: {"dtype": "DT_STRING" if spec.dtype == DT_STRING else str(spec.dtype),
                       "shape": None if spec.shape is None else [-1 if d is None else d for d in spec.shape]}
                for name, spec in signature.inputs.items()}
            return version_dir_example(servable.path, inputs)
    except ServingError:
        return None
