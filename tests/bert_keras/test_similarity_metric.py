"""STS scoring (cosine similarity ranked against gold) equals scipy's, and the Korean example uses it."""

import importlib.util
import json
import os

import numpy as np
import pytest
from scipy.spatial.distance import cosine
from scipy.stats import spearmanr

from bert_keras.metrics import cosine_similarities, similarity_spearman

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cosine_and_spearman_equal_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 8)), rng.normal(size=(50, 8))
    a[3] = 0.0  # a zero vector: similarity 0, not NaN
    gold = rng.integers(0, 6, size=50).astype(float)  # ties, as STS scores have
    expected = [0.0 if i == 3 else 1.0 - cosine(a[i], b[i]) for i in range(50)]
    np.testing.assert_allclose(cosine_similarities(a, b), expected, atol=1e-12)
    assert similarity_spearman(a, b, gold) == pytest.approx(spearmanr(expected, gold).statistic, abs=1e-12)
    with pytest.raises(ValueError, match=r"\(50, 8\) and \(49, 8\)"):
        cosine_similarities(a, b[:49])


def test_the_korean_example_scores_korsts_pairs_as_the_benchmark_does(tmp_path, minilm_dir):
    """`examples/korean_bert.py`'s KorSTS step: per pooling, the Spearman of the cosine similarity of
    the two sentences' vectors (here all-MiniLM-L6-v2 on a few KorSTS-format rows, computed by hand)."""
    spec = importlib.util.spec_from_file_location("korean_bert", os.path.join(ROOT, "examples", "korean_bert.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rows = [("A man is playing a guitar.", "A man plays the guitar.", 4.8),
            ("A woman is slicing an onion.", "A man is dancing.", 0.2),
            ("Two dogs run on the grass.", "Two dogs are running in a field.", 3.9),
            ("A cat sleeps.", "The stock market fell today.", 0.0),
            ("A child rides a horse.", "A kid is riding a horse.", 4.5)]
    sts = tmp_path / "sts" / "korsts"
    sts.mkdir(parents=True)
    body = "".join(f"g\tf\t2012\t{i:04d}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows))
    for split in ("dev", "train"):
        (sts / f"sts-{split}.tsv").write_text("genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n" + body,
                                              encoding="utf-8")
    args = example.parse_args(["--data", str(tmp_path), "--workdir", str(tmp_path / "w"),
                               "--variant", "english-minilm", "--seq-length", "32"])
    scores = example.korsts_similarity(args, f"hf:{minilm_dir}")
    assert set(scores) == {"cls", "mean", "bm25"}

    from bert_keras.tasks import Embedder

    vectors = Embedder.from_pretrained(f"hf:{minilm_dir}", pooling="mean", seq_length=32).predict(
        [a for a, _, _ in rows] + [b for _, b, _ in rows])
    expected = spearmanr([1 - cosine(vectors[i], vectors[i + 5]) for i in range(5)], [s for _, _, s in rows])
    assert scores["mean"] == pytest.approx(round(100 * expected.statistic, 2))
    assert scores["mean"] >= 80  # all-MiniLM-L6-v2 ranks these five pairs nearly as the gold does (90)


def test_the_korean_example_measures_an_encoder_pretrained_elsewhere(tmp_path, minilm_dir):
    """`--init DIR`: the vocabulary, records and pretraining steps are skipped (nothing is written
    for them) and the measuring steps read DIR, as they read the example's own encoder."""
    spec = importlib.util.spec_from_file_location("korean_bert", os.path.join(ROOT, "examples", "korean_bert.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    sts = tmp_path / "sts" / "korsts"
    sts.mkdir(parents=True)
    rows = [("신용 대출을 신청하고 싶어요", "신용 대출 신청은 어떻게 하나요?", 4.0),
            ("영화가 정말 재밌었다", "날씨가 춥다", 0.2),
            ("A man is playing a guitar.", "A man plays the guitar.", 4.8)]
    body = "".join(f"g\tf\t2012\t{i:04d}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows))
    for split in ("dev", "train"):
        (sts / f"sts-{split}.tsv").write_text("genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n" + body,
                                              encoding="utf-8")
    workdir = tmp_path / "w"
    example.main(["--data", str(tmp_path), "--workdir", str(workdir), "--variant", "plain",
                  "--init", f"hf:{minilm_dir}", "--seq-length", "32", "--steps-only", "sts"])
    assert sorted(os.listdir(workdir / "plain")) == ["results.json"]  # no vocab.txt, records or pretrain/
    with open(workdir / "plain" / "results.json", encoding="utf-8") as f:
        assert set(json.load(f)["korsts"]) == {"cls", "mean", "bm25"}
    # the measured encoder is the one --init names (a missing one is reported, not replaced by another)
    with pytest.raises(ValueError, match="no_such_encoder"):
        example.main(["--data", str(tmp_path), "--workdir", str(tmp_path / "w2"), "--variant", "plain",
                      "--init", str(tmp_path / "no_such_encoder"), "--steps-only", "sts"])
