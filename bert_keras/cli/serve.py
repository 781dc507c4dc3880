"""`bert-keras serve`: exported SavedModels behind TF Serving's gRPC and REST APIs, in one Python process.

Thin: the flags are the fields of `serving.server.options.ServerOptions` (which checks them
and builds the server), `serving.server.server.serve_until_shutdown` runs it; this module prints.
"""

import argparse
import sys

from bert_keras.cli.main import CommandError
from bert_keras.cli.server_arguments import add_server_options

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
    add_server_options(parser)
    parser.set_defaults(func=run)


def _print_ready(server, sources, args):
    from serving.server.options import ready_report

    for line in ready_report(server, sources, grace_s=args.grace_seconds, tls_ca=args.tls_cert):
        print(line, flush=True)


def _start(server, sources, batching):
    """Loads the models and opens the ports; CommandError for what stops the server from starting."""
    from serving.server.errors import ServingError
    from serving.server.options import loading_line

    print(f"bert-keras serve: {loading_line(sources, batching)}", flush=True)
    try:
        server.start()
    except ServingError as error:
        raise CommandError(f"cannot start: {error.message}") from None
    except OSError as error:
        raise CommandError(str(error)) from None


def run(args):
    # This module imports nothing slow, and neither do serving.server.server and .options: the
    # SIGTERM / SIGINT handlers are in place before TensorFlow is imported and the models load
    # (during startup a signal abandons loading, exit 0, nothing served; after the ready line it drains).
    from serving.server.options import ServerOptions
    from serving.server.server import serve_until_shutdown

    options = ServerOptions.from_namespace(args)
    settings = {}

    def build():
        options.check()
        settings["sources"] = options.model_sources()
        settings["batching"] = options.batching(
            note=lambda line: print(f"bert-keras serve: note: {line}", file=sys.stderr))
        return options.build_server(settings["sources"], settings["batching"])

    def on_signal(number):
        import signal

        print(f"bert-keras serve: {signal.Signals(number).name}: draining (up to {args.grace_seconds:g} s)",
              flush=True)

    outcome = serve_until_shutdown(
        build, start=lambda server: _start(server, settings["sources"], settings["batching"]),
        on_ready=lambda server: _print_ready(server, settings["sources"], args),
        grace_s=args.grace_seconds, on_signal=on_signal)
    print(f"bert-keras serve: {outcome.summary()}", flush=True)
    return 0
