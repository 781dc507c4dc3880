"""Every "next:" line a `bert-keras` command prints works when pasted.

The chains a new user walks: vocab -> pretrain -> convert -> embed (-> tokenize), and
finetune -> evaluate / predict, export -> serve -> query. Each command runs as the installed
script in a fresh process; the commands after the first are taken from the "next:" lines
the previous ones printed, not written here.
"""

import os
import re
import shlex
import signal
import subprocess
import threading
import time

import pytest
from cli_subprocess import BERT_KERAS, run_bert_keras, user_environment

CORPUS = "\n\n".join(
    "\n".join(f"Sentence {i} of document {d} talks about cats, dogs and the {w} weather." for i in range(4))
    for d, w in enumerate(["sunny", "rainy", "cold", "warm", "windy", "grey"] * 4)
) + "\n"

POSITIVE = ["I loved this film.", "A wonderful, warm story.", "Great acting and a great plot.",
            "Fantastic from start to finish."]
NEGATIVE = ["I hated this film.", "A dull, cold story.", "Terrible acting and a weak plot.",
            "Boring from start to finish."]


def next_commands(stdout):
    """The `bert-keras` commands of the "next:" lines in a command's output, as argv lists.

    A "next:" line may continue on the following indented lines, may hold alternatives
    separated by `|`, and may end with a comment in parentheses or a shell comment (`# ...`).

    >>> next_commands('done\\nnext: bert-keras a --x 1   |   bert-keras b "t u"\\n'
    ...               '      bert-keras c d   (or e)\\n      bert-keras f   # ports\\n  or: docker run x\\n')
    [['bert-keras', 'a', '--x', '1'], ['bert-keras', 'b', 't u'], ['bert-keras', 'c', 'd'], ['bert-keras', 'f']]
    """
    commands, in_block = [], False
    for line in stdout.splitlines():
        if not line.startswith(" ") and "next:" in line:
            in_block, text = True, line.split("next:", 1)[1]
        elif in_block and line.strip().startswith("bert-keras "):
            text = line
        else:
            in_block = False
            continue
        for segment in text.split("|"):
            command = shlex.split(re.sub(r"\s{2,}\(.*$", "", segment.strip()), comments=True)
            if command[:1] == ["bert-keras"] and command not in commands:
                commands.append(command)
    return commands


def run(argv, cwd):
    """Runs a pasted command; fails the test on an error or on TensorFlow noise in stderr."""
    return run_bert_keras(argv, cwd).stdout


def follow(stdout, cwd, skip=(), depth=3):
    """Runs every next command printed in `stdout`, then the ones they print (to `depth`)."""
    ran = []
    frontier = [c for c in next_commands(stdout) if c[1] not in skip]
    for _ in range(depth):
        found = []
        for command in frontier:
            if command in ran:
                continue
            ran.append(command)
            found += [c for c in next_commands(run(command, cwd)) if c[1] not in skip]
        frontier = found
    return ran


def ready_address(server, timeout):
    """The gRPC address `bert-keras serve` prints once it serves ("ready: gRPC HOST:PORT").

    The server binds port 0 itself: a port picked here and released would be free for any
    other process (another test file's server under `pytest -n`) until the server took it."""
    lines, found = [], threading.Event()

    def read():
        for line in server.stdout:
            lines.append(line)
            if ": ready: gRPC " in line:
                found.set()  # and read on: the pipe never fills
    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout):
        pytest.fail(f"serve never said it was ready (exit status {server.poll()}): {''.join(lines)}")
    return next(re.search(r": ready: gRPC (\S+)", line).group(1) for line in lines if ": ready: gRPC " in line)


@pytest.mark.slow
def test_vocab_pretrain_convert_embed_chain(tmp_path):
    (tmp_path / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    out = run(["bert-keras", "vocab", "corpus.txt", "-o", "vocab.txt", "--size", "120"], tmp_path)
    ran = follow(out, tmp_path)
    assert [c[1] for c in ran] == ["tokenize"]

    out = run(["bert-keras", "pretrain", "--input", "corpus.txt", "--vocab", "vocab.txt", "--config", "tiny",
               "--steps", "2", "--batch-size", "4", "--seq-length", "32", "--max-predictions", "4",
               "--output-dir", "run"], tmp_path)
    ran = follow(out, tmp_path)
    names = [c[1] for c in ran]
    # pretrain -> embed and convert; convert -> embed of the converted model; embed -> tokenize.
    assert names.count("convert") == 1 and names.count("embed") == 2 and "tokenize" in names, ran
    converted = next(c for c in ran if c[1] == "convert")[3]
    assert os.path.isfile(tmp_path / converted.split(":", 1)[1] / "vocab.txt")


@pytest.fixture
def finetuned(tmp_path):
    """A fine-tuned sentiment model (`bert-keras finetune` on a tiny random encoder) and its output."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    (tmp_path / "corpus.txt").write_text(" ".join(POSITIVE + NEGATIVE) + "\n", encoding="utf-8")
    run(["bert-keras", "vocab", "corpus.txt", "-o", "base/vocab.txt", "--size", "120"], tmp_path)
    vocab_size = len((tmp_path / "base" / "vocab.txt").read_text(encoding="utf-8").splitlines())
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
    save_pretrained(BertEncoder(config), str(tmp_path / "base" / "encoder.keras"))
    rows = [f"{t}\tpositive" for t in POSITIVE] + [f"{t}\tnegative" for t in NEGATIVE]
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows * 4) + "\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = run(["bert-keras", "finetune", "--task", "csv:train.tsv", "--eval", "dev.tsv",
               "--init", "base/encoder.keras", "--output-dir", "ft", "--epochs", "1", "--batch-size", "8",
               "--seq-length", "32", "--max-steps", "2"], tmp_path)
    return tmp_path, out


@pytest.mark.slow
def test_finetune_export_serve_query_chain(finetuned):
    workdir, out = finetuned
    ran = follow(out, workdir, depth=2)
    assert {"evaluate", "predict"} <= {c[1] for c in ran}, ran

    out = run(["bert-keras", "export", "--model", "ft", "--base-path", "models", "--name", "sentiment"], workdir)
    commands = next_commands(out)
    serve = next(c for c in commands if c[1] == "serve")
    query = next(c for c in commands if c[1] == "query")
    server = subprocess.Popen(
        [BERT_KERAS, *serve[1:], "--host", "127.0.0.1", "--port", "0", "--rest-port", "0"],
        cwd=workdir, env=user_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        address = ready_address(server, timeout=300)
        deadline, answer = time.time() + 300, None
        while answer is None:
            assert server.poll() is None, f"serve exited (status {server.returncode})"
            result = subprocess.run([BERT_KERAS, *query[1:], "--address", address],
                                    capture_output=True, text=True, cwd=workdir, env=user_environment(),
                                    timeout=120)
            if result.returncode == 0:
                answer = result.stdout
            elif time.time() > deadline:
                pytest.fail(f"query never answered: {result.stdout}\n{result.stderr}")
            else:
                time.sleep(2)
        assert "positive" in answer or "negative" in answer, answer
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
