"""A 1 MB text in the exported serving graph: does it cost what a text of one window costs?

The export's text signatures (`serving/signatures/text_inputs.py`) check a text's UTF-8 and
leading whitespace over all of its bytes, then cut it to `seq_length x chars_per_token` code
points BEFORE the tokenizer reads it: a 1 MB text costs one pass over its bytes more than a text
that fills the model's window. The tests check the behaviour (`tests/serving/test_export_inputs.py`:
the answer equals the Python path's on the whole text, `truncated` is set, the tokenizer only
ever sees the cut); this script measures the cost, as ratios on the same machine, in one process.

Models: the tiny random fine-tuned models of the serving tests (`tests/serving/export_fixtures.py`:
1 layer, H=32), exported with `serving.exporter.export_saved_model` (tf_text tokenizer), one per
kind: classification (a text pair), ner, squad (v2.0), embedding. A tiny model keeps the model's
own cost negligible, so the ratio is what the text handling costs. Per kind, `serving_default` is
called with:

* window: a text of ~200 characters (more word pieces than the window holds: the same model
  work as the 1 MB text);
* 1 MB: a 1,000,000-byte text of the same prose (the tests' `one_megabyte_text`).

The first call of each signature (a window text) is timed apart: graph set-up, not steady cost.
Then --rounds rounds, each timing --calls calls of each input in turn (the order
reversed on odd rounds: the machine may be shared); each figure is the median over rounds. For
reference, `tokenize all` is the eager tokenizer on the whole 1 MB text (no cut), against one
1 MB call of the signatures (median over kinds).

    python benchmarks/bench_export_long_text.py [--rounds 5] [--calls 10] [--kinds classification ner]

The closing SUMMARY line gives, per kind, 1 MB / window (seconds per call; what the pass over
the bytes costs) and tokenize-all / 1 MB call.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "serving"))  # export_fixtures: the tests' tiny models

KINDS = ("classification", "ner", "squad", "embedding")
WORDS = "The battery of Zürich lasts all week, and the film was great! ".split()


def prose(size):
    """Words of the tests' 1 MB text until `size` bytes (the same text as `one_megabyte_text`)."""
    text, total = [], 0
    while total < size:
        word = WORDS[len(text) % len(WORDS)]
        text.append(word)
        total += len(word.encode()) + 1
    return " ".join(text)


def inputs_of(kind, text):
    """The signature's inputs with `text` as its long input."""
    if kind == "classification":
        return {"text": [text, "short"], "text_b": ["short", text]}
    if kind == "squad":
        return {"question": ["How long does the battery last?"], "context": [text]}
    return {"text": [text]}


def export_all(kinds, base_path):
    """{kind: loaded serving_default} of each kind's tiny model, exported under `base_path`."""
    import tensorflow as tf

    import export_fixtures
    from serving.exporter import export_saved_model

    functions, vocab = {}, None
    for kind in kinds:
        directory = os.path.join(base_path, "source", kind)
        if kind == "embedding":
            source, options = export_fixtures.make_encoder_spec(directory), {"normalize": True}
        else:
            source, options = export_fixtures.make_finetuned_dir(kind, directory), {}
            vocab = os.path.join(source, "vocab.txt")
        result = export_saved_model(source, base_path, kind, check=False, progress=None, **options)
        loaded = tf.saved_model.load(os.path.join(base_path, kind, str(result.version)))
        functions[kind] = (loaded, loaded.signatures["serving_default"])
    return functions, vocab


def seconds_per_call(function, inputs, calls):
    import tensorflow as tf

    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    started = time.perf_counter()
    for _ in range(calls):
        function(**tensors)
    return (time.perf_counter() - started) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="calls per input per round")
    args = parser.parse_args()

    import tensorflow as tf

    from pipelines import BertTokenizer

    huge, window = prose(1_000_000), prose(200)
    with tempfile.TemporaryDirectory() as base_path:
        functions, vocab = export_all(args.kinds, base_path)
        summary = []
        for kind in args.kinds:
            _, function = functions[kind]
            contestants = {"window": inputs_of(kind, window), "1 MB": inputs_of(kind, huge)}
            first = seconds_per_call(function, contestants["window"], 1)
            times = {name: [] for name in contestants}
            for round_index in range(args.rounds):
                order = list(contestants) if round_index % 2 == 0 else list(reversed(contestants))
                for name in order:
                    times[name].append(seconds_per_call(function, contestants[name], args.calls))
            median = {name: statistics.median(values) for name, values in times.items()}
            ratio = median["1 MB"] / median["window"]
            print(f"{kind:>14}: window {median['window'] * 1000:8.2f} ms/call, 1 MB {median['1 MB'] * 1000:8.2f} "
                  f"ms/call, 1 MB / window {ratio:6.2f}  (first call: {first:.3f} s)")
            summary.append((kind, ratio))

        tokenizer = BertTokenizer(vocab) if vocab else None
        full = None
        if tokenizer is not None:
            tokenizer.tokenize(tf.constant([window]))  # warm up
            full = statistics.median(seconds_per_call(lambda text: tokenizer.tokenize(text), {"text": [huge]}, 1)
                                     for _ in range(3))
            print(f"{'tokenize all':>14}: {full * 1000:8.2f} ms for the whole 1 MB text, eager (no cut)")
        one_mb = statistics.median(
            seconds_per_call(functions[kind][1], inputs_of(kind, huge), 1) for kind in args.kinds)
        parts = [f"{kind} 1MB/window {ratio:.2f}" for kind, ratio in summary]
        if full is not None:
            parts.append(f"tokenize-all/1MB-call {full / one_mb:.1f}")
        print("SUMMARY: " + ", ".join(parts))


if __name__ == "__main__":
    main()
