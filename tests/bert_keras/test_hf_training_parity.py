"""Fine-tuning follows Hugging Face step for step: same weights, batches and recipe -> same model.

With dropout off (the only randomness left), `TextClassifier.fit` on real MiniLM weights and
the usual HF torch loop (`BertForSequenceClassification`, `torch.optim.AdamW` without decay on
LayerNorm / biases, `get_linear_schedule_with_warmup`, `clip_grad_norm_(1.0)`) must end at the
same probabilities. Keras' own Adam epsilon rule ends ~0.01 away after these steps; a wrong
schedule, decay set or clipping norm moves it as far.
"""

from importlib.resources import files

import numpy as np
import pytest

import keras

pytestmark = pytest.mark.slow

STEPS, BATCH, LEARNING_RATE = 12, 16, 5e-5


def _sentences():
    from pipelines.datasets.text_files import read_text_file

    rows = read_text_file(files("pipelines") / "data" / "sample_sentiment_train.tsv", text_column="sentence")
    return [row.text for row in rows], [row.label for row in rows]


def test_fit_ends_where_the_hf_torch_loop_ends_with_dropout_off(minilm_dir):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from bert_keras.tasks import TextClassifier

    texts, labels = _sentences()
    order = np.random.default_rng(0).permutation(len(texts))[:STEPS * BATCH]
    texts, labels = [texts[i] for i in order], [labels[i] for i in order]
    names = sorted(set(labels))
    probe = ["The plot was thin but the acting saved it.", "I want my money back.",
             "Works exactly as described.", "It broke after two days."]

    keras.utils.set_random_seed(0)
    task = TextClassifier.from_pretrained(minilm_dir, labels=names, seq_length=64, learning_rate=LEARNING_RATE,
                                          warmup_ratio=0.1, weight_decay=0.01)
    for layer in task.head._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    kernel, bias = task.head.get_layer("classifier").get_weights()
    before = np.asarray(task.predict(probe))

    torch.manual_seed(0)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    model = transformers.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=len(names))
    with torch.no_grad():
        model.classifier.weight.copy_(torch.tensor(np.asarray(kernel).T))
        model.classifier.bias.copy_(torch.tensor(np.asarray(bias)))
    model.eval()  # dropout off; gradients still flow

    def encode(batch):
        return tokenizer(batch, padding="longest", truncation=True, max_length=64, return_tensors="pt")

    with torch.no_grad():
        np.testing.assert_allclose(model(**encode(probe)).logits.softmax(-1).numpy(), before, atol=1e-5)

    task.fit(texts, labels, epochs=1, batch_size=BATCH, shuffle=False, verbose=0)

    named = list(model.named_parameters())
    no_decay = [p for n, p in named if "LayerNorm" in n or "bias" in n]
    decay = [p for n, p in named if not ("LayerNorm" in n or "bias" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, round(0.1 * STEPS), STEPS)
    ids = torch.tensor([names.index(label) for label in labels])
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        model(**encode(texts[rows]), labels=ids[rows]).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)

    ours = np.asarray(task.predict(probe))
    with torch.no_grad():
        theirs = model(**encode(probe)).logits.softmax(-1).numpy()
    moved = np.abs(ours - before).max()
    assert int(task.optimizer.iterations) == STEPS and moved > 0.01, moved
    np.testing.assert_allclose(ours, theirs, atol=max(2e-6, 1e-3 * moved))
