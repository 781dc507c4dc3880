"""`RunBackup`: a kill at any moment of a save leaves a backup the same call resumes from.

A two-weight Keras model stands in for BERT: what is tested is where the files are when the
save stops (inside the weights write, between the commit and the metadata), and what the
next `fit` starts from. Plain `keras.callbacks.BackupAndRestore` fails the first case with
"truncated file" (CI saw it: `bert-keras finetune` killed mid-save could not resume).
"""

import json
import os

import keras
import numpy as np
import pytest

import pipelines.atomic_writes
from bert_keras.training.backup import RunBackup, backed_up_epoch, settle_backup

X = np.linspace(-1, 1, 16, dtype="float32").reshape(16, 1)
Y = 3 * X + 1


def model():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return m


class Killed(Exception):
    pass


class Weights(keras.callbacks.Callback):
    """Records the weights at the start of training (after the backup restored them) and per epoch."""

    def on_train_begin(self, logs=None):
        self.at_start = [w.copy() for w in self.model.get_weights()]
        self.per_epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.per_epoch.append([w.copy() for w in self.model.get_weights()])


def fit(m, backup_dir, epochs, **options):
    weights = Weights()
    history = m.fit(X, Y, batch_size=8, epochs=epochs, verbose=0, shuffle=False,
                    callbacks=[RunBackup(backup_dir, save_freq="epoch", delete_checkpoint=True, **options),
                               weights])
    return history, weights


def kill_on_save(m, number, *, cut_weights):
    """Makes the `number`-th backup save stop, inside the weights write or right after the commit."""
    saves = {"count": 0}
    save_weights = m.save_weights

    def stopping_save(filepath, **kwargs):
        saves["count"] += 1
        if saves["count"] == number and cut_weights:
            with open(filepath, "wb") as f:
                f.write(b"\x89HDF\r\n\x1a\n" + b"\x00" * 88)  # what a SIGKILL mid-write leaves: 96 bytes
            raise Killed
        return save_weights(filepath, **kwargs)

    m.save_weights = stopping_save
    return saves


@pytest.mark.parametrize("double_checkpoint", [False, True])
def test_a_save_killed_inside_the_weights_write_leaves_the_previous_backup(tmp_path, double_checkpoint):
    backup = str(tmp_path / "run")
    first = model()
    kill_on_save(first, 2, cut_weights=True)
    recorder = Weights()
    with pytest.raises(Killed):
        first.fit(X, Y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                  callbacks=[recorder, RunBackup(backup, save_freq="epoch", delete_checkpoint=True,
                                                 double_checkpoint=double_checkpoint)])
    assert backed_up_epoch(backup) == 1
    history, weights = fit(model(), backup, 3, double_checkpoint=double_checkpoint)
    assert len(weights.per_epoch) == 2  # epochs 2 and 3 ran: it resumed after epoch 1
    assert history.epoch == [0, 1, 2] and len(history.history["loss"]) == 3  # the whole run's history
    for restored, saved in zip(weights.at_start, recorder.per_epoch[0]):
        np.testing.assert_array_equal(restored, saved)
    assert not os.path.exists(backup)  # the completed fit removed it


def test_a_kill_between_the_weights_and_the_metadata_resumes_from_the_new_weights(tmp_path, monkeypatch):
    backup = str(tmp_path / "run")
    first = model()
    recorder = Weights()
    writes = {"count": 0}
    write_json = pipelines.atomic_writes.write_json

    def stopping_write(path, content, **kwargs):
        if os.path.basename(path) == "training_metadata.json":
            writes["count"] += 1
            if writes["count"] == 2:
                raise Killed
        return write_json(path, content, **kwargs)

    monkeypatch.setattr(pipelines.atomic_writes, "write_json", stopping_write)
    with pytest.raises(Killed):
        first.fit(X, Y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                  callbacks=[recorder, RunBackup(backup, save_freq="epoch", delete_checkpoint=True)])
    monkeypatch.setattr(pipelines.atomic_writes, "write_json", write_json)
    # Keras' own callback would now read epoch 1 beside the weights of epoch 2 and train epoch 2 twice.
    assert json.loads((tmp_path / "run" / "training_metadata.json").read_text())["epoch"] == 1
    notes = settle_backup(backup)
    assert any("rewritten from the weights" in note for note in notes), notes
    assert backed_up_epoch(backup) == 2
    history, weights = fit(model(), backup, 3)
    assert len(weights.per_epoch) == 1 and len(history.history["loss"]) == 3
    for restored, saved in zip(weights.at_start, recorder.per_epoch[1]):
        np.testing.assert_array_equal(restored, saved)


def test_a_backup_keras_cut_off_mid_write_falls_back_or_starts_afresh(tmp_path, caplog):
    # A backup written by plain BackupAndRestore (no epoch stamp), its weights cut off at 96 bytes.
    for double_checkpoint, resumed_epochs in ((True, 2), (False, 3)):
        backup = tmp_path / f"run-{double_checkpoint}"
        m = model()
        m.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[keras.callbacks.BackupAndRestore(
            str(backup), save_freq="epoch", delete_checkpoint=False, double_checkpoint=double_checkpoint)])
        weights = backup / "latest.weights.h5"
        weights.write_bytes(weights.read_bytes()[:96])
        with caplog.at_level("WARNING"):
            history, _ = fit(model(), str(backup), 3, double_checkpoint=double_checkpoint)
        assert len(history.history["loss"]) == resumed_epochs  # from epoch 1 (the .bkp pair), or from 0
        assert f"{weights} cannot be opened" in caplog.text


def test_settle_backup_sets_aside_what_cannot_be_dated_and_restores_the_previous_pair(tmp_path):
    assert settle_backup(str(tmp_path / "missing")) == []
    (tmp_path / "training_metadata.json").write_text(json.dumps({"epoch": 4, "batch": 0}))  # no weights
    settle_backup(str(tmp_path))
    assert backed_up_epoch(str(tmp_path)) == 0 and (tmp_path / "training_metadata.json.ahead").exists()

    m = model()
    m.fit(X, Y, epochs=2, verbose=0, callbacks=[keras.callbacks.BackupAndRestore(
        str(tmp_path), save_freq="epoch", delete_checkpoint=False, double_checkpoint=True)])
    assert settle_backup(str(tmp_path)) == [] and backed_up_epoch(str(tmp_path)) == 2  # intact: untouched
    (tmp_path / "training_metadata.json").write_text('{"epoch": ')  # Keras killed mid-metadata
    notes = settle_backup(str(tmp_path))
    assert "has metadata that cannot be read" in notes[0] and "backup before the last one" in notes[1]
    assert backed_up_epoch(str(tmp_path)) == 1 and (tmp_path / "latest.weights.h5.ahead").exists()


def test_a_completed_fit_removes_only_the_backup_files(tmp_path, caplog):
    backup = tmp_path / "run"

    class DropAFile(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            (backup / "notes.txt").write_text("mine")  # put there while the fit ran

    m = model()
    with caplog.at_level("WARNING"):
        m.fit(X, Y, epochs=2, verbose=0, callbacks=[
            RunBackup(str(backup), save_freq="epoch", delete_checkpoint=True, double_checkpoint=True,
                      companion_files=("run.json",)), DropAFile()])
    assert sorted(os.listdir(backup)) == ["notes.txt"]  # Keras' own callback removes the directory
    assert f"kept {backup}" in caplog.text
    fit(model(), str(tmp_path / "clean"), 2)
    assert not (tmp_path / "clean").exists()


def test_a_disk_too_full_for_the_next_backup_stops_the_run_and_keeps_the_last_one(tmp_path, monkeypatch):
    import collections
    import errno
    import shutil

    backup = str(tmp_path / "backup")
    m = model()
    saves = {"count": 0}
    real_usage = shutil.disk_usage
    usage = collections.namedtuple("usage", "total used free")

    def filling_disk(path):  # room for two backups, then none
        saves["count"] += 1
        return real_usage(path) if saves["count"] <= 2 else usage(10**6, 10**6, 0)

    monkeypatch.setattr(shutil, "disk_usage", filling_disk)
    with pytest.raises(OSError) as full:
        fit(m, backup, epochs=4, double_checkpoint=True)
    assert full.value.errno == errno.ENOSPC and "for the run's backup" in str(full.value)
    assert backed_up_epoch(backup) == 2  # the last backup that fitted is whole
    assert not [name for name in os.listdir(backup) if name.startswith(".")]  # nothing half-written
    monkeypatch.setattr(shutil, "disk_usage", real_usage)  # space freed: the same call resumes
    _, weights = fit(model(), backup, epochs=4, double_checkpoint=True)
    assert len(weights.per_epoch) == 2


def test_a_resumed_fit_draws_the_uninterrupted_runs_dropout_masks_and_keeps_its_history(tmp_path):
    # Keras saves no seed generator: without their state in the backup, a resumed run draws the
    # masks of step 0 again and ends elsewhere (issue 40, item 6).
    def dropout_model():
        keras.utils.set_random_seed(0)
        m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(8), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
        m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        return m

    class KilledAfterTheSecondBackup(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise Killed

    whole = dropout_model()
    expected = whole.fit(X, Y, batch_size=8, epochs=4, verbose=0, shuffle=False).history["loss"]
    backup = str(tmp_path / "run")
    with pytest.raises(Killed):
        dropout_model().fit(X, Y, batch_size=8, epochs=4, verbose=0, shuffle=False, callbacks=[
            RunBackup(backup, save_freq="epoch", delete_checkpoint=True), KilledAfterTheSecondBackup()])
    assert backed_up_epoch(backup) == 2
    resumed = dropout_model()
    history, weights = fit(resumed, backup, 4)
    assert len(weights.per_epoch) == 2 and history.epoch == [0, 1, 2, 3]
    np.testing.assert_allclose(history.history["loss"], expected, rtol=1e-6)
    for a, b in zip(whole.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-6)


@pytest.mark.parametrize("save_freq, warns", [(1, True), (2, False)])
def test_a_resume_from_a_mid_epoch_backup_says_what_is_trained_again(tmp_path, caplog, save_freq, warns):
    """Keras dates a backup by the epoch it is in and resumes at that epoch's first batch: after a
    backup inside an epoch (save_freq=1, 2 batches an epoch), its first batch is trained twice.
    That went unsaid; one at an epoch's end (save_freq=2) resumes exactly, without a word."""
    class KilledInsideEpoch1(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if int(self.model.optimizer.iterations) == 3:
                raise Killed

    backup_dir = str(tmp_path / "backup")

    def run(callbacks):
        m = model()
        m.fit(X, Y, batch_size=8, epochs=3, verbose=0, shuffle=False,
              callbacks=[RunBackup(backup_dir, save_freq=save_freq), *callbacks])
        return m

    with pytest.raises(Killed):
        run([KilledInsideEpoch1()])
    with caplog.at_level("WARNING", logger="bert_keras.training.backup"):
        m = run([])
    said = [r.getMessage() for r in caplog.records if "trained again" in r.getMessage()]
    if warns:
        assert len(said) == 1 and "inside epoch 2, after 1 of its batches" in said[0], said
        assert int(m.optimizer.iterations) == 3 + 4  # the backup at step 3, then epochs 2 and 3 whole
    else:
        assert not said and int(m.optimizer.iterations) == 6
