"""Pretrain (or continue pretraining) BERT with the masked-LM and next-sentence losses. Writes
checkpoints every --checkpoint-every steps, a backup that a restarted run resumes from, TensorBoard
logs, and the final encoder as encoder.keras. Rerunning a finished run does nothing; a larger
--steps continues it from its last checkpoint; a non-empty --output-dir of another run needs
--overwrite.
"""

import os
import sys
import time

from bert_keras.cli.flag_arguments import add_case_options, add_unicode_normalization_option, given_lowercase
from pipelines.command_options import add_field_options, add_option, field_values, positive_int


def register(subparsers, summary):
    from bert_keras.run_options import PretrainingOptions  # no TensorFlow: --help stays fast

    parser = subparsers.add_parser(
        "pretrain",
        help=summary,
        description=__doc__,
        epilog=("example:\n  bert-keras pretrain --data 'out/*.tfrecord' --vocab vocab.txt --config mini \\\n"
                "      --steps 10000 --output-dir runs/mini"),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="PATTERN",
                        help="TFRecord file pattern from create-pretraining-data (static masking)")
    add_option(source, "--input", "--text", nargs="+", metavar="FILE",
               help="raw text files, one sentence per line, blank line between documents (dynamic masking)")
    parser.add_argument("--vocab", metavar="VOCAB",
                        help="vocab.txt (needed with --input; sizes a named --config; copied to the output)")
    add_case_options(parser, cased_help="cased tokenization (default: as the vocabulary's tokenizer_config.json "
                                        "says, else as its tokens show)")
    parser.add_argument("--max-chars-per-word", type=positive_int, default=None,
                        help="longer words become [UNK] (default: the vocabulary's recorded limit, else the "
                             "original's 200); --data records written with another limit are refused")
    add_unicode_normalization_option(parser, help=(
        "NFC composes an --input corpus before tokenizing (Hangul written decomposed, NFD jamo, reads as [UNK] "
        "with a Korean vocabulary otherwise), and the run's tokenizer_config.json records it, so the encoder it "
        "saves composes fine-tuning text too; none reads text as given. Default: what the vocabulary records "
        "(bert-keras vocab --unicode-normalization), else none; --data records written with another are refused"))
    parser.add_argument("--output-dir", required=True, metavar="DIR", help="where everything is written")
    add_field_options(parser, PretrainingOptions)  # --steps, --config, --init, ... --overwrite
    parser.set_defaults(func=run)


def run(args):
    import logging

    from bert_keras.run_options import PretrainingOptions
    from bert_keras.tasks import Pretrainer

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.time()
    result = Pretrainer.pretrain(
        args.output_dir, records=args.data, corpus=args.input, vocab_file=args.vocab,
        lowercase=given_lowercase(args), strip_accents=args.strip_accents,
        max_input_chars_per_word=args.max_chars_per_word, unicode_normalization=args.unicode_normalization,
        **field_values(PretrainingOptions, args), verbose=1 if sys.stdout.isatty() else 2, log=print)
    if result.chief:  # multi-worker: the chief reports
        # With --init the vocabulary comes from the checkpoint: what the directory holds says.
        copied = os.path.isfile(os.path.join(args.output_dir, "vocab.txt"))
        print(result.report(args.output_dir, args.steps, time.time() - started, vocab_copied=copied))
    return 0
