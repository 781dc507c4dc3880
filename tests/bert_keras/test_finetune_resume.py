"""`bert-keras finetune` survives SIGKILL: the same command resumes from the last backup.

A tiny random encoder (`export_fixtures`) on 2,000 generated rows, backed up every 5 steps
(`--checkpoint-every 5`): the first run is killed right after its first backup, the rerun
says it resumes, starts past epoch 1 and saves the model; nothing of the run is left.

A resumed run is the uninterrupted one (issue 40, item 6): with the same seed it reads the
batches the uninterrupted run reads next, draws the same dropout masks (the seed generators'
state is in the backup), and ends at the same loss and weights; its "train loss A -> B" starts
at the run's first loss. SIGTERM stops a training command as Ctrl-C does: it says how to
resume and exits with 143.
"""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
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
    assert epochs and "(steps 1-5 of 1500)" not in epochs[0], epochs[:3]  # Keras epochs of 5 steps
    assert sorted(os.listdir(out)) == ["labels.txt", "model.keras", "task.json", "vocab.txt"]
    # A rerun of the finished command is refused, saying the model is there.
    third = subprocess.run(command, capture_output=True, text=True, env=user_environment(), timeout=600)
    assert third.returncode != 0 and "already holds a fine-tuned model" in third.stdout + third.stderr


def test_a_resumed_finetune_ends_at_the_uninterrupted_runs_loss_and_weights(tmp_path, monkeypatch, capsys):
    """Also what the progress says: backed up every 2 steps of 5-step passes, it printed "Epoch 1/5" ...
    "Epoch 5/5" for a run of 2 epochs (Keras epochs of 2 steps) → each heading is the pass over the data
    and its steps, in a resumed run too."""
    from bert_keras.tasks.finetuning import finetune
    from bert_keras.tasks.named_datasets import parse_task
    from bert_keras.training import backup

    spec = export_fixtures.make_encoder_spec(str(tmp_path / "encoder"))
    data = str(tmp_path / "train.csv")
    write_rows(data, count=40)

    def run(out, log):  # dropout on (0.1): the masks must be the uninterrupted run's too
        return finetune(parse_task(f"csv:{data}"), spec, str(tmp_path / out), epochs=2, batch_size=8,
                        seq_length=16, checkpoint_every=2, strategy="default", seed=0, evaluate=False,
                        verbose=2, log=log)

    def headings():
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("Epoch")]

    whole_log, resumed_log = [], []
    capsys.readouterr()
    whole = run("whole", whole_log.append)
    assert headings() == ["Epoch 1/2 (steps 1-2 of 10)", "Epoch 1/2 (steps 3-4 of 10)",
                          "Epoch 1-2/2 (steps 5-6 of 10)", "Epoch 2/2 (steps 7-8 of 10)",
                          "Epoch 2/2 (steps 9-10 of 10)"]

    saves, save = [], backup.RunBackup._save_model

    def killed_after_the_second_backup(self):
        save(self)
        saves.append(self._current_epoch)
        if len(saves) == 2:
            raise KeyboardInterrupt  # as a kill: what the process held is gone, the backup stays

    monkeypatch.setattr(backup.RunBackup, "_save_model", killed_after_the_second_backup)
    with pytest.raises(KeyboardInterrupt):
        run("resumed", resumed_log.append)
    monkeypatch.setattr(backup.RunBackup, "_save_model", save)
    assert len(headings()) == 2
    resumed = run("resumed", resumed_log.append)
    assert headings() == ["Epoch 1-2/2 (steps 5-6 of 10)", "Epoch 2/2 (steps 7-8 of 10)",
                          "Epoch 2/2 (steps 9-10 of 10)"]

    assert any("resuming the interrupted run" in line for line in resumed_log)
    assert len(whole.losses) == len(resumed.losses) == 5  # Keras epochs of 2 steps, the first 2 before the kill
    np.testing.assert_allclose(resumed.losses, whole.losses, atol=1e-4)
    summary = [re.search(r"train loss \S+ -> \S+", line) for line in (whole_log[-1], resumed_log[-1])]
    assert summary[0] and summary[1] and summary[0].group(0) == summary[1].group(0)  # the run's first loss
    assert int(resumed.task.optimizer.iterations) == int(whole.task.optimizer.iterations) == 10
    for expected, got in zip(whole.task.weights, resumed.task.weights):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5, err_msg=expected.path)


def test_sigterm_stops_a_training_command_as_ctrl_c_does_and_exits_143(tmp_path):
    # Python's default for SIGTERM is to die at once (status -15) without a word; a training
    # command stops as on Ctrl-C instead: its last backup stays, and it says how to resume.
    script = ("import os, signal, sys, time\n"
              "from bert_keras.cli import finetune\n"
              "from bert_keras.cli.main import main\n"
              "def run(args):\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    time.sleep(600)\n"  # interrupted by the signal, or the run's timeout fails the test
              "finetune.run = run\n"
              "status = main(['finetune', '--task', 'csv:x.csv', '--init', 'i', '--output-dir', sys.argv[1]])\n"
              "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
              "sys.exit(status)\n")
    # No wall-clock bound (60 s included TensorFlow's start on a loaded machine): a stop that
    # waited for the sleep would run into the timeout instead.
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 143, (result.returncode, result.stderr)
    assert "terminated (SIGTERM); run the same command again to resume" in result.stderr


def test_sigterm_stops_a_training_command_waiting_inside_tf_data(tmp_path):
    # A main thread waiting in TensorFlow (here a tf.data filter that never yields; in a run, a
    # resume skipping its trained batches or a shuffle buffer filling) never ran the Python
    # handler: every SIGTERM was swallowed, and the command went on for minutes.
    # The signal goes once the main thread waits inside TensorFlow (its innermost Python frame is the
    # op call `iterator_get_next`), not on a 2 s timer: on a loaded machine the timer fired before the
    # wait, where any Python code takes the signal, and the test passed without testing the wait.
    script = ("import os, signal, sys, threading, time\n"
              "import tensorflow as tf\n"
              "from bert_keras.cli import finetune, main as cli_main\n"
              "cli_main.SIGTERM_GRACE_SECONDS = 1.0\n"
              "def send_once_waiting():\n"
              "    main = threading.main_thread().ident\n"
              "    deadline = time.monotonic() + 240\n"
              "    while time.monotonic() < deadline:\n"
              "        frame = sys._current_frames().get(main)\n"
              "        if frame is not None and frame.f_code.co_name == 'iterator_get_next':\n"
              "            os.kill(os.getpid(), signal.SIGTERM)\n"
              "            return\n"
              "        time.sleep(0.01)\n"
              "    print('the run never waited in iterator_get_next', file=sys.stderr, flush=True)\n"
              "    os._exit(3)\n"
              "def run(args):\n"
              "    never = tf.data.Dataset.range(10**15).filter(lambda x: x < 0)\n"
              "    threading.Thread(target=send_once_waiting, daemon=True).start()\n"
              "    next(iter(never))\n"
              "finetune.run = run\n"
              "sys.exit(cli_main.main(['finetune', '--task', 'csv:x.csv', '--init', 'i', '--output-dir', "
              "sys.argv[1]]))\n")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 143, (result.returncode, result.stderr[-3000:])
    assert "terminated (SIGTERM); run the same command again to resume" in result.stderr


def test_a_forked_childs_sigterm_does_not_end_the_training_command(tmp_path):
    # The SIGTERM watcher reads Python's wakeup fd, which a forked child inherits: the child's
    # SIGTERM must not count as the command's.
    script = ("import os, signal, sys, time\n"
              "from bert_keras.cli import finetune, main as cli_main\n"
              "cli_main.SIGTERM_GRACE_SECONDS = 0.5\n"
              "def run(args):\n"
              "    pid = os.fork()\n"
              "    if pid == 0:\n"
              "        time.sleep(30)\n"
              "        os._exit(0)\n"
              "    time.sleep(0.5)\n"
              "    os.kill(pid, signal.SIGTERM)\n"
              "    os.waitpid(pid, 0)\n"
              "    time.sleep(2)\n"
              "    print('finished')\n"
              "finetune.run = run\n"
              "sys.exit(cli_main.main(['finetune', '--task', 'csv:x.csv', '--init', 'i', '--output-dir', "
              "sys.argv[1]]))\n")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], capture_output=True,
                            text=True, timeout=300)
    assert (result.returncode, result.stdout) == (0, "finished\n"), result.stderr[-3000:]


@pytest.mark.slow
def test_a_finetune_stopped_by_sigterm_resumes_to_the_uninterrupted_runs_loss(tmp_path):
    spec = export_fixtures.make_encoder_spec(str(tmp_path / "encoder"))
    data = str(tmp_path / "train.csv")
    # 600 rows, 150 steps: the SIGTERM after the first backup (step 5) lands seconds before the run
    # would end (200 rows left 1.7 s, then the run finished, status 0, on a loaded machine).
    write_rows(data, count=600)

    def command(out):
        return [BERT_KERAS, "finetune", "--task", f"csv:{data}", "--init", spec, "--output-dir", str(out),
                "--epochs", "2", "--batch-size", "8", "--seq-length", "16", "--checkpoint-every", "5",
                "--no-eval", "--strategy", "default", "--seed", "1"]

    def summary(stdout):
        found = re.search(r"train loss (\S+) -> (\S+)", stdout)
        assert found, stdout
        return float(found.group(1)), float(found.group(2))

    whole = subprocess.run(command(tmp_path / "whole"), capture_output=True, text=True, env=user_environment(),
                           timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr

    out = tmp_path / "resumed"
    backup = out / ".finetune-run" / "training_metadata.json"
    first = subprocess.Popen(command(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=user_environment())
    deadline = time.time() + 300
    while not backup.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 143, (first.returncode, stderr)
    assert "terminated (SIGTERM); run the same command again to resume" in stderr
    assert backup.exists() and not (out / "model.keras").exists()

    second = subprocess.run(command(out), capture_output=True, text=True, env=user_environment(), timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming the interrupted run" in second.stdout
    np.testing.assert_allclose(summary(second.stdout), summary(whole.stdout), atol=1e-4)
