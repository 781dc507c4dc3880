"""SWAG-shaped multiple-choice files from real sentences, for timing when SWAG is absent.

SWAG's files (rowanz/swagaf `data/{train,val}.csv`, 28 and 7 MB) have no public copy that can be
fetched here. The whole-`fit` speed of a multiple-choice model depends on the item shape (four
`(context, ending)` pairs of ~20 word pieces), not on what the items say, so this writes files
in SWAG's CSV format from consecutive real sentences of a one-sentence-per-row TSV (GLUE CoLA's
`train.tsv` by default): sentence `i` is the context, the first two words of sentence `i + 1`
are `sent2`, its remaining words the right ending, and the remaining words of three distant
sentences the wrong ones, at a position that cycles through 0-3.

The items are for timing only: the right ending is a real continuation of the corpus, which a
model can learn to spot to some degree, but it is not SWAG's task, and accuracies on these files
say nothing about SWAG.

    python benchmarks/swag_shaped_items.py benchmarks/.data/cola/train.tsv /tmp/swag-shaped
    python benchmarks/bench_task_accuracy.py --data-dir /tmp/swag-shaped --families swag
"""

import argparse
import csv
import os

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]


def read_sentences(path, column=3, min_words=5):
    """The `column`-th tab-separated field of each row with at least `min_words` words."""
    sentences = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) > column and len(fields[column].split()) >= min_words:
                sentences.append(" ".join(fields[column].split()))
    return sentences


def swag_rows(sentences):
    """One SWAG row per pair of consecutive sentences; the wrong endings come from sentences a
    quarter, a half and three quarters of the corpus away (neighbours in CoLA are often
    minimal pairs of each other)."""
    rows, count = [], len(sentences)
    for item, start in enumerate(range(0, count - 1, 2)):
        context, following = sentences[start], sentences[start + 1]
        words = following.split()
        sent2, right = " ".join(words[:2]), " ".join(words[2:])
        wrong = [" ".join(sentences[(start + count * k // 4) % count].split()[2:]) for k in (1, 2, 3)]
        label = item % 4
        endings = wrong[:label] + [right] + wrong[label:]
        rows.append([item, f"shaped-{item}", start, f"{context} {sent2}", context, sent2, "gold", *endings, label])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sentences", help="a TSV with one sentence per row (GLUE CoLA's train.tsv)")
    parser.add_argument("output_dir", help="writes OUTPUT_DIR/swag/train.csv and val.csv (refuses existing ones)")
    parser.add_argument("--column", type=int, default=3, help="the sentence's field (CoLA: 3)")
    parser.add_argument("--val-fraction", type=float, default=0.2)
    args = parser.parse_args()
    rows = swag_rows(read_sentences(args.sentences, args.column))
    cut = int(len(rows) * (1 - args.val_fraction))
    os.makedirs(os.path.join(args.output_dir, "swag"), exist_ok=True)
    paths = [os.path.join(args.output_dir, "swag", name) for name in ("train.csv", "val.csv")]
    existing = [path for path in paths if os.path.exists(path)]
    if existing:
        raise SystemExit(f"{', '.join(existing)}: already there; give another OUTPUT_DIR (nothing written)")
    for path, part in zip(paths, (rows[:cut], rows[cut:])):
        with open(path, "x", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER)
            writer.writerows(part)
        print(f"{path}: {len(part)} items")


if __name__ == "__main__":
    main()
