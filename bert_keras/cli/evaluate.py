"""`bert-keras evaluate`: score a `finetune` output directory on its dev data (or --data FILE)."""

import json
import time

from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "evaluate",
        help=summary,
        description=(
            "Load a fine-tuned model directory (from `bert-keras finetune`) and score it: the GLUE "
            "metric(s) of the task, accuracy/F1 for csv: tasks, SQuAD exact match / F1 (v2.0: "
            "HasAns/NoAns and the best no-answer threshold), entity precision/recall/F1 for NER."
        ),
        epilog="example: bert-keras evaluate --model out/sentiment --data dev.tsv",
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="a finetune --output-dir")
    parser.add_argument("--task", default=None,
                        help="override the task saved in task.json (same head, other data)")
    parser.add_argument("--data", metavar="PATH", help="evaluation file (default: the task's dev data)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", metavar="FILE",
                        help="write the metrics JSON here (default: DIR/eval_results.json when "
                             "scoring the task's dev data, else only printed)")
    parser.add_argument("--json", action="store_true", help="print only the metrics JSON")
    parser.set_defaults(func=run)


def run(args):
    from bert_keras.cli.finetune import load_finetuned, write_results
    from bert_keras.cli.task_registry import TaskError, parse_task

    started = time.time()
    model, task, tokenizer, info = load_finetuned(args.model)
    if args.task and args.task.lower() != info["task"].lower():
        try:
            other = parse_task(args.task)
        except TaskError as error:
            raise CommandError(str(error)) from None
        if other.kind != task.kind:
            raise CommandError(f"--task {args.task} needs a {other.kind} head; {args.model} "
                               f"holds a {task.kind} model ({info['task']})")
        other.restore(info)
        other.labels = task.labels
        task = other
    try:
        metrics = task.evaluate(model, tokenizer, seq_length=info["seq_length"],
                                batch_size=args.batch_size, path=args.data)
    except TaskError as error:
        raise CommandError(str(error)) from None
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(metrics, f, indent=2, sort_keys=True)
    elif not args.data and not args.task:
        write_results(args.model, metrics)
    if args.json:
        print(json.dumps(metrics, sort_keys=True))
        return 0
    print(task.format_metrics(metrics))
    print(json.dumps(metrics, sort_keys=True))
    example = "--squad FILE.json" if task.kind == "squad" else '"your text"'
    print(f"\n({time.time() - started:.0f}s) next: bert-keras predict --model {args.model} {example}")
    return 0
