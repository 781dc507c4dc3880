"""`bert-keras` is quiet by default: stderr carries no TensorFlow / absl / numpy chatter.

Each command runs as a user runs it: the installed `bert-keras` script in a fresh process
whose environment has no `TF_CPP_MIN_LOG_LEVEL` (a user's shell), on real files.
"""

import os
import subprocess
import sys

import pytest
from cli_subprocess import noise_in, run_bert_keras, user_environment

CORPUS = (
    "The cat sat on the mat. A dog barked at the cat!\n"
    "Serving models is easy when the tokenizer is in the graph.\n"
    "Pretraining learns from plain text; fine-tuning needs labels.\n"
) * 30


def bert_keras(*args, cwd):
    return run_bert_keras(list(args), cwd, quiet=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A vocabulary made by `bert-keras vocab` and a tiny random encoder saved as `.keras` beside it."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    directory = tmp_path_factory.mktemp("quiet")
    (directory / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    vocab_run = bert_keras("vocab", "corpus.txt", "-o", "vocab.txt", "--size", "200", cwd=directory)
    vocab_size = len((directory / "vocab.txt").read_text(encoding="utf-8").splitlines())
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=37, max_position_embeddings=40, type_vocab_size=2)
    save_pretrained(BertEncoder(config), str(directory / "encoder.keras"))
    return directory, vocab_run


@pytest.mark.slow
def test_commands_print_no_tensorflow_or_numpy_noise(workdir):
    directory, vocab_run = workdir
    runs = {
        "vocab": vocab_run,
        "info": bert_keras("info", cwd=directory),
        "tokenize": bert_keras("tokenize", "--vocab", "vocab.txt", "the cat sat", cwd=directory),
        # keras-hub conversion: numpy's copy-keyword warnings (79-103 before) and keras-hub's own.
        "convert": bert_keras("convert", "encoder.keras", "keras-hub:hub", cwd=directory),
        "embed": bert_keras("embed", "--init", "keras-hub:hub", "the cat sat", cwd=directory),
    }
    found = {name: noise_in(run.stderr) for name, run in runs.items()}
    assert not any(found.values()), f"noise on stderr: {found}"
    # The commands did their work (not quiet because they did nothing).
    assert "wrote" in runs["convert"].stdout and "vocab  copied from" in runs["convert"].stdout
    assert "the" in runs["tokenize"].stdout and "tensorflow" in runs["info"].stdout


@pytest.mark.slow
def test_verbose_brings_tensorflow_logging_back(workdir):
    directory, _ = workdir
    quiet = bert_keras("tokenize", "--vocab", "vocab.txt", "the cat", cwd=directory)
    loud = bert_keras("--verbose", "tokenize", "--vocab", "vocab.txt", "the cat", cwd=directory)
    after_command = bert_keras("tokenize", "--vocab", "vocab.txt", "the cat", "--verbose", cwd=directory)
    assert not noise_in(quiet.stderr)
    assert any(name.startswith("TF C++ log line") for name in noise_in(loud.stderr)), loud.stderr
    assert any(name.startswith("TF C++ log line") for name in noise_in(after_command.stderr)), \
        after_command.stderr
    assert loud.stdout == quiet.stdout == after_command.stdout


def test_quiet_configuration_before_tensorflow_import():
    """The C++ level must be in the environment before TensorFlow loads: `main` sets it
    before building the parser (a subcommand module may import TensorFlow)."""
    code = (
        "import os, sys\n"
        "from bert_keras.cli.main import main\n"
        "import bert_keras.cli.main as cli\n"
        "def build_parser():\n"
        "    raise SystemExit(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
        "cli.build_parser = build_parser\n"
        "main(['info'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=user_environment(), timeout=120)
    assert result.stderr.strip().splitlines()[-1] == "3", result.stderr


def test_quiet_drops_only_the_known_warnings():
    import warnings

    from pipelines import tensorflow_logs as quiet

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet.filter_noisy_warnings()
        warnings.warn("__array__ implementation doesn't accept a copy keyword, so passing copy=False "
                      "failed.", DeprecationWarning)
        warnings.warn("Your input ran out of data; interrupting training. Make sure that your dataset", UserWarning)
        warnings.warn("keras-hub BertBackbone always uses the tanh GELU", UserWarning)
    assert [str(w.message) for w in caught] == ["keras-hub BertBackbone always uses the tanh GELU"]


def test_the_command_prints_warnings_as_lines_naming_no_library_source_and_drops_beams_gcp_note(caplog):
    import logging
    import warnings

    from pipelines import tensorflow_logs as quiet

    saved = warnings.formatwarning
    try:
        quiet.configure(verbose=False)
        line = warnings.formatwarning("3 of 9 texts have more than 30 word pieces", UserWarning, "contextlib.py", 81)
    finally:
        warnings.formatwarning = saved
    assert line == "warning: 3 of 9 texts have more than 30 word pieces\n"  # no "contextlib.py:81:"
    with caplog.at_level(logging.WARNING):
        logging.getLogger().warning("apitools not found, and bigquery client libraries are not available "
                                    "despite the import not raising an ImportError.")
        logging.getLogger().warning("a warning of the user's")
    assert [record.getMessage() for record in caplog.records] == ["a warning of the user's"]


def test_a_library_warning_names_the_users_line_however_deep_it_was_raised():
    import warnings

    from pipelines.tensorflow_logs import caller_stacklevel

    exec(compile("def deep():\n    warnings.warn('w', UserWarning, stacklevel=caller_stacklevel())\n",
                 os.path.join(os.path.dirname(caller_stacklevel.__code__.co_filename), "fake_module.py"), "exec"),
         namespace := {"warnings": warnings, "caller_stacklevel": caller_stacklevel})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace["deep"]()  # "raised" in a project module: the warning names this test's line
    assert caught[0].filename == __file__


def test_tensorflow_load_noise_is_dropped_and_other_lines_are_kept(capfd):
    """What TensorFlow 2.21 writes to file descriptor 2 while loading (absl, before it is
    initialised: TF_CPP_MIN_LOG_LEVEL cannot stop it) goes; anything else is replayed."""
    import os

    from pipelines import tensorflow_logs as quiet

    noise = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
             "I0000 00:00:1795500742.407056   26856 port.cc:153] oneDNN custom operations are on.\n"
             "I0000 00:00:1795500742.407376   26856 cudart_stub.cc:31] Could not find cuda drivers\n")
    real = "E0000 00:00:1.0 1 loader.cc:9] undefined symbol: _ZN10tensorflow\n"
    with quiet._load_time_noise_filtered():
        os.write(2, (noise + real).encode())
    assert capfd.readouterr().err == real


_SCRIPT = """
import sys
from bert_keras import tasks
from bert_keras.checkpoints import save_pretrained
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "."]
with open(sys.argv[1] + "/vocab.txt", "w") as f:
    f.write("\\n".join(vocab) + "\\n")
encoder = BertEncoder(BertConfig(vocab_size=len(vocab), hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=20, max_position_embeddings=32))
save_pretrained(encoder, sys.argv[1] + "/encoder.keras", vocab_file=sys.argv[1] + "/vocab.txt")
classifier = tasks.TextClassifier.from_pretrained(sys.argv[1] + "/encoder.keras", labels=["neg", "pos"],
                                                  seq_length=16)
for n in (1, 2, 3, 5, 7, 9, 11):  # new shapes: retracing our own calls must not warn
    classifier.predict(["good film ."] * n)
classifier.fit(["good film .", "bad film ."] * 4, ["pos", "neg"] * 4, epochs=1, verbose=0)
print("done")
"""


def test_a_script_that_imports_the_library_is_as_quiet_as_the_cli(tmp_path):
    env = user_environment()
    env.pop("BERT_KERAS_VERBOSE", None)
    result = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "done"
    assert not noise_in(result.stderr), result.stderr[-2000:]
    # BERT_KERAS_VERBOSE=1 keeps TensorFlow's own start-up lines
    loud = subprocess.run([sys.executable, "-c", "import bert_keras.tasks, tensorflow as tf; "
                           "tf.constant(1.0) + 1"], capture_output=True, text=True,
                          env={**env, "BERT_KERAS_VERBOSE": "1"}, timeout=300)
    assert noise_in(loud.stderr), loud.stderr[-2000:]


def test_a_users_own_tf_cpp_min_log_level_0_keeps_tensorflows_start_up_lines():
    """`TF_CPP_MIN_LOG_LEVEL=0` set by the user asks for every C++ line: importing the library
    first dropped TensorFlow's start-up lines all the same. Another level of theirs still drops them
    (TensorFlow 2.21 writes them before absl reads the level)."""
    script = "import bert_keras, tensorflow as tf; tf.constant(1.0) + 1"
    runs = {level: subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                                  env={**user_environment(), "TF_CPP_MIN_LOG_LEVEL": level})
            for level in ("0", "2")}
    assert all(run.returncode == 0 for run in runs.values()), [run.stderr[-2000:] for run in runs.values()]
    assert "port.cc" in runs["0"].stderr or "cpu_feature_guard.cc" in runs["0"].stderr, runs["0"].stderr[-2000:]
    assert "port.cc" not in runs["2"].stderr and "cpu_feature_guard.cc" not in runs["2"].stderr, runs["2"].stderr
