"""`bert-keras loadtest`: QPS and latency percentiles of any TF Serving-compatible endpoint (gRPC or REST)."""

import argparse
import sys

from bert_keras import json_output
from pipelines.command_options import positive_int
from bert_keras.cli.main import CommandError
from bert_keras.cli.server_arguments import add_connection_arguments, add_input_arguments, build_inputs, make_client

DEFAULT_TEXT = "The quick brown fox jumps over the lazy dog."


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "loadtest",
        help=summary,
        description=(
            "Send predict requests with --concurrency in flight (gRPC: one asyncio loop; REST: threads),\n"
            "for --requests N or --duration S,\n"
            "and report throughput (requests/s, rows/s), latency p50/p95/p99 and errors by status code.\n"
            "Works against `bert-keras serve` and tensorflow_model_server alike (gRPC or --rest)."
        ),
        epilog=(
            "examples:\n"
            "  bert-keras loadtest --model sentiment --concurrency 8 --duration 10\n"
            "  bert-keras loadtest --model sentiment --rest --address 127.0.0.1:8501 --requests 500 --batch-size 8\n"
            "  bert-keras loadtest --model sentiment --input reviews.txt --concurrency 32 --duration 30 --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_arguments(parser)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help=f"texts to send (default: {DEFAULT_TEXT!r}, and a second sentence for a sentence-pair model)")
    parser.add_argument("--input", metavar="FILE", help="UTF-8 file, one text per line (requests rotate over it)")
    add_input_arguments(parser)
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--requests", type=int, help="send this many requests (default 200)")
    bound.add_argument("--duration", type=float, metavar="S", help="send requests for S seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    parser.add_argument("--batch-size", type=positive_int, default=1, help="rows per request (default 1)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed requests first (default 10)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args):
    from serving.client import ServingClientError
    from serving.loadtest import check_settings, load_test, request_batches
    from serving.text_requests import given_texts, sample_texts, split_morphemes, takes_texts

    check_settings(concurrency=args.concurrency, batch_size=args.batch_size, warmup=args.warmup,
                   requests=args.requests, duration_s=args.duration)
    if args.requests is None and args.duration is None:
        args.requests = 200
    client, signature = make_client(args)
    with client:
        # Each text with where it came from: an error names the argument, or the --input file and line.
        texts, sources = given_texts(args.texts, args.input)
        if not texts and takes_texts(signature["inputs"]):
            # A pair model refused the lone default sentence, which the user never typed: made a pair.
            texts = sample_texts(signature["inputs"], DEFAULT_TEXT, text_b=getattr(args, "text_b", None) or ())
            sources = ["the default text"] * len(texts)
        inputs = build_inputs(signature["inputs"], args, texts, sources, signature.get("outputs"))
        if args.pre_tokenizer:  # split once, before the clock starts: the server's time is measured
            inputs = split_morphemes(inputs, args.pre_tokenizer)[0]
        inputs_list = request_batches(inputs, args.batch_size)  # rotating
        try:
            # One request first: a model that rejects the input fails here with its message.
            client.predict(inputs_list[0], signature_name=args.signature)
        except ServingClientError as error:
            raise CommandError(f"the first request failed: {error.code}: {error.message}") from None
        result = load_test(client, inputs_list, signature_name=args.signature, concurrency=args.concurrency,
                           requests=args.requests, duration_s=args.duration, warmup=args.warmup,
                           # A bar on a terminal only: in a log or a pipe its redraws were \r-joined text.
                           progress=not args.no_progress and not args.json and sys.stderr.isatty())
    target = f"{client.protocol} {client.address} model {args.model}"
    if args.json:
        print(json_output.dumps({"target": target, **result.to_json()}, indent=2))
    else:
        print(f"load test of {target} (signature {args.signature})")
        print(result.summary())
    return 0 if result.ok else 1
