"""Distil a fine-tuned model into a smaller student of the same task (fewer layers, same
tokenizer and outputs) for cheaper serving; save it and score teacher and student on dev.

(`bert-keras distill`: parse, `bert_keras.tasks.distillation.distill_directory(...)`, print.)
"""

import sys
import time

from pipelines.command_options import add_field_options, add_option, field_values
from bert_keras.cli.main import CommandError
from bert_keras.cli.task_arguments import add_task_arguments, task_spec
from bert_keras.run_options import DistillationOptions


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "distill", help=summary, description=__doc__.split("\n\n")[0],
        epilog="example:\n  bert-keras distill --teacher out/sentiment --layers 3 --output-dir out/sentiment-3l")
    add_task_arguments(parser, required=False)
    parser.add_argument("--teacher", required=True, metavar="DIR", help="the fine-tuned model to distil")
    parser.add_argument("--output-dir", required=True, metavar="DIR",
                        help="where the student model directory is written")
    parser.add_argument("--overwrite", action="store_true", help="replace the student in --output-dir")
    add_option(parser, "--data", "--train", metavar="PATH",
               help="training data (default: the teacher's recorded training file)")
    add_option(parser, "--eval-data", "--eval", metavar="PATH", help="dev file to score at the end")
    add_field_options(parser, DistillationOptions)  # --layers, --init, ... --epochs, ... --augment
    parser.set_defaults(func=run)


def run(args):
    started = time.time()
    if not args.epochs > 0:  # refused before the teacher is read (seconds); --epochs 0 named as typed
        raise CommandError(f"--epochs {args.epochs:g}: a distillation trains at least part of an epoch "
                           "(expected a number > 0)")
    from bert_keras.finetuned_model import read_finetuned
    from bert_keras.tasks.distillation import distill_directory

    # No --task: the teacher's recorded data, with --data / --eval-data in place of its files.
    teacher_data = None if args.task else read_finetuned(args.teacher, load_model=False).training
    spec = task_spec(args, train_path=args.data, eval_path=args.eval_data, training=teacher_data)
    result = distill_directory(args.teacher, spec, args.output_dir, overwrite=args.overwrite,
                               **field_values(DistillationOptions, args),
                               verbose=1 if sys.stdout.isatty() else 2, log=print)
    print(f"\ndone in {time.time() - started:.0f}s")
    print(result.next_steps())
    return 0
