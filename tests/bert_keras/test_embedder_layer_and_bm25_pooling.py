"""`Embedder` / `BertEmbedder`: `pooling_layer` (which encoder state is pooled), BM25-weighted
pooling (`pooling="bm25"`, `fit_idf`) against a hand-computed BM25, padding never changing a
vector, and both settings kept by save / load and the `embed` / `export` commands.

Tiny random 3-layer encoders on `export_fixtures`' vocabulary: every test runs in seconds.
"""

import argparse
import collections
import json
import os

import keras
import numpy as np
import pytest

import export_fixtures
from bert_keras import tasks
from bert_keras.tasks.inputs import TaskInputError

NUM_LAYERS = 3
TEXTS = ["the film was good.", "paris is the capital of france", "a dog sits down, the dog!",
         "john smith lives in new york city."]
CORPUS = ["the film was good", "the city of paris", "the dog sat down", "a ball", "new york is a city",
          "john smith", "the oil crisis began when he moved", "the the the film"]


def tiny_config():
    from bert_keras.config import BertConfig

    return BertConfig(vocab_size=len(export_fixtures.TINY_VOCAB), hidden_size=32, num_layers=NUM_LAYERS,
                      num_heads=2, intermediate_size=37, max_position_embeddings=64, initializer_range=0.5)


@pytest.fixture(scope="module")
def encoder():
    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    return BertEncoder(tiny_config())


@pytest.fixture(scope="module")
def spec(encoder, tmp_path_factory):
    """A 3-layer tiny encoder as an `--init` spec (`encoder.keras` + its vocabulary)."""
    from bert_keras.checkpoints import save_pretrained

    directory = str(tmp_path_factory.mktemp("three_layers"))
    vocab = export_fixtures.write_vocab(os.path.join(directory, "vocab-source.txt"))
    path = os.path.join(directory, "encoder.keras")
    save_pretrained(encoder, path, vocab_file=vocab)
    return path


@pytest.fixture(scope="module")
def bm25_embedder(spec):
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling="bm25", pooling_layer=-2,
                                              normalize=True)
    return embedder.fit_idf(CORPUS)


def _inputs(ids_rows, width):
    ids = np.zeros((len(ids_rows), width), "int32")
    for row, values in enumerate(ids_rows):
        ids[row, : len(values)] = values
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}


def _states(encoder, inputs):
    """The encoder's L + 1 states, full computation, from a separate copy that outputs them."""
    from bert_keras.encoder import BertEncoder

    copy = BertEncoder.from_config({**encoder.get_config(), "output_hidden_states": True})
    copy.set_weights(encoder.get_weights())
    return [np.asarray(s) for s in copy(inputs, padding="compute")["hidden_states"]]


# ---- pooling_layer ---------------------------------------------------------------------


@pytest.mark.parametrize("pooling_layer, state", [(-1, 3), (-2, 2), (-3, 1), (0, 0), (1, 1), (3, 3)])
@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_pooling_layer_pools_that_encoder_state(encoder, pooling, pooling_layer, state):
    from bert_keras.models.embedder import BertEmbedder

    inputs = _inputs([[2, 7, 9, 11, 3], [2, 5, 3]], 8)
    out = BertEmbedder(encoder, pooling=pooling, pooling_layer=pooling_layer)(inputs)
    tokens = _states(encoder, inputs)[state]
    mask = inputs["padding_mask"][..., None].astype("float32")
    expected = {"mean": (tokens * mask).sum(1) / mask.sum(1), "cls": tokens[:, 0],
                "max": np.where(mask > 0, tokens, -np.inf).max(1)}[pooling]
    np.testing.assert_allclose(out["sentence_embedding"], expected, atol=1e-5)


@pytest.mark.parametrize("pooling_layer", [-4, 4, 1.5, True, "-1"])
def test_a_pooling_layer_outside_the_encoder_is_a_clear_error(spec, pooling_layer):
    with pytest.raises(TaskInputError, match=r"the encoder has 3 layers; use -1 \(the last block\) \.\. -3 "
                                             r"\(the first\), 1 \.\. 3 .*0 \(the embeddings output\)"):
        tasks.Embedder.from_pretrained(spec, pooling_layer=pooling_layer)


def test_pooling_layer_is_for_the_modes_that_pool_one_state(encoder):
    from bert_keras.models.embedder import BertEmbedder

    with pytest.raises(ValueError, match="pooling_layer applies to mean, cls, max, bm25"):
        BertEmbedder(encoder, pooling="pooled", pooling_layer=-2)
    # The last block named either way is the default computation.
    assert BertEmbedder(encoder, pooling="pooled", pooling_layer=NUM_LAYERS).pooling_layer == NUM_LAYERS


def test_pooling_layer_is_a_setting_saved_loaded_and_kept(spec, tmp_path):
    import keras

    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling_layer=-2)
    vectors = embedder.predict(TEXTS)
    assert embedder.settings["pooling_layer"] == -2 and embedder.head.pooling_layer == -2
    directory = embedder.save(str(tmp_path / "saved"))
    with open(os.path.join(directory, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["settings"]["pooling_layer"] == -2
    loaded = tasks.load(directory)
    assert loaded.settings["pooling_layer"] == -2 and loaded.head.pooling_layer == -2
    np.testing.assert_allclose(loaded.predict(TEXTS), vectors, atol=1e-5)
    embedder.save(str(tmp_path / "task.keras"))
    np.testing.assert_allclose(keras.models.load_model(str(tmp_path / "task.keras")).predict(TEXTS), vectors,
                               atol=1e-5)
    # the head keeps its layer: another one is a new embedder, not this directory's
    with pytest.raises(TaskInputError, match="pooling_layer=-1: .* was fine-tuned with pooling_layer=-2"):
        tasks.Embedder.from_pretrained(directory, pooling_layer=-1)
    # not the last layer's mean
    last = tasks.Embedder.from_pretrained(spec, seq_length=32).predict(TEXTS)
    assert np.abs(last - vectors).max() > 1e-2


# ---- BM25 --------------------------------------------------------------------------------


def bm25_reference(rows, corpus, excluded, k1, b, vocab_size):
    """BM25 weights per position, the textbook way (loops, Counter), each row normalized to sum 1."""
    n = len(corpus)
    df = np.zeros(vocab_size)
    for document in corpus:
        for term in set(document) - set(excluded):
            df[term] += 1
    average = np.mean([len([t for t in document if t not in excluded]) for document in corpus])
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    weights = np.zeros((len(rows), max(len(r) for r in rows)))
    for i, row in enumerate(rows):
        terms = [t for t in row if t not in excluded]
        counts = collections.Counter(terms)
        for j, t in enumerate(row):
            if t in excluded:
                continue
            tf = counts[t]
            score = idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(terms) / average))
            weights[i, j] = score / tf  # the occurrences of a term share its score
        weights[i] /= weights[i].sum()
    return weights


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (2.0, 0.3), (0.0, 1.0)])
def test_bm25_weights_equal_a_hand_computed_bm25(k1, b):
    from bert_keras.models.bm25_weights import BM25Weights

    corpus = [[5, 6, 7], [5, 8], [5, 6, 6, 9, 10], [11], [5, 7, 12, 13, 14, 15]]
    excluded = (0, 2, 3)  # [PAD], [CLS], [SEP]
    layer = BM25Weights(vocab_size=20)
    layer.adapt(corpus, excluded_ids=excluded, k1=k1, b=b)
    # repeated terms, an id the corpus never held (16), rows of different lengths
    rows = [[2, 5, 6, 6, 7, 3], [2, 16, 5, 3], [2, 9, 9, 9, 5, 6, 3, 11, 3]]
    inputs = _inputs(rows, 12)
    got = np.asarray(layer(inputs["token_ids"], inputs["padding_mask"]))
    expected = bm25_reference(rows, corpus, excluded, k1, b, 20)
    np.testing.assert_allclose(got[:, :expected.shape[1]], expected, atol=1e-6)
    assert not got[:, expected.shape[1]:].any()
    np.testing.assert_allclose(got.sum(1), 1, atol=1e-6)


@pytest.mark.parametrize("k1, b", [(float("inf"), 0.75), (float("nan"), 0.75), ("2", 0.75), (1.2, None),
                                   (True, 0.5)])
def test_bm25_settings_that_are_no_finite_numbers_are_refused(k1, b):
    # k1=inf was accepted and every vector came out NaN; a string raised a bare TypeError.
    from bert_keras.models.bm25_weights import BM25Weights

    with pytest.raises(ValueError, match=r"must be a finite number >= 0 and b=.* a number in \[0, 1\]"):
        BM25Weights(vocab_size=20).adapt([[5, 6]], k1=k1, b=b)


def test_fit_idf_counts_each_word_piece_with_the_task_tokenizer(bm25_embedder):
    import tensorflow as tf

    weights = bm25_embedder.head.bm25_weights
    tokenizer = bm25_embedder.tokenizer
    documents = [tokenizer.tokenize(tf.constant([text])).numpy()[0].tolist() for text in CORPUS]
    df = collections.Counter(t for document in documents for t in set(document))
    idf = np.asarray(weights.idf)
    for term, count in df.items():
        assert idf[term] == pytest.approx(np.log(1 + (len(CORPUS) - count + 0.5) / (count + 0.5)), abs=1e-6)
    special = tokenizer.special_tokens
    assert idf[[special.cls, special.sep, special.pad]].tolist() == [0, 0, 0]
    unseen = np.log(1 + (len(CORPUS) + 0.5) / 0.5)  # an id no corpus text held
    assert idf[tokenizer.vocabulary.index("france")] == pytest.approx(unseen, abs=1e-6)
    assert float(weights.average_length) == pytest.approx(np.mean([len(d) for d in documents]), abs=1e-6)
    assert float(weights.num_documents) == len(CORPUS)


def test_bm25_vector_is_the_bm25_weighted_sum_of_the_chosen_state(encoder):
    from bert_keras.models.embedder import BertEmbedder

    corpus = [[5, 6, 7], [5, 8], [5, 6, 6, 9, 10], [11, 12]]
    head = BertEmbedder(encoder, pooling="bm25", pooling_layer=-2)
    head.bm25_weights.adapt(corpus, excluded_ids=(0, 2, 3))
    rows = [[2, 5, 6, 6, 7, 3], [2, 9, 5, 3]]
    inputs = _inputs(rows, 9)
    weights = bm25_reference(rows, corpus, (0, 2, 3), 1.2, 0.75, tiny_config().vocab_size)
    tokens = _states(encoder, inputs)[NUM_LAYERS - 1][:, :weights.shape[1]]
    expected = (tokens * weights[..., None]).sum(1)
    np.testing.assert_allclose(head(inputs)["sentence_embedding"], expected, atol=1e-5)


def test_bm25_without_an_idf_is_an_error_that_names_the_call(spec, encoder, tmp_path):
    from bert_keras.models.embedder import BertEmbedder

    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling="bm25")
    with pytest.raises(TaskInputError, match=r"call embedder\.fit_idf\(texts\) first"):
        embedder.predict(TEXTS)
    with pytest.raises(TaskInputError, match=r"fit_idf\(texts\)"):
        embedder.embed(TEXTS, query="a film")
    with pytest.raises(TaskInputError, match=r"fit_idf\(texts\)"):
        embedder.export(str(tmp_path / "models"), "unfitted", check=False, warmup_requests=0)
    with pytest.raises(ValueError, match=r"fit_idf\(texts\)"):
        BertEmbedder(encoder, pooling="bm25")(_inputs([[2, 5, 3]], 4))
    with pytest.raises(TaskInputError, match="the IDF is for pooling='bm25'"):
        tasks.Embedder.from_pretrained(spec, seq_length=32).fit_idf(CORPUS)
    from serving.signatures import finetuned_for_export

    with pytest.raises(ValueError, match=r"fit_idf\(texts\)"):
        finetuned_for_export(spec, pooling="bm25")


def test_bm25_vectors_survive_save_and_load_in_both_formats(bm25_embedder, tmp_path):
    vectors = bm25_embedder.predict(TEXTS)
    assert vectors.shape == (4, 32)
    directory = bm25_embedder.save(str(tmp_path / "saved"))
    loaded = tasks.load(directory)
    assert loaded.settings["pooling"] == "bm25" and loaded.head.bm25_weights.is_fitted
    np.testing.assert_allclose(loaded.predict(TEXTS), vectors, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(loaded.head.bm25_weights.idf),
                                  np.asarray(bm25_embedder.head.bm25_weights.idf))
    bm25_embedder.save(str(tmp_path / "task.keras"))
    np.testing.assert_allclose(keras.models.load_model(str(tmp_path / "task.keras")).predict(TEXTS), vectors,
                               atol=1e-6)


# ---- padding never changes a vector -----------------------------------------------------


@pytest.mark.parametrize("options", [{"pooling": "mean"}, {"pooling": "mean", "pooling_layer": 1},
                                     {"pooling": "bm25", "pooling_layer": -2}])
def test_padding_and_a_longer_batch_partner_never_change_a_vector(spec, options):
    # Unit vectors (as sentence-transformers'): a longer partner changes the matmuls' shapes, and
    # with them float32 rounding (~1 ulp: 2e-6 on this encoder's raw vectors of norm ~5), not the result.
    embedder = tasks.Embedder.from_pretrained(spec, seq_length=32, normalize=True, **options)
    if options["pooling"] == "bm25":
        embedder.fit_idf(CORPUS)
    short = TEXTS[0]
    alone = embedder.predict([short])
    with_partner = embedder.predict([short, " ".join(TEXTS)])  # padded to the partner's length
    np.testing.assert_allclose(with_partner[0], alone[0], atol=1e-6)
    # the head on the same ids with more padding positions appended
    inputs = embedder.preprocessor([short])
    wide = {name: np.pad(np.asarray(value), [(0, 0), (0, 20)]) for name, value in inputs.items()}
    np.testing.assert_allclose(embedder.head(wide)["sentence_embedding"],
                               embedder.head(inputs)["sentence_embedding"], atol=1e-6)


# ---- the commands ----------------------------------------------------------------------------


def _parse(command, argv):
    from bert_keras.cli import embed, export

    parser = argparse.ArgumentParser()
    {"embed": embed, "export": export}[command].register(parser.add_subparsers(), command)
    return parser.parse_args([command, *argv])


def test_embed_ranks_with_bm25_on_an_idf_corpus_and_a_pooling_layer(spec, tmp_path, capsys):
    from bert_keras.cli import embed

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n\n", encoding="utf-8")  # a blank line is skipped
    output = tmp_path / "vectors.npy"
    args = _parse("embed", ["--init", spec, "--seq-length", "32", "--pooling", "bm25", "--idf-corpus",
                            str(corpus), "--pooling-layer", "-2", "--normalize", "--output", str(output),
                            "--query", "the good film", "--top-k", "2", *TEXTS])
    assert embed.run(args) == 0
    captured = capsys.readouterr()
    assert f"bm25: IDF of {len(CORPUS)} texts ({corpus})" in captured.err
    assert "top 2 of 4 for 'the good film'" in captured.out
    expected = tasks.Embedder.from_pretrained(spec, seq_length=32, pooling="bm25", pooling_layer=-2,
                                              normalize=True).fit_idf(CORPUS).predict(TEXTS)
    np.testing.assert_allclose(np.load(output), expected, atol=1e-6)

    # without --idf-corpus: the IDF of the texts being ranked
    args = _parse("embed", ["--init", spec, "--seq-length", "32", "--pooling", "bm25", "--query", "a film",
                            *TEXTS])
    assert embed.run(args) == 0
    assert "bm25: IDF of 4 texts (the texts embedded)" in capsys.readouterr().err


def test_the_commands_refuse_an_idf_corpus_they_cannot_use(spec, tmp_path):
    from bert_keras.cli import embed, export
    from bert_keras.cli.main import CommandError

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a film\n", encoding="utf-8")
    with pytest.raises(CommandError, match="the IDF is for --pooling bm25"):
        embed.run(_parse("embed", ["--init", spec, "--idf-corpus", str(corpus), "a text"]))
    with pytest.raises(CommandError, match="--idf-corpus .*: no such file"):
        embed.run(_parse("embed", ["--init", spec, "--pooling", "bm25", "--idf-corpus",
                                   str(tmp_path / "missing.txt"), "a text"]))
    with pytest.raises(CommandError, match="--pooling bm25 needs --idf-corpus FILE"):
        export.run(_parse("export", ["--init", spec, "--pooling", "bm25", "--base-path",
                                     str(tmp_path / "models"), "--model-name", "m"]))
    args = _parse("export", ["--init", spec, "--pooling-layer", "-2", "--base-path", str(tmp_path / "m"),
                             "--model-name", "m"])
    assert args.pooling_layer == -2


def test_export_of_a_fine_tuned_model_refuses_the_pooling_flags(tmp_path):
    """`export --model DIR --pooling cls` (or `--normalize`) exported DIR as saved, the flag silently
    ignored (its default could not be told from a given value): now refused, as `--pooling-layer`."""
    from bert_keras.cli import export
    from bert_keras.cli.main import CommandError

    model = tmp_path / "model"
    model.mkdir()
    (model / "task.json").write_text("{}", encoding="utf-8")  # refused before anything is read
    for flags in (["--pooling", "cls"], ["--normalize"], ["--pooling-layer", "-2"]):
        with pytest.raises(CommandError, match=f"{flags[0]}: only with --init"):
            export.run(_parse("export", ["--model", str(model), *flags, "--base-path", str(tmp_path / "m"),
                                         "--model-name", "m"]))


def test_embed_of_a_saved_bm25_embedder_keeps_its_idf(bm25_embedder, spec, tmp_path, capsys):
    """`embed --init DIR --pooling bm25` of a saved (fitted) bm25 embedder refitted the IDF on the
    texts being embedded, so the saved IDF was never used from the command line. It is kept now;
    `--idf-corpus FILE` still refits it (no --pooling needed: the directory's is bm25)."""
    from bert_keras.cli import embed
    from bert_keras.cli.main import CommandError

    directory = bm25_embedder.save(str(tmp_path / "bm25"))
    output = tmp_path / "v.npy"
    for flags in ([], ["--pooling", "bm25"]):
        assert embed.run(_parse("embed", ["--init", directory, *flags, "--output", str(output), "--overwrite",
                                          *TEXTS])) == 0
        assert "bm25: IDF" not in capsys.readouterr().err
        np.testing.assert_allclose(np.load(output), bm25_embedder.predict(TEXTS), atol=1e-6)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the film\na dog\n", encoding="utf-8")
    refitted = tasks.load(directory).fit_idf(["the film", "a dog"]).predict(TEXTS)
    for flags in (["--pooling", "bm25"], []):  # the directory pools with bm25: --pooling may be left out
        assert embed.run(_parse("embed", ["--init", directory, *flags, "--idf-corpus", str(corpus),
                                          "--output", str(output), "--overwrite", *TEXTS])) == 0
        assert f"bm25: IDF of 2 texts ({corpus})" in capsys.readouterr().err
        np.testing.assert_allclose(np.load(output), refitted, atol=1e-6)
    mean_directory = tasks.Embedder.from_pretrained(spec, seq_length=32).save(str(tmp_path / "mean"))
    with pytest.raises(CommandError, match=r"--idf-corpus .*: the IDF is for --pooling bm25 \(.* with mean\)"):
        embed.run(_parse("embed", ["--init", mean_directory, "--idf-corpus", str(corpus), "x"]))
