"""Tiny fine-tuned model directories for the export / serving tests (no training: seconds).

`make_finetuned_dir(kind, directory)` saves a `bert_keras.tasks` task around a tiny
random model (1 layer, H=32, a 150-token vocabulary of letters, "##" pieces and a few
words) with `save`, the one writer of the fine-tuned model directory
(`bert_keras.finetuned_model`: `model.keras`, `task.json`, `vocab.txt`, `labels.txt`
where the task has labels, `eval_results.json` for classification); its data files go
beside it, in `<directory>.data/`. `bert_keras.tasks.load(D)` reads it. `make_encoder_spec(directory)` writes an `--init` spec for embeddings
(`encoder.keras` + `encoder.vocab.txt`). The session fixtures in `conftest.py`
(`finetuned_dir`, `exported_model`) cache them per kind.

Kinds: `EXPORT_KINDS` = classification (a text PAIR task, labels neg/neutral/pos),
regression (single text), ner (CoNLL-2003 IOB2 labels), squad (v2.0, seq_length
64, stride 16, max_query_length 16: long contexts get several windows),
multiple_choice (4 choices), embedding.

Weights are random with `initializer_range=0.5`, so that logits are spread out
(no near-ties that a 1e-7 difference between two forward passes could flip)
while outputs stay deterministic (seeded).

Example:
    >>> make_finetuned_dir("ner", "/tmp/ner")   # doctest: +SKIP
    '/tmp/ner'
"""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "data")
EXPORT_KINDS = ("classification", "regression", "ner", "squad", "multiple_choice", "embedding")


def export_options(kind):
    """The options the `exported_model(kind)` fixture exports with: the embedding (an encoder spec's export)
    normalized; a fine-tuned model keeps its own (`finetuned_for_export` refuses embedder options for it)."""
    return {"normalize": True} if kind == "embedding" else {}


SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = ("the of and to in is was he she it for on with as by at from new york john smith paris "
         "city film good bad great terrible loved battery oil crisis when where what who began "
         "lives moved capital france room chair sits down ball dog").split()
TINY_VOCAB = (SPECIAL + list(LETTERS) + ["##" + c for c in LETTERS] + list("0123456789")
              + list(".,!?;:'\"-()") + ["東", "京"] + WORDS)
CONLL_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
SEQ_LENGTH = {"classification": 32, "regression": 32, "ner": 32, "squad": 64,
              "multiple_choice": 32, "embedding": 32}
PAIR_TRAIN = ("text\ttext_b\tlabel\n"
              "I loved this film.\tThe actors were great.\tpos\n"
              "The battery died.\tIt was terrible.\tneg\n"
              "It is a film.\tIt has actors.\tneutral\n")
SINGLE_TRAIN = "text\tlabel\nA great film.\t4.5\nA terrible film.\t0.5\nA film.\t2.5\n"


def tiny_config():
    from bert_keras.config import BertConfig

    return BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_layers=1, num_heads=2,
                      intermediate_size=37, max_position_embeddings=64, initializer_range=0.5)


def tiny_encoder(seed=0):
    import keras

    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(seed)
    return BertEncoder(tiny_config())


def write_vocab(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(TINY_VOCAB) + "\n")
    return path


def _data_file(directory, name, text):
    """A data file beside (not inside) the model directory, which `save` replaces whole."""
    folder = directory.rstrip(os.sep) + ".data"
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _task(kind, directory, seed):
    """The `bert_keras.tasks` task `finetune` would have trained (untrained: random weights)."""
    from bert_keras import models, tasks

    encoder = tiny_encoder(seed)
    vocab = write_vocab(_data_file(directory, "vocab.txt", ""))
    common = dict(vocab_file=vocab, seq_length=SEQ_LENGTH[kind])
    if kind == "classification":
        path = _data_file(directory, "train.tsv", PAIR_TRAIN)
        task = tasks.TextClassifier(models.BertClassifier(encoder, num_classes=3),
                                    labels=["neg", "neutral", "pos"], settings={"text_pair": True},
                                    **common)
        task.record(training={"task": f"csv:{path}", "train_path": path, "eval_path": path},
                    eval_results={"accuracy": 0.5, "num_examples": 3})
        return task
    if kind == "regression":
        path = _data_file(directory, "train.tsv", SINGLE_TRAIN)
        task = tasks.TextClassifier(models.BertClassifier(encoder, num_classes=1),
                                    settings={"text_pair": False}, **common)
        task.record(training={"task": f"csv:{path}", "train_path": path, "eval_path": path,
                              "regression": True})
        return task
    if kind == "ner":
        task = tasks.TokenClassifier(models.BertTokenClassifier(encoder, num_classes=len(CONLL_LABELS)),
                                     labels=CONLL_LABELS, **common)
        task.record(training={"task": "conll2003",
                              "eval_path": os.path.join(DATA, "tasks", "conll2003_mini.txt")})
        return task
    if kind == "squad":
        task = tasks.SpanQA(models.BertSpanQA(encoder), settings={
            "version_2": True, "stride": 16, "max_query_length": 16}, **common)
        task.record(training={"task": "squad/v2.0",
                              "eval_path": os.path.join(DATA, "squad", "dev-v2.0-mini.json")})
        return task
    if kind == "multiple_choice":
        task = tasks.MultipleChoice(models.BertMultipleChoice(encoder, num_choices=4), **common)
        task.record(training={"task": "swag", "eval_path": os.path.join(DATA, "tasks", "swag_mini.csv")})
        return task
    raise ValueError(kind)


def make_finetuned_dir(kind, directory, seed=0):
    """Writes a fine-tuned model directory for `kind` into `directory` (see module doc).

    Through `bert_keras.tasks` (`save`): the one writer of the layout.
    """
    return _task(kind, directory, seed).save(directory)


def make_encoder_spec(directory, seed=0):
    """A tiny encoder saved as `<directory>/encoder.keras` (+ `encoder.vocab.txt`): an --init spec."""
    from bert_keras.checkpoints import save_pretrained

    os.makedirs(directory, exist_ok=True)
    vocab = write_vocab(os.path.join(directory, "vocab-source.txt"))
    path = os.path.join(directory, "encoder.keras")
    save_pretrained(tiny_encoder(seed), path, vocab_file=vocab)
    return path
