"""`bert-keras predict`: labels + probabilities, NER entities, or SQuAD answers from a fine-tuned model."""

import argparse
import shlex
import sys
import warnings

from bert_keras import json_output
from bert_keras.cli.flag_arguments import add_null_threshold_option, check_null_threshold
from pipelines.command_options import add_option, positive_int
from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "predict",
        help=summary,
        description=(
            "Run a fine-tuned model directory (from `bert-keras finetune`) on new text: classification\n"
            "gives the label and the class probabilities, NER the entities with their words.\n"
            "A whole dataset file (--data FILE): SQuAD JSON writes predictions.json and\n"
            "nbest_predictions.json (+ null_odds.json for v2.0) in the official format; a SWAG CSV\n"
            "(train, val or the unlabelled test.csv) writes swag_predictions.jsonl, the chosen\n"
            "ending of each row."
        ),
        epilog=('examples: bert-keras predict --model out/sentiment "I loved it." "Dreadful."\n'
                "          bert-keras predict --model out/squad --data dev-v1.1.json --output-dir out/pred\n"
                "          bert-keras predict --model out/swag --data test.csv --output-dir out/pred"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="texts; a sentence pair as 'A ||| B' (or A<TAB>B in --input); SWAG: "
                             "'context ||| ending1 ||| ending2 ||| ending3 ||| ending4'")
    parser.add_argument("--model", required=True, metavar="DIR", help="a finetune --output-dir")
    parser.add_argument("--input", metavar="FILE",
                        help="one text per line ('-' = stdin, also read when lines are piped and no TEXT is given); "
                             "a blank line is an error, so prediction i is line i")
    add_option(parser, "--data", "--squad", metavar="FILE",
               help="a whole dataset file: SQuAD JSON (span QA models) or SWAG CSV (multiple choice models)")
    parser.add_argument("--output", metavar="FILE", help="JSONL file of predictions")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="--data: where the prediction files go (default: the model directory)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --output file (--data: the prediction files in --output-dir)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default 32)")
    parser.add_argument("--max-length", type=positive_int, default=None, metavar="N",
                        help="classification of single texts, NER, embeddings: read N word pieces of a text, "
                             "in overlapping windows (default: the model's setting, one window unless set)")
    parser.add_argument("--stride", type=positive_int, default=None, metavar="N",
                        help="with --max-length: word pieces between window starts (default: the model's "
                             "setting, half a window unless set)")
    parser.add_argument("--n-best-size", type=positive_int, default=None,
                        help="squad: n-best list length (default: the model's setting, 20 unless set)")
    parser.add_argument("--max-answer-length", type=positive_int, default=None,
                        help="squad: word pieces of an answer at most (default: the model's setting, 30 unless set)")
    add_null_threshold_option(parser, "squad v2.0: predict no answer when null_odds exceeds this (default: the "
                                      "model's own threshold, 0.0 unless set or tuned)")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    parser.set_defaults(func=run)


def _read_texts(args, reads_pairs, exact_pairs=False):
    """`(texts, given, sources)`: the TEXT arguments then the lines of --input, each split into a
    pair at ' ||| ' (and, for a model that reads pairs, at a tab), each as typed (`given`), and
    where each came from, in the words of an error message (`given_texts`: `TEXT argument 2`,
    `--input FILE, line 7`). A single-text model keeps a tab as the text's whitespace: a line of
    pasted TSV is one text, not a pair that model refuses. `exact_pairs` (a sentence-pair
    classifier): a line of three fields (`A<TAB>B<TAB>label`) is an error naming the line; it was
    read as the pair (A, 'B<TAB>label'), the label scored as part of the second sentence."""
    from serving.text_requests import given_texts, piped_standard_input, split_pairs

    if not args.texts and not args.input and piped_standard_input():
        args.input = "-"  # `... | bert-keras predict --model DIR`: the piped lines, as --input -
    # Row i of the output is line i of --input, as `embed` reads it: a blank line is refused by number.
    given, sources = given_texts(args.texts, args.input, refuse_blank=True)
    return split_pairs(given, at_tabs=reads_pairs, exact=exact_pairs, sources=sources), given, sources


def run(args):
    from pipelines.output_paths import check_output_file
    from bert_keras.families import family, resolve
    from bert_keras.tasks import load
    from bert_keras.tasks.inputs import EmptyTextWarning, ItemInputError
    from bert_keras.tasks.task_rows import empty_texts_message
    from pipelines.atomic_writes import atomic_file

    if not args.data:
        check_output_file(args.output, overwrite=args.overwrite, inputs=[args.input, args.model], flag="--output")
    task = load(args.model)
    writer = family(task.kind).dataset_predictions
    # Checked before --data too: a SQuAD or SWAG file's predictions would ignore them without a word.
    window_options = {name: value for name, value in (("max_length", args.max_length), ("stride", args.stride))
                      if value is not None}
    if window_options and not task.reads_windows():
        flags = " / ".join("--" + name.replace("_", "-") for name in window_options)
        reads = ("reads each sentence pair as one window" if task.settings.get("text_pair") else
                 "does not read texts in windows of this setting")
        raise CommandError(f"{flags}: {args.model} is a {task.kind} model that {reads}")
    if args.data:
        if writer is None:
            raise CommandError(f"--data FILE: a whole dataset file is predicted by a SQuAD or SWAG model; {args.model} "
                               f"is a {task.kind} model: give its texts as TEXT arguments or --input FILE")
        check_null_threshold(args, task)
        return _predict_dataset(args, task, resolve(writer))
    # The decoding flags of a SQuAD model apply to its TEXT / --input answers too; any other model has none.
    answer_options = {name: value for name, value in (("threshold", args.null_threshold),
                                                      ("n_best_size", args.n_best_size),
                                                      ("max_answer_length", args.max_answer_length))
                      if value is not None}
    if answer_options and writer is None:
        flags = {"threshold": "--null-threshold", "n_best_size": "--n-best-size",
                 "max_answer_length": "--max-answer-length"}
        raise CommandError(f"{', '.join(flags[name] for name in answer_options)}: only a SQuAD model has "
                           f"answer settings; {args.model} is a {task.kind} model")
    check_null_threshold(args, task)
    texts, given, sources = _read_texts(args, reads_pairs=task.dataset_layout.x_is_tuple,
                                        exact_pairs=bool(task.settings.get("text_pair")))
    if not texts and args.input and not args.texts:
        raise CommandError(f"--input {args.input}: holds no text (the file is empty)")
    if not texts:
        raise CommandError("no text given: pass TEXT arguments, --input FILE or lines on standard input"
                           + (" (or --data FILE, a whole dataset file)" if writer else ""))
    with task.verbosity(int(sys.stdout.isatty() and not args.json)):  # a progress bar on a terminal
        try:
            with warnings.catch_warnings():  # said below, by argument or line, not as a script's "row 3"
                warnings.simplefilter("ignore", EmptyTextWarning)
                rows = task.predict_rows(texts, batch_size=args.batch_size, **window_options, **answer_options)
        except ItemInputError as error:  # `items[3]`, in a script's words: the argument or the line here
            raise CommandError(error.command_message(sources[error.index], given[error.index])) from None
    empty = [i for i, row in enumerate(rows) if row.get("empty")]
    if empty:
        warnings.warn(empty_texts_message(len(empty), sources[empty[0]],
                                          '"empty": true marks them in the JSON lines (--json, --output)'),
                      EmptyTextWarning)
    # Texts as they are, not \uXXXX escapes (as tokenize, embed, query and the REST server write
    # them): a Korean review stays readable in the file and on the terminal; the file is UTF-8.
    if args.output:
        with atomic_file(args.output) as f:
            f.writelines(json_output.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    with task.windows_read(**window_options):  # a truncated row says how much this call read
        for row in rows:
            print(json_output.dumps(row, ensure_ascii=False) if args.json else task.row_text(row))
    if args.output:  # with --json, stdout is the JSON lines alone (a pipe into jq); the note goes to stderr
        print(f"wrote {len(rows)} predictions to {args.output}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _predict_dataset(args, task, write_predictions):
    """`--data FILE`: the family's `dataset_predictions` writer, its files checked before it predicts."""
    directory = args.output_dir or args.output or args.model  # --output DIR: the former spelling
    directory_flag = "--output-dir" if args.output_dir else "--output" if args.output else "--model"
    with task.verbosity(int(sys.stdout.isatty())):
        summary, paths, scored = write_predictions(
            task, args.data, directory, batch_size=args.batch_size, overwrite=args.overwrite,
            path_flag="--data", directory_flag=directory_flag,
            threshold=args.null_threshold, n_best_size=args.n_best_size, max_answer_length=args.max_answer_length)
    print(f"{summary}; wrote " + ", ".join(sorted(paths.values())))
    if scored:  # an unlabelled file (SWAG's test.csv) has nothing to score
        print(f"next: bert-keras evaluate --model {shlex.quote(args.model)} --data {shlex.quote(args.data)}")
    return 0
