"""`bert-keras serve`: exported SavedModels behind TF Serving's gRPC and REST APIs, in one Python process.

Thin: the flags are the fields of `serving.server.options.ServerOptions` (which checks them
and builds the server), `serving.server.server.serve_until_shutdown` runs it; this module prints.
"""

import argparse
import signal
import sys

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
            "  bert-keras serve --model-base-path models/sentiment --port 0 --rest-port 0   # free ports\n"
            "  bert-keras serve --model-base-path models/sentiment --host 0.0.0.0 --tls-cert c.pem --tls-key k.pem\n"
            "\nthe same directory runs in TF Serving:\n"
            "  docker run -p 8500:8500 -p 8501:8501 -v $PWD/models/sentiment:/models/sentiment \\\n"
            "    -e MODEL_NAME=sentiment tensorflow/serving"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_server_options(parser)
    parser.set_defaults(func=run)


def run(args):
    # This module imports nothing slow, and neither do serving.server.server and .options: the
    # SIGTERM / SIGINT handlers are in place before TensorFlow is imported and the models load
    # (during startup a signal abandons loading, exit 0, nothing served; after the ready line it drains).
    from serving.server.options import ServerOptions, ready_report, start_server
    from serving.server.server import serve_until_shutdown

    options = ServerOptions.from_namespace(args)
    settings = {}

    def build():
        options.check()
        settings["sources"] = options.model_sources()
        settings["batching"] = options.batching(note=lambda line: say(f"note: {line}", file=sys.stderr))
        return options.build_server(settings["sources"], settings["batching"])

    def say(line, file=sys.stdout):
        print(f"bert-keras serve: {line}", file=file, flush=True)

    def on_ready(server):
        report = ready_report(server, settings["sources"], grace_s=args.grace_seconds, tls_ca=args.tls_cert)
        print("\n".join(report), flush=True)

    outcome = serve_until_shutdown(
        build, start=lambda server: start_server(server, settings["sources"], settings["batching"], say=say),
        on_ready=on_ready, grace_s=args.grace_seconds,
        on_signal=lambda number: say(f"{signal.Signals(number).name}: draining (up to {args.grace_seconds:g} s)"))
    say(outcome.summary())
    return 0
