"""`bert-keras finetune` survives SIGKILL: the same command resumes from the last backup.

A tiny random encoder (`export_fixtures`) on 2,000 generated rows, backed up every 5 steps
(`--checkpoint-every 5`): the first run is killed right after its first backup, the rerun
says it resumes, starts past epoch 1 and saves the model; nothing of the run is left.
"""

import os
import signal
import subprocess
import time

import pytest

import export_fixtures
from cli_subprocess import BERT_KERAS, user_environment

WORDS = ["good", "bad", "film", "great", "terrible", "city", "paris", "actors", "battery", "dog"]


def write_rows(path, count=2000):
    with open(path, "w", encoding="utf-8") as f:
        f.write("text,label\n")
        for i in range(count):
            words = [WORDS[(i * 7 + j) % len(WORDS)] for j in range(3 + i % 4)]
            f.write(f"{' '.join(words)},{'pos' if 'good' in words or 'great' in words else 'neg'}\n")


@pytest.mark.slow
def test_a_killed_finetune_resumes_where_its_backup_left_off(tmp_path):
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "encoder"))
    data = str(tmp_path / "train.csv")
    write_rows(data)
    out = str(tmp_path / "model")
    command = [BERT_KERAS, "finetune", "--task", f"csv:{data}", "--init", spec, "--output-dir", out,
               "--epochs", "3", "--batch-size", "4", "--seq-length", "16", "--checkpoint-every", "5",
               "--no-eval", "--strategy", "default"]
    backup = os.path.join(out, ".finetune-run", "training_metadata.json")
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=user_environment())
    deadline = time.time() + 300
    while not os.path.exists(backup) and first.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    assert os.path.exists(backup), "the first run made no backup before it ended"
    assert not os.path.exists(os.path.join(out, "model.keras"))

    second = subprocess.run(command, capture_output=True, text=True, env=user_environment(), timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming the interrupted run" in second.stdout
    epochs = [line for line in second.stdout.splitlines() if line.startswith("Epoch ")]
    assert epochs and not epochs[0].startswith("Epoch 1/"), epochs[:3]
    assert sorted(os.listdir(out)) == ["labels.txt", "model.keras", "task.json", "vocab.txt"]
    # A rerun of the finished command is refused, saying the model is there.
    third = subprocess.run(command, capture_output=True, text=True, env=user_environment(), timeout=600)
    assert third.returncode != 0 and "already holds a fine-tuned model" in third.stdout + third.stderr
