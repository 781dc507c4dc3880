"""`bert-keras`: one thin module per subcommand.

Each subcommand module exposes `register(subparsers)`, which adds its parser and
sets `func=run`. Heavy imports (TensorFlow, Keras) happen inside `run`, so that
`bert-keras --help` answers at once.
"""

import argparse
import importlib
import os
import sys

# (module under bert_keras.cli, one-line summary) in the order `--help` lists them.
SUBCOMMANDS = [
    ("info", "show versions, devices and the tested matrix"),
    ("vocab", "build a WordPiece vocabulary from text files"),
    ("tokenize", "tokenize text exactly as the original BERT, with offsets"),
    ("encode", "load a model and encode sentences into vectors"),
    ("convert", "convert weights between HF, TF1 (Google), keras-hub and .keras"),
    ("create-pretraining-data", "write masked-LM + next-sentence TFRecords (google-research format)"),
    ("pretrain", "pretrain BERT (masked-LM + next-sentence) with model.fit; resumable"),
    ("finetune", "fine-tune on GLUE, CSV/TSV/JSONL, CoNLL-2003, SQuAD or SWAG and evaluate"),
    ("evaluate", "evaluate a fine-tuned model: GLUE table, SQuAD EM/F1, entity P/R/F1"),
    ("predict", "predict with a fine-tuned model (SQuAD: official predictions.json)"),
    ("embed", "sentence and token embeddings to .npy/.jsonl, with --query search"),
    ("attention", "visualise attention: interactive HTML head view + PNG heatmaps"),
]


class CommandError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="bert-keras",
        description="BERT on Keras 3 + TensorFlow: vocabulary, tokenization, weights, and more.",
        epilog="Run `bert-keras COMMAND --help` for the options of one command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in SUBCOMMANDS:
        module = importlib.import_module(f"bert_keras.cli.{name.replace('-', '_')}")
        module.register(sub, summary)
    return parser


def main(argv=None):
    # TensorFlow's C++ INFO lines (oneDNN, CPU features) are noise on a command line.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return args.func(args) or 0
    except (CommandError, FileNotFoundError, ValueError) as error:
        # Library errors (bad vocabulary, mismatched checkpoint, bad input file)
        # name the file and the problem: show the message, not a traceback.
        if os.environ.get("BERT_KERAS_DEBUG") == "1":
            raise
        print(f"bert-keras {args.command}: error: {error}", file=sys.stderr)
        print("(set BERT_KERAS_DEBUG=1 for the full traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
