"""What several commands share about fine-tuned models: the `--task` arguments and their
`DatasetSpec`."""

from bert_keras.cli.flag_arguments import add_stride_option


def add_column_arguments(parser):
    """Which columns of a CSV / TSV / JSONL file hold the texts and labels (`finetune`, `evaluate`)."""
    parser.add_argument("--text-column", default=None,
                        help="csv: text column (default: text / sentence / sentence1 / question1 / question / "
                             "premise / document)")
    parser.add_argument("--text-b-column", default=None,
                        help="csv: second text column (default, when present and not --text-column: the text "
                             "column's name with its final 1 as 2, text_b, sentence2, question2, hypothesis; "
                             "sentence after question, as QNLI)")
    parser.add_argument("--label-column", default=None, help="csv: label column (default: label)")


def add_task_arguments(parser, required=True, stride=True):
    """`--task` and its data flags; `stride`: also `--stride` for SQuAD's context windows (with
    `--doc-stride` as its hidden alias); a command that reads long texts in windows too adds it
    with `add_window_options(parser, squad=True)` instead."""
    parser.add_argument("--task", required=required, metavar="TASK",
                        help="glue/NAME | csv:PATH | conll2003 | swag | squad/v1.1 | squad/v2.0 | korquad/v1.0 "
                             "(with --data and --eval-data)")
    parser.add_argument("--regression", action="store_true",
                        help="csv: labels are numbers (one output, mean squared error)")
    add_column_arguments(parser)
    if stride:
        add_stride_option(parser, windows=False, squad=True)
    parser.add_argument("--data-dir", default=None, help="TFDS data directory")


def task_spec(args, *, train_path=None, eval_path=None, training=None):
    """`bert_keras.tasks.named_datasets.task_spec` of `--task` and its flags (or of a saved model's provenance)."""
    from bert_keras.tasks.named_datasets import task_spec as spec_of

    names = ("regression", "text_column", "text_b_column", "label_column", "stride", "data_dir")
    spec = spec_of(getattr(args, "task", None), training=training, train_path=train_path, eval_path=eval_path,
                   **{name: getattr(args, name, None) for name in names})
    # A missing file is named with its flag: "--eval-data dev.tsv: no such file", not "dev.tsv: ...".
    task = getattr(args, "task", None) or ""
    named = {train_path: "--data ", eval_path: "--eval-data "}
    if task.lower().startswith("csv:"):
        named.setdefault(task[4:], "--task " + task[:4])
    spec.flags.update({path: flag for path, flag in named.items() if path})
    return spec

