"""`bert-keras quickstart`: runs the example script `bert_keras/examples/quickstart.py`.

The workflow (weights, vocabulary, pretraining, fine-tuning, evaluation, export,
serving, queries) is a readable script on the public API, shipped in the package;
`python examples/quickstart.py` in a checkout runs the same code. This command
only gives it the `bert-keras` parser and error handling.
"""

import argparse

from bert_keras.cli.main import CommandError
from bert_keras.examples import quickstart as example


def register(subparsers, summary):
    parser = subparsers.add_parser("quickstart", help=summary, description=example.DESCRIPTION,
                                   epilog=example.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    example.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args):
    try:
        return example.run(args)
    except example.QuickstartError as error:
        raise CommandError(str(error)) from None
