"""Fine-tuning task models on a tiny random encoder: memorise, decode, mask, save.

Each head is trained from scratch on a fixture of 8 examples until it fits
them (a head, its loss and its decoding that are wired wrong do not), then its
predictions are decoded the way a task script would: class labels,
regression scores, entities over words, answer spans, the right choice.
"""

import keras
import numpy as np
import pytest

import two_replicas

from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.layers.span_head import PADDING_LOGIT
from bert_keras.losses import MaskedSparseCategoricalCrossentropy
from bert_keras.metrics import accuracy, get_entities, pearson
from bert_keras.models import BertClassifier, BertMultipleChoice, BertSpanQA, BertTokenClassifier

# Span QA and token classification do not read `pooled_output`; Keras warns that
# the encoder's pooler gets no gradient, which is expected.
pytestmark = pytest.mark.filterwarnings("ignore:Gradients do not exist")

# Small and unequal sizes (H=32, I=37, V=50) so a swapped weight fails a shape
# check; no dropout anywhere, so training is fast and outputs compare exactly.
CONFIG = BertConfig(
    vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=37,
    max_position_embeddings=32, hidden_dropout=0.0, attention_dropout=0.0,
)
PAD, CLS, SEP = 0, 2, 3
NUM_EXAMPLES = 8
LEARNING_RATE = 3e-3
# Full-batch steps allowed to fit 8 examples. Measured (checked every 25 steps):
# classifier 50, regression 125 (its bias must climb to the targets' mean, ~2.5),
# token classifier 25, span QA 50, multiple choice 25.
MAX_STEPS = 200


def make_encoder(seed=0):
    keras.utils.set_random_seed(seed)
    return BertEncoder(CONFIG)


def encoder_inputs(token_rows, segment_rows=None):
    """Pads lists of token ids (and segment ids) into the encoder's input dict."""
    seq_len = max(len(row) for row in token_rows)
    token_ids = np.full((len(token_rows), seq_len), PAD, "int32")
    segment_ids = np.zeros_like(token_ids)
    for i, row in enumerate(token_rows):
        token_ids[i, : len(row)] = row
        if segment_rows is not None:
            segment_ids[i, : len(row)] = segment_rows[i]
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": (token_ids != PAD).astype("int32")}


def fit_until(model, x, y, done, max_steps=MAX_STEPS, chunk=25):
    """Full-batch training in chunks of `chunk` steps until `done(model)`; returns the steps used."""
    for steps in range(chunk, max_steps + 1, chunk):
        model.fit(x, y, batch_size=NUM_EXAMPLES, epochs=chunk, verbose=0, shuffle=False)
        if done(model):
            return steps
    return None


def random_sentences(rng, count=NUM_EXAMPLES, min_len=4, max_len=12):
    """`count` token rows `[CLS] w ... w [SEP]` of random length, words from ids 5..49."""
    return [[CLS, *rng.integers(5, CONFIG.vocab_size, rng.integers(min_len, max_len)).tolist(), SEP]
            for _ in range(count)]


# ---- sentence classification ---------------------------------------------------------


@pytest.fixture(scope="module")
def trained_classifier():
    rng = np.random.default_rng(1)
    x = encoder_inputs(random_sentences(rng))
    labels = np.array([0, 1, 2, 0, 1, 2, 1, 0], "int32")
    model = BertClassifier(make_encoder(), num_classes=3, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss=model.default_loss(),
                  metrics=model.default_metrics())

    def fits(m):
        return accuracy(labels, m.predict(x, verbose=0).argmax(-1)) == 1.0

    return model, x, labels, fit_until(model, x, labels, fits)


def test_classifier_memorises_and_decodes_labels(trained_classifier):
    model, x, labels, steps = trained_classifier
    assert steps is not None, f"did not fit 8 examples in {MAX_STEPS} steps"
    logits = model.predict(x, verbose=0)
    assert logits.shape == (NUM_EXAMPLES, 3) and logits.dtype == np.float32
    np.testing.assert_array_equal(logits.argmax(-1), labels)


def test_regression_head_fits_scores():
    """num_classes=1 is STS-B-style regression: `[B]` scores that track the targets."""
    rng = np.random.default_rng(2)
    x = encoder_inputs(random_sentences(rng))
    targets = np.array([0.0, 4.5, 2.0, 3.2, 1.1, 5.0, 0.6, 2.7], "float32")
    model = BertClassifier(make_encoder(), num_classes=1, dropout=0.0)
    assert model.is_regression and model(x).shape == (NUM_EXAMPLES,)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss=model.default_loss())

    def fits(m):
        scores = m.predict(x, verbose=0)
        return pearson(targets, scores) > 0.99 and np.abs(scores - targets).max() < 0.3

    assert fit_until(model, x, targets, fits) is not None
    assert model.predict(x, verbose=0).shape == (NUM_EXAMPLES,)


# ---- token classification -------------------------------------------------------------

# Words and their word pieces; "alice", "london" and "madrid" are two pieces each,
# so only their first piece is labelled.
PIECES = {
    "alice": [5, 6], "bob": [7], "carol": [8], "paris": [9], "london": [10, 11], "madrid": [12, 13],
    "new": [14], "york": [15], "lives": [16], "in": [17], "met": [18], "and": [19], "visited": [20],
    "smith": [21], "today": [22],
}
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NER_SENTENCES = [
    ("alice lives in paris", "B-PER O O B-LOC"),
    ("bob visited new york today", "B-PER O B-LOC I-LOC O"),
    ("carol smith met bob", "B-PER I-PER O B-PER"),
    ("alice smith lives in london", "B-PER I-PER O O B-LOC"),
    ("bob and carol visited madrid", "B-PER O B-PER O B-LOC"),
    ("london and paris", "B-LOC O B-LOC"),
    ("in new york alice met carol", "O B-LOC I-LOC B-PER O B-PER"),
    ("madrid today", "B-LOC O"),
]


def align_ner(sentences):
    """Word-level tags to token inputs, first-piece labels (-100 elsewhere) and word start positions."""
    rows, labels, starts = [], [], []
    for text, tags in sentences:
        row, row_labels, row_starts = [CLS], [-100], []
        for word, tag in zip(text.split(), tags.split()):
            pieces = PIECES[word]
            row_starts.append(len(row))
            row += pieces
            row_labels += [TAGS.index(tag)] + [-100] * (len(pieces) - 1)
        rows.append(row + [SEP])
        labels.append(row_labels + [-100])
        starts.append(row_starts)
    x = encoder_inputs(rows)
    y = np.full(x["token_ids"].shape, -100, "int32")  # padding is ignored too
    for i, row_labels in enumerate(labels):
        y[i, : len(row_labels)] = row_labels
    return x, y, starts


def word_tags(logits, starts):
    """Each word's predicted tag: the argmax at its first piece."""
    return [[TAGS[k] for k in logits[i, row_starts].argmax(-1)] for i, row_starts in enumerate(starts)]


@pytest.fixture(scope="module")
def trained_token_classifier():
    x, y, starts = align_ner(NER_SENTENCES)
    gold = [get_entities(tags.split()) for _, tags in NER_SENTENCES]
    model = BertTokenClassifier(make_encoder(), num_classes=len(TAGS), dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss=model.default_loss())

    def fits(m):
        predicted = word_tags(m.predict(x, verbose=0), starts)
        return [get_entities(tags) for tags in predicted] == gold

    return model, x, y, fit_until(model, x, y, fits), starts


def test_token_classifier_memorises_and_decodes_entities(trained_token_classifier):
    model, x, _, steps, starts = trained_token_classifier
    assert steps is not None, f"did not fit 8 sentences in {MAX_STEPS} steps"
    logits = model.predict(x, verbose=0)
    assert logits.shape == x["token_ids"].shape + (len(TAGS),)
    predicted = word_tags(logits, starts)
    assert predicted == [tags.split() for _, tags in NER_SENTENCES]
    assert get_entities(predicted[1]) == [("PER", 0, 0), ("LOC", 2, 3)]  # "bob" / "new york"


def test_masked_cross_entropy_ignores_minus_100():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 5, 4)).astype("float32")
    labels = np.array([[1, -100, 3, 0, -100], [-100, 2, 2, -100, -100]])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    kept = labels != -100
    per_token = -np.take_along_axis(log_probs, np.where(kept, labels, 0)[..., None], -1)[..., 0] * kept

    np.testing.assert_allclose(float(MaskedSparseCategoricalCrossentropy()(labels, logits)),
                               per_token.sum() / kept.sum(), rtol=1e-5)
    # Changing the logits of ignored positions changes nothing.
    noisy = logits + 10.0 * (~kept)[..., None] * rng.normal(size=logits.shape).astype("float32")
    np.testing.assert_allclose(float(MaskedSparseCategoricalCrossentropy()(labels, noisy)),
                               per_token.sum() / kept.sum(), rtol=1e-5)
    # Per-example weights scale each example's tokens; "none" gives 0 at ignored positions.
    weights = np.array([2.0, 0.5], "float32")
    np.testing.assert_allclose(
        float(MaskedSparseCategoricalCrossentropy()(labels, logits, sample_weight=weights)),
        (per_token * weights[:, None]).sum() / kept.sum(), rtol=1e-5)
    unreduced = MaskedSparseCategoricalCrossentropy(reduction="none")(labels, logits)
    np.testing.assert_allclose(unreduced, per_token, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(MaskedSparseCategoricalCrossentropy(reduction="sum")(labels, logits)),
                               per_token.sum(), rtol=1e-5)
    # A batch without labelled tokens gives 0, not NaN.
    assert float(MaskedSparseCategoricalCrossentropy()(np.full((1, 5), -100), logits[:1])) == 0.0


_MASKED_LOSS_ON_TWO_REPLICAS = """
    from bert_keras.losses import MaskedSparseCategoricalCrossentropy

    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 5, 3)).astype("float32")
    labels = rng.integers(0, 4, (8, 5))
    labels[:2, 1:] = -100  # replica 0's half of the first batch: 2 + 2 x 5 labelled tokens, replica 1's: 10
    labels[4:6, 2:] = -100  # and of the second batch: 10 and 2 x 2 + 10

    def train(strategy):
        keras.utils.set_random_seed(1)
        with strategy.scope():
            model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(4)])
            model.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedSparseCategoricalCrossentropy())
        start = model.get_weights()
        history = model.fit(x, labels, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
        return history, start, model.get_weights()
"""


def test_masked_cross_entropy_on_two_replicas_is_the_global_batchs_token_mean(tmp_path):
    # Each replica divided by its own labelled tokens: the half of a batch with fewer of them
    # weighed more than on one device (an NER fit on two GPUs was another fit).
    result = two_replicas.compare(_MASKED_LOSS_ON_TWO_REPLICAS)
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-6)
    assert result["moved"] > 1e-2
    assert result["diff"] < 1e-6


_SPAN_QA_REGULARIZED_ON_TWO_REPLICAS = """
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.models import BertSpanQA

def train(strategy):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, (8, 10)).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    y = {"start_positions": rng.integers(0, 10, 8), "end_positions": rng.integers(0, 10, 8)}
    keras.utils.set_random_seed(1)
    with strategy.scope():
        config = BertConfig.named("tiny", vocab_size=50, hidden_dropout=0.0, attention_dropout=0.0)
        model = BertSpanQA(BertEncoder(config), dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        model.span_head.trainable_weights[0].regularizer = keras.regularizers.L2(1.0)
    assert len(model.losses) == 1
    start = model.get_weights()
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
    return history, start, model.get_weights()
"""


def test_span_qa_regularizers_on_two_replicas_count_once(tmp_path):
    # compute_loss added the model's regularization losses in full on each replica: on two, the
    # L2 term was trained and reported twice (loss 2.473, 1.972 against 2.401, 1.753 on one).
    result = two_replicas.compare(_SPAN_QA_REGULARIZED_ON_TWO_REPLICAS)
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-6)
    assert result["moved"] > 1e-2
    assert result["diff"] < 1e-6


# ---- span question answering ----------------------------------------------------------------


def make_qa_examples(rng):
    """8 (question, context) pairs with gold token spans in the packed sequence; #8 has no answer (0, 0)."""
    rows, segments, spans = [], [], []
    for i in range(NUM_EXAMPLES):
        question = rng.integers(5, CONFIG.vocab_size, rng.integers(2, 4)).tolist()
        context = rng.integers(5, CONFIG.vocab_size, rng.integers(6, 12)).tolist()
        row = [CLS, *question, SEP, *context, SEP]
        context_start = len(question) + 2
        if i == NUM_EXAMPLES - 1:
            span = (0, 0)  # SQuAD v2 "no answer": the [CLS] position
        else:
            start = context_start + int(rng.integers(0, len(context) - 2))
            span = (start, start + int(rng.integers(0, 3)))
        rows.append(row)
        segments.append([0] * context_start + [1] * (len(context) + 1))
        spans.append(span)
    return encoder_inputs(rows, segments), np.array(spans, "int32")


@pytest.fixture(scope="module")
def trained_span_qa():
    x, spans = make_qa_examples(np.random.default_rng(4))
    y = {"start_positions": spans[:, 0], "end_positions": spans[:, 1]}
    model = BertSpanQA(make_encoder(), dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE))

    def predicted_spans(m):
        out = m.predict(x, verbose=0)
        return np.stack([out["start_logits"].argmax(-1), out["end_logits"].argmax(-1)], -1)

    steps = fit_until(model, x, y, lambda m: (predicted_spans(m) == spans).all())
    return model, x, y, steps, predicted_spans


def test_span_qa_memorises_gold_spans(trained_span_qa):
    model, x, y, steps, predicted_spans = trained_span_qa
    spans = np.stack([y["start_positions"], y["end_positions"]], -1)
    assert steps is not None, f"did not fit 8 spans in {MAX_STEPS} steps"
    np.testing.assert_array_equal(predicted_spans(model), spans)
    # The built-in loss is the mean of the two cross-entropies.
    out = model(x)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    expected = (float(ce(y["start_positions"], out["start_logits"]))
                + float(ce(y["end_positions"], out["end_logits"]))) / 2
    np.testing.assert_allclose(float(model.compute_loss(x, y, out)), expected, rtol=1e-6)


def test_span_logits_are_padding_invariant():
    x, _ = make_qa_examples(np.random.default_rng(5))
    model = BertSpanQA(make_encoder(), dropout=0.0)
    short = model(x)
    seq = x["token_ids"].shape[1]
    padded_x = {key: np.pad(value, ((0, 0), (0, 7))) for key, value in x.items()}
    padded = model(padded_x)
    real = x["padding_mask"].astype(bool)
    for key in ("start_logits", "end_logits"):
        short_logits, padded_logits = np.asarray(short[key]), np.asarray(padded[key])
        np.testing.assert_allclose(padded_logits[:, :seq][real], short_logits[real], atol=1e-5)
        assert (short_logits[~real] == PADDING_LOGIT).all()
        assert (padded_logits[:, seq:] == PADDING_LOGIT).all()


# ---- multiple choice -----------------------------------------------------------------------

NUM_CHOICES = 3


def make_choice_examples(rng):
    """8 examples of 3 (context, ending) pairs, `[B, C, S]`, and the index of the right ending."""
    token_rows, segment_rows = [], []
    for _ in range(NUM_EXAMPLES):
        context = rng.integers(5, CONFIG.vocab_size, 4).tolist()
        for _ in range(NUM_CHOICES):
            ending = rng.integers(5, CONFIG.vocab_size, rng.integers(2, 5)).tolist()
            token_rows.append([CLS, *context, SEP, *ending, SEP])
            segment_rows.append([0] * 6 + [1] * (len(ending) + 1))
    flat = encoder_inputs(token_rows, segment_rows)
    x = {key: value.reshape(NUM_EXAMPLES, NUM_CHOICES, -1) for key, value in flat.items()}
    return x, rng.integers(0, NUM_CHOICES, NUM_EXAMPLES).astype("int32")


@pytest.fixture(scope="module")
def trained_multiple_choice():
    x, labels = make_choice_examples(np.random.default_rng(6))
    model = BertMultipleChoice(make_encoder(), num_choices=NUM_CHOICES, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss=model.default_loss(),
                  metrics=model.default_metrics())
    steps = fit_until(model, x, labels, lambda m: (m.predict(x, verbose=0).argmax(-1) == labels).all())
    return model, x, labels, steps


def test_multiple_choice_memorises_right_choice(trained_multiple_choice):
    model, x, labels, steps = trained_multiple_choice
    assert steps is not None, f"did not fit 8 examples in {MAX_STEPS} steps"
    logits = model.predict(x, verbose=0)
    assert logits.shape == (NUM_EXAMPLES, NUM_CHOICES)
    np.testing.assert_array_equal(logits.argmax(-1), labels)


def test_multiple_choice_scores_each_choice_on_its_own(trained_multiple_choice):
    """Each choice's logit is the scorer on that choice's own [CLS]: permuting choices permutes logits."""
    model, x, _, _ = trained_multiple_choice
    order = [2, 0, 1]
    permuted = {key: value[:, order] for key, value in x.items()}
    np.testing.assert_allclose(model(permuted), np.asarray(model(x))[:, order], atol=1e-5)
    single = model.encoder({key: value[:, 1] for key, value in x.items()})["pooled_output"]
    np.testing.assert_allclose(model(x)[:, 1], model.choice_scorer(single)[:, 0], atol=1e-5)


# ---- serialization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture",
    ["trained_classifier", "trained_token_classifier", "trained_span_qa", "trained_multiple_choice"],
)
def test_trained_model_keras_round_trip(fixture, request, tmp_path):
    """Same class, config and outputs after `.keras` save/load."""
    model, x = request.getfixturevalue(fixture)[:2]
    path = str(tmp_path / f"{fixture}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_config() == model.get_config()
    keras.tree.map_structure(np.testing.assert_array_equal, loaded(x), model(x))


def test_a_token_classifier_saved_with_num_labels_loads_as_num_classes(trained_token_classifier):
    """Configs written before the argument took the classifiers' name (`num_labels`) still load."""
    model, x = trained_token_classifier[:2]
    config = model.get_config()
    config["num_labels"] = config.pop("num_classes")
    loaded = BertTokenClassifier.from_config(config)
    loaded.set_weights(model.get_weights())
    assert loaded.num_classes == len(TAGS)
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-6)


def test_token_classifier_reloads_with_its_masked_loss(trained_token_classifier, tmp_path):
    """The compiled MaskedSparseCategoricalCrossentropy is saved and restored with the model."""
    model, x, y = trained_token_classifier[:3]
    path = str(tmp_path / "tagger.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    compiled_loss = model.evaluate(x, y, batch_size=NUM_EXAMPLES, verbose=0)
    # The compiled loss is the mean over labelled tokens, as the loss called directly.
    np.testing.assert_allclose(
        compiled_loss, float(MaskedSparseCategoricalCrossentropy()(y, model(x))), rtol=1e-5)
    reloaded_loss = loaded.evaluate(x, y, batch_size=NUM_EXAMPLES, verbose=0)
    np.testing.assert_allclose(reloaded_loss, compiled_loss, rtol=1e-6)
