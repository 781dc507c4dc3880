"""`bert-keras evaluate`: score a `finetune` output directory on its dev data (or --data FILE)."""

import shlex
import sys
import time

from bert_keras import json_output
from pipelines.command_options import positive_int
from bert_keras.cli.task_arguments import add_column_arguments


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "evaluate",
        help=summary,
        description=(
            "Load a fine-tuned model directory (from `bert-keras finetune`) and score it: the GLUE "
            "metric(s) of the task, accuracy/F1 for csv: tasks (Pearson/Spearman for a regression), "
            "SQuAD exact match / F1 (v2.0: HasAns/NoAns and the best no-answer threshold), entity "
            "precision/recall/F1 for NER, accuracy for multiple choice (SWAG)."
        ),
        epilog="example:\n  bert-keras evaluate --model out/sentiment --data dev.tsv",
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="a finetune --output-dir")
    parser.add_argument("--task", default=None,
                        help="override the task saved in task.json (same head, other data)")
    parser.add_argument("--data", metavar="PATH", help="evaluation file (default: the task's dev data)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="examples per forward pass (default 32)")
    add_column_arguments(parser)
    parser.add_argument("--output", metavar="FILE",
                        help="write the metrics JSON here (default: DIR/eval_results.json when "
                             "scoring the task's dev data, else only printed)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--json", action="store_true", help="print only the metrics JSON")
    parser.set_defaults(func=run)


def run(args):
    from pipelines.output_paths import check_output_file
    from bert_keras.cli.task_arguments import task_spec
    from bert_keras.finetuned_model import write_eval_results
    from bert_keras.tasks import load
    from bert_keras.tasks.named_datasets import spec_for_model
    from pipelines.atomic_writes import atomic_file

    started = time.time()
    check_output_file(args.output, overwrite=args.overwrite, inputs=[args.data, args.model], flag="--output")
    task = load(args.model)
    spec = spec_for_model(task_spec(args, training=task.to_finetuned().training), task, args.model, args.task)
    progress = int(sys.stdout.isatty() and not args.json)  # a progress bar with ETA on a terminal
    if args.data:
        spec.flags[args.data] = "--data "  # "--data dev.tsv: no such file"
    x, y = spec.evaluation_data(args.data)
    spec.prepare_scoring(task)  # e.g. a KorQuAD file scored with KorQuAD's metric
    spec.check_texts(task.tokenizer)  # a text the model reads no token of, by file and line
    metrics = task.score(x, y, batch_size=args.batch_size, verbose=progress)
    if args.output:
        with atomic_file(args.output) as f:
            json_output.dump(metrics, f, indent=2, sort_keys=True)
    elif not args.data and not args.task:
        write_eval_results(args.model, metrics)
    if args.json:
        print(json_output.dumps(metrics, sort_keys=True))
        return 0
    print(spec.format_metrics(metrics))
    print(json_output.dumps(metrics, sort_keys=True))
    print(f"\n({time.time() - started:.0f}s) next: bert-keras predict --model {shlex.quote(args.model)} {task.predict_example}")
    return 0
