"""`bert-keras serve`: exported SavedModels behind TF Serving's gRPC and REST APIs, in one Python process."""

import argparse
import os
import sys

from bert_keras.cli.main import CommandError

def register(subparsers, summary):
    parser = subparsers.add_parser(
        "serve",
        help=summary,
        description=(
            "Serve exported models (`<base>/<version>/saved_model.pb`) with the same APIs as\n"
            "tensorflow_model_server: gRPC PredictionService/ModelService (+ grpc.health.v1) on --port,\n"
            "REST /v1/models/NAME[:predict|:classify|:regress|/metadata] on --rest-port. New version\n"
            "directories are picked up while serving. SIGTERM/Ctrl-C drain: in-flight requests finish,\n"
            "then the process exits 0; during startup (models loading) they stop it at once, also with 0."
        ),
        epilog=(
            "examples:\n"
            "  bert-keras serve --model-base-path models/sentiment\n"
            "  bert-keras serve --model-config-file models.config --enable-batching --max-batch-size 32\n"
            "  bert-keras serve --model-base-path models/sentiment --port 0 --rest-port 0   (free ports)\n"
            "  bert-keras serve --model-base-path models/sentiment --host 0.0.0.0 --tls-cert c.pem --tls-key k.pem\n"
            "\nthe same directory runs in TF Serving:\n"
            "  docker run -p 8500:8500 -p 8501:8501 -v $PWD/models/sentiment:/models/sentiment \\\n"
            "    -e MODEL_NAME=sentiment tensorflow/serving"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_argument_group("models (one of)")
    source.add_argument("--model-base-path", metavar="DIR", help="directory of numbered version directories")
    source.add_argument("--model-name", metavar="NAME", help="name clients use (default: the base path's name)")
    source.add_argument("--model-config-file", metavar="FILE",
                        help="TF Serving models.config (model_config_list text proto): several models, "
                             "version policies and labels")
    source.add_argument("--num-versions", type=int, default=1, metavar="N",
                        help="serve the N highest versions of --model-base-path (default 1)")
    source.add_argument("--file-system-poll-wait-seconds", type=float, default=1.0, metavar="S",
                        help="how often to look for new / removed versions (0 = never; default 1)")
    source.add_argument("--max-num-load-retries", type=int, default=5, metavar="N",
                        help="retries of a version that failed to load (default 5, as TF Serving)")
    source.add_argument("--load-retry-interval-micros", type=int, default=60_000_000, metavar="US",
                        help="wait between load retries in microseconds (default 60 s, as TF Serving)")
    net = parser.add_argument_group("network")
    net.add_argument("--host", default="127.0.0.1",
                     help="interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0: all)")
    net.add_argument("--port", type=int, default=8500, help="gRPC port (default 8500; 0 = any free port)")
    net.add_argument("--rest-port", type=int, default=8501,
                     help="REST port (default 8501; 0 = any free port; -1 = no REST)")
    net.add_argument("--tls-cert", metavar="PEM", help="certificate chain: serve gRPC over TLS and REST over HTTPS")
    net.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")
    net.add_argument("--max-request-bytes", type=int, default=64 << 20, metavar="N",
                     help="largest request accepted, gRPC message or HTTP body (default 64 MiB)")
    net.add_argument("--grpc-max-threads", type=int, default=64, metavar="N",
                     help="gRPC requests handled at once, waiting-for-a-batch included (default 64)")
    net.add_argument("--grpc-max-concurrent-rpcs", type=int, default=1024, metavar="N",
                     help="gRPC requests accepted at once, queued included; more get RESOURCE_EXHAUSTED "
                          "(default 1024)")
    net.add_argument("--rest-max-threads", type=int, default=32, metavar="N",
                     help="REST requests handled at once (connections cost no thread; default 32)")
    net.add_argument("--rest-max-connections", type=int, default=1000, metavar="N",
                     help="open REST connections at most; more are answered 503 (default 1000)")
    net.add_argument("--rest-header-timeout-seconds", type=float, default=10.0, metavar="S",
                     help="a REST request's line and headers must arrive within S seconds (default 10)")
    net.add_argument("--rest-body-timeout-seconds", type=float, default=60.0, metavar="S",
                     help="a REST request's body must arrive within S seconds (default 60)")
    limits = parser.add_argument_group("request limits (checked before anything is allocated)")
    limits.add_argument("--max-rows-per-request", type=int, default=1024, metavar="N",
                        help="rows (batch dimension) of one request; more: RESOURCE_EXHAUSTED (default 1024)")
    limits.add_argument("--max-tokens-per-request", type=int, default=16384, metavar="N",
                        help="rows x sequence length of a token_ids input; more: RESOURCE_EXHAUSTED "
                             "(default 16384)")
    net.add_argument("--grace-seconds", type=float, default=30.0, metavar="S",
                     help="on SIGTERM, how long in-flight requests may take to finish (default 30)")
    batching = parser.add_argument_group("batching (like tensorflow_model_server --enable_batching)")
    batching.add_argument("--enable-batching", action="store_true",
                          help="merge concurrent requests into one model call")
    batching.add_argument("--batching-parameters-file", metavar="FILE",
                          help="TF Serving batching parameters text file (max_batch_size { value: 32 } ...)")
    batching.add_argument("--max-batch-size", type=int, default=32, help="rows per merged batch (default 32)")
    batching.add_argument("--batch-timeout-micros", type=int, default=2000,
                          help="longest wait for a batch to fill, in microseconds (default 2000)")
    batching.add_argument("--num-batch-threads", type=int, default=2, help="batches run at once (default 2)")
    batching.add_argument("--max-enqueued-batches", type=int, default=100,
                          help="queued batches before requests are refused with UNAVAILABLE (default 100)")
    parser.set_defaults(func=run)


def _sources(args):
    from serving.server.model_config import ModelConfigError, ModelSource, read_models_config

    if bool(args.model_base_path) == bool(args.model_config_file):
        raise CommandError("give --model-base-path DIR or --model-config-file FILE (one of them)")
    if args.model_config_file:
        if not os.path.isfile(args.model_config_file):
            raise CommandError(f"--model-config-file {args.model_config_file}: no such file")
        try:
            return read_models_config(args.model_config_file)
        except ModelConfigError as error:
            raise CommandError(str(error)) from None
    if not os.path.isdir(args.model_base_path):
        raise CommandError(f"--model-base-path {args.model_base_path}: no such directory")
    if args.num_versions < 1:
        raise CommandError("--num-versions must be at least 1")
    try:
        return [ModelSource.for_base_path(args.model_base_path, args.model_name, args.num_versions)]
    except (ValueError, TypeError) as error:
        name = args.model_name or os.path.basename(os.path.abspath(args.model_base_path).rstrip(os.sep))
        raise CommandError(f"--model-name {name!r}: {error}") from None


def _batching(args):
    from serving.server.engine import BatchingOptions
    from serving.server.model_config import BATCHING_FIELDS, ModelConfigError, read_batching_parameters

    if args.batching_parameters_file and not args.enable_batching:
        raise CommandError("--batching-parameters-file needs --enable-batching")
    if not args.enable_batching:
        return None
    values = {name: getattr(args, name) for name in BATCHING_FIELDS}
    if args.batching_parameters_file:
        path = args.batching_parameters_file
        if not os.path.isfile(path):
            raise CommandError(f"--batching-parameters-file {path}: no such file")
        try:
            parsed = read_batching_parameters(path)
        except ModelConfigError as error:
            raise CommandError(str(error)) from None
        for name in parsed.pop("ignored"):
            print(f"bert-keras serve: note: {path}: {name} is not used by the embedded server", file=sys.stderr)
        values.update(parsed)
    for name, value in values.items():
        if value < (0 if name == "batch_timeout_micros" else 1):
            raise CommandError(f"--{name.replace('_', '-')} must be positive, got {value}")
    return BatchingOptions(**values)


def _print_ready(server, sources, args):
    names = [source.name for source in sources]
    print(f"bert-keras serve: ready: gRPC {server.grpc_address}"
          + (f"  REST {server.rest_url}" if server.rest_url else "")
          + f"  models: {', '.join(names)}", flush=True)
    from serving.server.server import version_states

    for source in sources:
        status, reason = version_states(server.engine, source.name)
        for entry in status:
            problem = f": {entry['error_code']}: {entry['error_message']}" if entry["error_code"] != "OK" else ""
            print(f"  model {source.name} version {entry['version']}: {entry['state']}{problem}", flush=True)
        if not any(entry["state"] == "AVAILABLE" for entry in status):
            print(f"bert-keras serve: warning: model {source.name} has no AVAILABLE version ({reason}); "
                  "its requests answer NOT_FOUND until one loads", flush=True)
    name = names[0]
    tls = f" --tls-ca {args.tls_cert}" if server.tls else ""
    lines = ["", "try:",
             f'  bert-keras query --address {server.grpc_address} --model {name}{tls} "some text"']
    if server.rest_url:
        lines += [
            f"  curl{' --cacert ' + args.tls_cert if server.tls else ''} {server.rest_url}/v1/models/{name}",
            f"  curl{' --cacert ' + args.tls_cert if server.tls else ''} -d '{{\"instances\": [\"some text\"]}}' "
            f"{server.rest_url}/v1/models/{name}:predict",
        ]
    lines += [f"  bert-keras loadtest --address {server.grpc_address} --model {name}{tls} --concurrency 8 "
              "--duration 10",
              f"stop with Ctrl-C or SIGTERM (in-flight requests finish first, up to {args.grace_seconds:g} s)"]
    print("\n".join(lines), flush=True)


def _check_args(args):
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CommandError("TLS needs both --tls-cert and --tls-key")
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path and not os.path.isfile(path):
            raise CommandError(f"{flag} {path}: no such file")
    if args.max_request_bytes < 1024:
        raise CommandError("--max-request-bytes must be at least 1024")
    for flag in ("grpc_max_threads", "grpc_max_concurrent_rpcs", "rest_max_threads", "rest_max_connections",
                 "max_rows_per_request", "max_tokens_per_request"):
        if getattr(args, flag) < 1:
            raise CommandError(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("rest_header_timeout_seconds", "rest_body_timeout_seconds"):
        if not getattr(args, flag) > 0:
            raise CommandError(f"--{flag.replace('_', '-')} must be positive")
    if args.max_num_load_retries < 0 or args.load_retry_interval_micros < 0:
        raise CommandError("--max-num-load-retries and --load-retry-interval-micros must be >= 0")
    if args.port < 0 or args.rest_port < -1:
        raise CommandError("--port must be >= 0 and --rest-port >= -1 (-1: no REST)")


def _server(args, sources, batching):
    """The EmbeddedServer the arguments describe (not started)."""
    from serving.server.engine import InferenceEngine, Limits, LoadRetryOptions
    from serving.server.server import EmbeddedServer

    limits = Limits(max_request_bytes=args.max_request_bytes, max_batch_size_per_request=args.max_rows_per_request,
                    max_tokens_per_request=args.max_tokens_per_request)
    retries = LoadRetryOptions(max_num_load_retries=args.max_num_load_retries,
                               load_retry_interval_s=args.load_retry_interval_micros / 1e6)
    engine = InferenceEngine(sources, batching=batching, limits=limits,
                             poll_interval_s=args.file_system_poll_wait_seconds, load_retries=retries)
    return EmbeddedServer(engine, host=args.host, grpc_port=args.port,
                          rest_port=None if args.rest_port == -1 else args.rest_port,
                          tls_cert=args.tls_cert, tls_key=args.tls_key, max_request_bytes=args.max_request_bytes,
                          grpc_workers=args.grpc_max_threads,
                          grpc_max_concurrent_rpcs=args.grpc_max_concurrent_rpcs,
                          rest_workers=args.rest_max_threads, rest_max_connections=args.rest_max_connections,
                          rest_header_timeout_s=args.rest_header_timeout_seconds,
                          rest_body_timeout_s=args.rest_body_timeout_seconds)


def _start(server, sources, batching):
    """Loads the models and opens the ports; CommandError for what stops the server from starting."""
    from serving.server.errors import ServingError

    print(f"bert-keras serve: loading {', '.join(f'{s.name} ({s.base_path})' for s in sources)}"
          + (f" with batching (max_batch_size {batching.max_batch_size}, timeout {batching.batch_timeout_micros} us)"
             if batching else ""), flush=True)
    try:
        server.start()
    except ServingError as error:
        raise CommandError(f"cannot start: {error.message}") from None
    except OSError as error:
        raise CommandError(str(error)) from None


def run(args):
    # This module imports nothing slow, and so does serving.server.server: the SIGTERM / SIGINT
    # handlers are in place before TensorFlow is imported and the models load (during startup a
    # signal abandons loading, exit 0, nothing served; after the ready line it drains).
    from serving.server.server import serve_until_shutdown

    settings = {}

    def build():
        _check_args(args)
        settings["sources"], settings["batching"] = _sources(args), _batching(args)
        return _server(args, settings["sources"], settings["batching"])

    def on_signal(number):
        import signal

        print(f"bert-keras serve: {signal.Signals(number).name}: draining (up to {args.grace_seconds:g} s)",
              flush=True)

    outcome = serve_until_shutdown(
        build, start=lambda server: _start(server, settings["sources"], settings["batching"]),
        on_ready=lambda server: _print_ready(server, settings["sources"], args),
        grace_s=args.grace_seconds, on_signal=on_signal)
    if outcome.stopped_while_starting:
        print(f"bert-keras serve: {outcome.stopped_while_starting}: stopped while starting (nothing was served)",
              flush=True)
    else:
        print("bert-keras serve: stopped" + ("" if outcome.drained else " (some requests did not finish in time)"),
              flush=True)
    return 0
