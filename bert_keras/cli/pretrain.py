"""Pretrain (or continue pretraining) BERT with the masked-LM and next-sentence losses. Writes
checkpoints every --checkpoint-every steps, a backup that a restarted run resumes from, TensorBoard
logs, and the final encoder as encoder.keras. Rerunning a finished run does nothing; a larger
--steps continues it from its last checkpoint; a non-empty --output-dir of another run needs
--overwrite.
"""

import sys
import time

from bert_keras.cli.flag_arguments import add_case_options, add_option, positive_float, positive_int, seed

CONFIGS = "tiny, mini, small, medium, base, large"


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "pretrain",
        help=summary,
        description=__doc__,
        epilog=("example: bert-keras pretrain --data 'out/*.tfrecord' --vocab vocab.txt --config mini "
                "--steps 10000 --output-dir runs/mini"),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="PATTERN",
                        help="TFRecord file pattern from create-pretraining-data (static masking)")
    add_option(source, "--input", "--text", nargs="+", metavar="FILE",
               help="raw text files, one sentence per line, blank line between documents (dynamic masking)")
    parser.add_argument("--vocab", metavar="VOCAB",
                        help="vocab.txt (needed with --input; sizes a named --config; copied to the output)")
    add_case_options(parser, cased_help="cased tokenization (default: as the vocabulary's tokenizer_config.json "
                                        "says, else uncased)")
    parser.add_argument("--config", default="base", metavar="NAME|JSON",
                        help=f"model size ({CONFIGS}) or a config JSON (ours, google or HF); "
                             "ignored with --init (default base)")
    parser.add_argument("--init", metavar="SPEC",
                        help="start from these weights (encoder + pretraining heads when present): "
                             "hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras")
    parser.add_argument("--seq-length", type=int, default=128, help="tokens per example (default 128)")
    parser.add_argument("--max-predictions", type=int, default=20, help="masked positions per example (20)")
    add_option(parser, "--batch-size", "--global-batch-size", type=positive_int, default=32,
               help="examples per step over all replicas (default 32)")
    parser.add_argument("--steps", type=int, required=True, help="total optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=None, help="linear warmup (default 10%% of --steps)")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-4, help="peak learning rate (default 1e-4)")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (default 0.01)")
    parser.add_argument("--strategy", default="auto", choices=["auto", "default", "mirrored", "multiworker", "tpu"],
                        help="tf.distribute strategy (default auto: TPU, else all GPUs, else one device)")
    parser.add_argument("--tpu", metavar="NAME", help="TPU name or address (with --strategy tpu/auto)")
    parser.add_argument("--steps-per-execution", type=int, default=1, help="steps per tf.function call (1)")
    parser.add_argument("--mixed-precision", default="auto", choices=["auto", "off", "float16", "bfloat16"],
                        help="auto: bfloat16 on TPU, float16 on GPU, off on CPU")
    parser.add_argument("--jit-compile", default="auto", choices=["auto", "on", "off"],
                        help="XLA compilation (auto: Keras' choice; off under distribution strategies)")
    parser.add_argument("--checkpoint-every", type=int, default=1000,
                        help="steps between checkpoints and resume backups (default 1000)")
    parser.add_argument("--keep-checkpoints", type=int, default=3, help="checkpoints kept (default 3)")
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of initialisation, dropout, data order and masking (default 0): "
                             "the same seed prints the same losses")
    parser.add_argument("--output-dir", required=True, metavar="DIR", help="where everything is written")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a non-empty --output-dir that is not this run: removes the "
                             "outputs of the pretraining run recorded there (checkpoints, backup, logs, "
                             "encoder); never your other files, nor a file this run reads")
    parser.set_defaults(func=run)


def run(args):
    import logging

    from bert_keras.tasks import Pretrainer

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.time()
    result = Pretrainer.pretrain(
        args.output_dir, steps=args.steps, records=args.data, corpus=args.input, config=args.config,
        init=args.init, vocab_file=args.vocab, lowercase=False if args.cased else None,
        strip_accents=args.strip_accents, seq_length=args.seq_length,
        max_predictions=args.max_predictions, batch_size=args.batch_size, learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps, weight_decay=args.weight_decay, seed=args.seed,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
        strategy=args.strategy, tpu=args.tpu, mixed_precision=args.mixed_precision,
        jit_compile=args.jit_compile, steps_per_execution=args.steps_per_execution,
        overwrite=args.overwrite, verbose=1 if sys.stdout.isatty() else 2, log=print)
    if result.chief:  # multi-worker: the chief reports
        print(result.report(args.output_dir, args.steps, time.time() - started, vocab_copied=bool(args.vocab)))
    return 0
