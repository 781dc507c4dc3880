"""Fault tolerance and multi-worker training of `run_pretraining`, in real subprocesses.

* A run killed with SIGKILL after its second backup, started again with the same
  arguments, resumes at the backed-up step and ends at the total step count (the
  last backup's metadata cut off mid-write: the epoch stamped in its weights is used).
* Killed multi-worker runs resume every worker from the same backup.
* Two `MultiWorkerMirroredStrategy` workers on 127.0.0.1 train together; only
  the chief writes checkpoints.

Models are 1 layer of width 32 and runs a dozen steps, so each test takes
seconds beyond the TensorFlow start-up of its processes.
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The training script each subprocess runs: tiny BertPretrainer, synthetic deterministic
# batches, an optional per-step sleep so that the parent can kill it mid-run.
TRAIN_SCRIPT = r'''
import json, logging, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
logging.basicConfig(level=logging.INFO, format="%(message)s")
import keras
import tensorflow as tf
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.models import BertPretrainer
from bert_keras.training import get_strategy, is_chief, run_pretraining

output, steps, every, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
config = BertConfig(vocab_size=99, hidden_size=32, num_layers=1, num_heads=4,
                    intermediate_size=37, max_position_embeddings=40)

def make_dataset(batch=4, seq=12, predictions=3):
    def batch_number(i):
        seed = tf.stack([i, tf.constant(7, tf.int64)])
        uniform = tf.random.stateless_uniform
        x = {"token_ids": uniform([batch, seq], seed, 0, 99, tf.int32),
             "segment_ids": tf.zeros([batch, seq], tf.int32),
             "padding_mask": tf.ones([batch, seq], tf.int32),
             "masked_lm_positions": uniform([batch, predictions], seed + 1, 1, seq, tf.int32)}
        y = {"masked_lm_ids": uniform([batch, predictions], seed + 2, 0, 99, tf.int32),
             "masked_lm_weights": tf.ones([batch, predictions]),
             "next_sentence_labels": uniform([batch], seed + 3, 0, 2, tf.int32)}
        return x, y
    return tf.data.Dataset.counter().map(batch_number)

class Slow(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(delay)

    def on_epoch_end(self, epoch, logs=None):  # after the backup: the parent says when to go on
        if epoch + 1 < int(os.environ.get("HOLD_FROM_EPOCH", "0")):
            return
        while os.path.exists(os.environ.get("HOLD_WHILE", "/nonexistent")):
            time.sleep(0.05)

strategy = get_strategy("multiworker" if "TF_CONFIG" in os.environ else "default")
result = run_pretraining(
    build_model=lambda: BertPretrainer(BertEncoder(config)), make_dataset=make_dataset,
    output_dir=output, num_train_steps=steps, num_warmup_steps=1, global_batch_size=4,
    checkpoint_every=every, keep_checkpoints=2, tensorboard=False, callbacks=[Slow()], verbose=0,
    strategy=strategy)
print("RESULT " + json.dumps({
    "initial_step": result.initial_step, "final_step": result.final_step,
    "iterations": int(result.model.optimizer.iterations.numpy()), "checkpoint": result.checkpoint,
    "chief": is_chief(strategy), "replicas": strategy.num_replicas_in_sync}), flush=True)
'''


def start(script, args, env=None):
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish(process, timeout=300):
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]
    line = [line for line in output.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), output


def backed_up_epoch(backup_dir):
    """The epoch of the committed backup: the stamp in its weights (the metadata follows it)."""
    import h5py

    try:
        with h5py.File(os.path.join(backup_dir, "latest.weights.h5"), "r") as f:
            return int(f.attrs["bert_keras_backup_epoch"])
    except (OSError, KeyError):
        return 0  # not written yet


@pytest.fixture
def train_script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN_SCRIPT)
    return path


def test_killed_run_resumes_at_the_backed_up_step(train_script, tmp_path):
    # 8 backups; the run holds after the second until killed: the kill lands before the run ends
    # however late this process is scheduled (with 0.75 s epochs and no hold, the 4.5 s left after
    # the second backup were a margin a loaded machine could use up).
    output, steps, every = tmp_path / "run", 24, 3
    backup = output / "backup"
    hold = tmp_path / "hold"
    hold.write_text("")
    first = start(train_script, [output, steps, every, 0.25], env={"HOLD_WHILE": str(hold), "HOLD_FROM_EPOCH": "2"})
    deadline = time.time() + 300  # a safety net: TensorFlow's import and two epochs
    while backed_up_epoch(backup) < 2:
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.time() < deadline, "no second backup written in 300 s"
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL
    epoch = backed_up_epoch(backup)  # read again: the process may have backed up once more
    assert 2 <= epoch < steps // every
    # As if the kill had landed while the metadata was written after the weights' commit:
    # Keras itself cannot parse such a file; the weights say which epoch they hold.
    metadata = backup / "training_metadata.json"
    metadata.write_text(metadata.read_text()[:7])

    result, log = finish(start(train_script, [output, steps, every, 0.0]))
    assert "rewritten from the weights" in log
    assert f"resuming at step {epoch * every}" in log
    assert result["initial_step"] == epoch * every
    # The optimizer state came back with the weights: its step count goes on from the backup.
    assert result["final_step"] == steps and result["iterations"] == steps
    assert result["checkpoint"].endswith(f"ckpt-{steps}")
    assert not backup.exists()  # a completed run removes its backup


def test_a_second_run_on_a_directory_in_training_is_refused(train_script, tmp_path):
    output, steps, every = tmp_path / "run", 8, 2
    hold = tmp_path / "hold"
    hold.write_text("")
    first = start(train_script, [output, steps, every, 0.0], env={"HOLD_WHILE": str(hold)})
    deadline = time.time() + 300  # a safety net: TensorFlow's import and an epoch
    while backed_up_epoch(output / "backup") < 1:  # the first run trains
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.time() < deadline, "no backup written in 300 s"
        time.sleep(0.05)
    second = start(train_script, [output, steps, every, 0.0])
    log, _ = second.communicate(timeout=300)
    assert second.returncode != 0, log[-3000:]
    assert f"a pretraining run in process {first.pid} is training there now" in log, log[-3000:]
    # The refused run touched nothing: the first completes as if alone, and frees the directory.
    hold.unlink()
    result, _ = finish(first)
    assert result["final_step"] == steps and result["iterations"] == steps
    assert not (output / "backup.owner").exists() and not (output / "backup").exists()


def free_ports(count):
    """`count` ports free now, for TF_CONFIG (the workers must know each other's before they start).

    Picked below the kernel's ephemeral range: a port bound to 0 and released is handed to the
    next process that binds 0 (another test file's server under `pytest -n`, an outgoing
    connection) in the seconds before a worker binds it; ports below the range are never handed out.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; elsewhere, the same range is a fair guess
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)  # two runs on one machine start at different ports
    sockets = []
    for port in candidates:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        sockets.append(s)
        if len(sockets) == count:
            break
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    assert len(ports) == count, f"no {count} free ports below {low}"
    return ports


def test_two_multiworker_processes_train_together_and_the_chief_checkpoints(train_script, tmp_path):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    output, steps = tmp_path / "run", 4

    def tf_config(index):
        return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})

    processes = [start(train_script, [output, steps, 2, 0.0], env={"TF_CONFIG": tf_config(i)}) for i in range(2)]
    results = [finish(process) for process in processes]
    chief, other = results[0][0], results[1][0]
    assert chief["replicas"] == other["replicas"] == 2
    assert chief["chief"] and not other["chief"]
    assert chief["final_step"] == other["final_step"] == steps
    assert chief["iterations"] == other["iterations"] == steps
    assert chief["checkpoint"].endswith(f"ckpt-{steps}") and other["checkpoint"] is None
    assert os.path.exists(chief["checkpoint"] + ".index")


def test_killed_multiworker_run_resumes_every_worker_from_the_same_epoch(train_script, tmp_path):
    # Both workers are killed; worker 1 then holds one backup fewer, as when a kill lands
    # during its save. Resuming from different epochs would train different weights under one
    # MirroredStrategy: the workers must agree on the older backup.
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    output, steps, every = tmp_path / "run", 24, 3  # 8 backups; both hold after the second until killed
    backups = [output / "backup", output / "backup-worker-1"]
    hold = tmp_path / "hold"
    hold.write_text("")

    def tf_config(index):
        return {"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}

    first = [start(train_script, [output, steps, every, 0.25],
                   env={**tf_config(i), "HOLD_WHILE": str(hold), "HOLD_FROM_EPOCH": "2"}) for i in range(2)]
    deadline = time.time() + 300  # a safety net: TensorFlow's import, the cluster, two epochs
    while min(backed_up_epoch(b) for b in backups) < 2:
        for process in first:
            assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.time() < deadline, "no second backup in 300 s"
        time.sleep(0.05)
    for process in first:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    epochs = [backed_up_epoch(b) for b in backups]
    if epochs[0] == epochs[1]:  # step worker 1 back to its previous backup
        for name in ("latest.weights.h5", "training_metadata.json"):
            os.replace(backups[1] / (name + ".bkp"), backups[1] / name)
        epochs[1] = backed_up_epoch(backups[1])
    agreed = min(epochs)
    assert agreed >= 1 and abs(epochs[0] - epochs[1]) == 1

    results = [finish(process, timeout=300) for process in
               [start(train_script, [output, steps, every, 0.0], env=tf_config(i)) for i in range(2)]]
    for result, log in results:
        assert f"resuming at step {agreed * every}" in log, log[-3000:]
        assert result["initial_step"] == agreed * every
        assert result["final_step"] == steps and result["iterations"] == steps
    ahead = 0 if epochs[0] > epochs[1] else 1
    assert "resuming every worker from epoch" in results[ahead][1]


def test_roll_back_backup_steps_back_to_the_previous_pair(tmp_path):
    from bert_keras.training.backup import backed_up_epoch as epoch_of, roll_back_backup

    def write(epoch, suffix=""):
        (tmp_path / ("latest.weights.h5" + suffix)).write_bytes(b"weights %d" % epoch)
        (tmp_path / ("training_metadata.json" + suffix)).write_text(json.dumps({"epoch": epoch, "batch": 0}))

    write(2, ".bkp")
    write(3)
    roll_back_backup(str(tmp_path), 3)  # already there: nothing moves
    assert epoch_of(str(tmp_path)) == 3 and not (tmp_path / "latest.weights.h5.ahead").exists()
    roll_back_backup(str(tmp_path), 2)
    assert epoch_of(str(tmp_path)) == 2 and (tmp_path / "latest.weights.h5").read_bytes() == b"weights 2"
    assert (tmp_path / "latest.weights.h5.ahead").read_bytes() == b"weights 3"  # kept, not deleted
    with pytest.raises(RuntimeError, match="epochs 2 and 0.*resume from epoch 1"):
        roll_back_backup(str(tmp_path), 1)
    roll_back_backup(str(tmp_path), 0)  # start afresh: the backup moves aside
    assert epoch_of(str(tmp_path)) == 0 and (tmp_path / "training_metadata.json.ahead").exists()
    (tmp_path / "training_metadata.json").write_text('{"epo')  # cut off mid-write
    assert epoch_of(str(tmp_path)) == 0


def test_gather_from_replicas_on_mirrored_cpus():
    import tensorflow as tf

    from bert_keras.training.strategy import gather_from_replicas

    assert gather_from_replicas(tf.distribute.get_strategy(), 5) == [5]
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) >= 2:
        strategy = tf.distribute.MirroredStrategy([d.name for d in cpus[:2]])
        assert gather_from_replicas(strategy, 4) == [4, 4]


def test_the_backup_of_a_step_is_written_before_its_checkpoint(tmp_path, monkeypatch):
    """A run killed after `checkpoints/ckpt-N` was written and before the backup of step N had no
    backup of it: the rerun "continued" from the checkpoint, without the backup's random state and
    data position, and ended elsewhere than the uninterrupted run (1.6e-3 apart after 40 steps of
    `pretrain --input`). Each checkpoint now finds the backup of its step already written."""
    import tensorflow as tf

    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertPretrainer
    from bert_keras.training import callbacks as callbacks_module
    from bert_keras.training import run_pretraining
    from bert_keras.training.backup import backed_up_epoch as epoch_of

    config = BertConfig(vocab_size=99, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=37,
                        max_position_embeddings=40)
    x = {"token_ids": tf.fill([4, 12], 7), "segment_ids": tf.zeros([4, 12], tf.int32),
         "padding_mask": tf.ones([4, 12], tf.int32), "masked_lm_positions": tf.fill([4, 3], 2)}
    y = {"masked_lm_ids": tf.fill([4, 3], 9), "masked_lm_weights": tf.ones([4, 3]),
         "next_sentence_labels": tf.zeros([4], tf.int32)}
    seen = []  # (checkpoint step, backed-up epoch when it was written)
    original = callbacks_module.StepCheckpoint._save

    def recording_save(self):
        seen.append((self.step, epoch_of(str(tmp_path / "run" / "backup"))))
        original(self)

    monkeypatch.setattr(callbacks_module.StepCheckpoint, "_save", recording_save)
    every = 2
    run_pretraining(
        build_model=lambda: BertPretrainer(BertEncoder(config)),
        make_dataset=lambda: tf.data.Dataset.from_tensors((x, y)).repeat(), output_dir=str(tmp_path / "run"),
        num_train_steps=6, num_warmup_steps=1, global_batch_size=4, checkpoint_every=every, keep_checkpoints=2,
        tensorboard=False, verbose=0)
    assert [step for step, _ in seen] == [2, 4, 6]
    # The final step's backup is removed with the completed run, after its checkpoint.
    assert all(epoch == step // every for step, epoch in seen), seen
