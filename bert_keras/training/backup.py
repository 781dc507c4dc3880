"""The run backup: resuming a killed `fit` where its last backup left off.

Keras' `BackupAndRestore` writes its weights file in place: a kill during the write
leaves a truncated HDF5 file that the next run cannot open ("truncated file: eof =
96"), and a kill between the weights and `training_metadata.json` pairs new weights
with the old epoch, so the rerun trains an epoch twice without a word. `RunBackup`
keeps Keras' files and behaviour but commits each backup atomically:

1. the weights are written to a staging file beside the backup, fsynced, and stamped
   with the epoch they hold (an HDF5 attribute), so the weights file says by itself
   which epoch it is;
2. with `double_checkpoint=True`, the previous pair is kept as `*.bkp` (hard links,
   so nothing is copied and the latest pair never goes missing);
3. the staging file is renamed over `latest.weights.h5`: the commit;
4. `training_metadata.json` is rewritten (atomically) for readers of Keras' layout.

The weights file also holds what Keras' backup leaves out and a resumed run needs to go on as
the uninterrupted one would (`RunBackup`'s docstring): the state of the model's seed generators
(its dropout masks) and the epochs' logs so far (the run's history, so a resumed run's first
loss is the run's, not the resumed part's).

A kill anywhere leaves either the old backup or the new one, never a torn one, and
`settle_backup` (run before every resume) makes the metadata agree with the weights'
stamp. It also takes over backups written by plain `BackupAndRestore` (no stamp): a
weights file that cannot be opened, or metadata that cannot be parsed, is set aside
(`<file>.ahead`) and the previous pair takes its place, or the run starts afresh.

Example:

>>> import tempfile
>>> backed_up_epoch(tempfile.mkdtemp())
0
"""

import functools
import json
import logging
import os
import shutil

import keras

from bert_keras.training.callbacks import callbacks_as_list

logger = logging.getLogger(__name__)

WEIGHTS = "latest.weights.h5"
METADATA = "training_metadata.json"
PREVIOUS = ".bkp"  # Keras' suffix for the pair double_checkpoint keeps
SET_ASIDE = ".ahead"  # a backup given up (removed with the backup directory when the run completes)
# Every name a backup directory may hold besides staging files.
BACKUP_FILES = tuple(name + suffix for name in (WEIGHTS, METADATA) for suffix in ("", PREVIOUS, SET_ASIDE,
                                                                                  PREVIOUS + SET_ASIDE))
_EPOCH_ATTRIBUTE = "bert_keras_backup_epoch"
_HISTORY_ATTRIBUTE = "bert_keras_backup_history"  # JSON: {"epoch": [...], "logs": {name: [...]}}
_SEED_GROUP = "bert_keras_seed_generators"  # one dataset per seed generator, in layer order
_WITHIN_EPOCH_ATTRIBUTE = "bert_keras_backup_within_epoch"  # a mid-epoch backup: the epoch's batches trained


class RunBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose every save is atomic (see the module docstring).

    Same arguments and files as Keras' callback; a run killed at any moment resumes
    from the last backup that was committed. Besides the weights and the optimizer (Keras'),
    a backup restores:

    - the state of the model's seed generators: a resumed run draws the dropout masks the
      uninterrupted one draws (Keras' formats save no seed generator);
    - the epochs' logs so far: the `History` that `fit` returns holds the whole run's epochs,
      those before the kill included (Keras': the resumed part's only).

    The data position is the caller's: a fit whose batches are a fixed sequence (a seeded
    shuffle) skips the `resumed_epoch() * steps_per_epoch` batches the backup has trained on,
    as `bert_keras.tasks.fit_loop` and `distill` do. With the same seed, a resumed run then
    reaches the uninterrupted run's weights and losses (to float rounding).

    Example:

    >>> import tempfile
    >>> backup = RunBackup(tempfile.mkdtemp(), save_freq="epoch", delete_checkpoint=True)
    >>> backup.resumed_epoch()  # no backup yet: the run starts at epoch 0
    0
    >>> # model.fit(..., callbacks=[backup]); kill it; the same call resumes.
    """

    def __init__(self, backup_dir, *, companion_files=(), whole_history=True, **kwargs):
        """Keras' arguments; `companion_files`: names in `backup_dir` removed with the backup;
        `whole_history=False`: the `History` of a resumed fit holds its own epochs only (Keras')."""
        super().__init__(backup_dir, **kwargs)
        self.companion_files = tuple(companion_files)
        self.whole_history = whole_history
        self._epochs, self._logs = [], {}  # the run's epochs and their logs, backed up with the weights
        self._earlier = ([], {})  # those of the backup the fit resumed from
        self._save_at_epoch_end = False  # an integer save_freq's save that fell on an epoch's last batch

    def resumed_epoch(self):
        """The epoch the next fit resumes at (0: no backup), the backup settled first
        (`settle_backup`): what a caller needs to skip the data the backup has trained on."""
        for note in settle_backup(self.backup_dir):
            logger.warning(note)
        return backed_up_epoch(self.backup_dir)

    def on_train_begin(self, logs=None):
        for note in settle_backup(self.backup_dir):
            logger.warning(note)
        super().on_train_begin(logs)
        self._epochs, self._logs = [], {}
        if os.path.exists(self._weights_path):
            self._restore_run_state()
        self._earlier = (list(self._epochs), {name: list(values) for name, values in self._logs.items()})

    def on_epoch_end(self, epoch, logs=None):
        self._epochs.append(int(epoch))
        for name, value in (logs or {}).items():
            try:
                self._logs.setdefault(name, []).append(float(value))
            except (TypeError, ValueError):  # not a number: not in the backed-up history
                pass
        super().on_epoch_end(epoch, logs)  # saves the backup, this epoch's logs included
        if self._save_at_epoch_end:
            self._save_at_epoch_end = False
            self._save_model()  # as the epoch it completes: the resumed fit starts at the next one

    def on_train_batch_end(self, batch, logs=None):
        """An integer `save_freq`'s backup. Keras dates a backup by the epoch it is in, and a
        resumed fit replays that epoch from its first batch, on weights that have trained on some
        of it; a backup that falls on the epoch's last batch is the epoch's end: it is written
        after the epoch ends (its validation and logs too), dated by the next epoch, so resuming
        from it is exact, as from a `save_freq="epoch"` backup."""
        if not self._should_save_on_batch(batch):
            return
        steps = (self.params or {}).get("steps")
        if steps and batch + 1 >= steps:
            self._save_at_epoch_end = True
        else:
            self._within_epoch = batch + 1  # Keras dates it by the epoch it is in: stamped, to warn on resume
            try:
                self._save_model()
            finally:
                self._within_epoch = 0

    def on_train_end(self, logs=None):
        forget_restored_epoch(self.model)  # read at the fit's start; a later fit starts at its own
        if self.whole_history:
            self._complete_history()
        # Keras removes the whole directory; only the backup's own files go (and the directory
        # once empty), so that nothing else a user put there is lost.
        if self.delete_checkpoint:
            remove_backup(self.backup_dir, companion_files=self.companion_files)

    def _restore_run_state(self):
        """The seed generators' states and the run's history, from the weights file Keras loaded."""
        history, seeds, within_epoch = _read_run_state(self._weights_path)
        if history is not None:
            self._epochs, self._logs = history
        if within_epoch:
            logger.warning("the backup %s was written inside epoch %d, after %d of its batches (an integer "
                           "save_freq): Keras resumes at the epoch's first batch, so those %d batches are "
                           "trained again and the run ends off the uninterrupted one; back up at epoch ends "
                           "(save_freq=\"epoch\", or a task's run_dir= with checkpoint_every=) to resume exactly",
                           self._weights_path, backed_up_epoch(self.backup_dir) + 1, within_epoch, within_epoch)
        generators = seed_generator_states(self.model)
        if seeds is None:
            if generators:
                logger.warning("the backup %s holds no dropout random state (an earlier version wrote "
                               "it): the resumed run draws other dropout masks than an uninterrupted "
                               "one", self._weights_path)
            return
        if len(seeds) != len(generators) or any(
                tuple(seed.shape) != tuple(state.shape) for seed, state in zip(seeds, generators)):
            logger.warning("the backup %s holds %d seed generator states, the model has %d: the resumed "
                           "run draws other dropout masks than an uninterrupted one", self._weights_path,
                           len(seeds), len(generators))
            return
        for seed, state in zip(seeds, generators):
            state.assign(seed)

    def _complete_history(self):
        """Puts the epochs of the backup this fit resumed from before its own in the `History`
        that `fit` returns (Keras gives each fit's `CallbackList` one, as `model.history`)."""
        earlier_epochs, earlier_logs = self._earlier
        if not earlier_epochs:
            return
        history = getattr(self.model, "history", None)
        if not isinstance(history, keras.callbacks.History):  # a loop of its own, without one
            history = keras.callbacks.History()
            history.set_model(self.model)
            self.model.history = history
        history.epoch = earlier_epochs + list(getattr(history, "epoch", []))
        for name, values in earlier_logs.items():
            history.history[name] = values + list(history.history.get(name, []))

    def _save_model(self):
        from pipelines.atomic_writes import model_nbytes, staged_path, write_json

        os.makedirs(self.backup_dir, exist_ok=True)
        with staged_path(self._weights_path, suffix=".weights.h5", size=model_nbytes(self.model),
                         what="the run's backup (weights and optimizer state)") as staging:
            self.model.save_weights(filepath=staging, overwrite=True)
            _stamp(staging, self._current_epoch, history=(self._epochs, self._logs),
                   within_epoch=getattr(self, "_within_epoch", 0),
                   seeds=[keras.ops.convert_to_numpy(state) for state in seed_generator_states(self.model)])
            if self.double_checkpoint:
                for path in (self._weights_path, self._training_metadata_path):
                    if os.path.exists(path):
                        _keep_previous(path)
        # Committed above; the metadata follows the weights (settle_backup repairs a kill in between).
        write_json(self._training_metadata_path, {"epoch": self._current_epoch, "batch": self._last_batch_seen})


def forget_restored_epoch(model):
    """Clears the epoch a backup restored into `model` (Keras' `model._initial_epoch`), before a fit.

    Keras' `BackupAndRestore` hands the epoch it restores to the fit's loop on the model, and
    nothing clears it: every later fit of that model started there (a fit of 3 epochs after a
    run resumed at epoch 1 ran 2). A fit's own backup sets it again when it restores.

    >>> import keras
    >>> model = keras.Sequential([keras.layers.Dense(1)])
    >>> model._initial_epoch = 1  # what a backup restored in an earlier fit
    >>> forget_restored_epoch(model); model._initial_epoch is None
    True
    """
    if getattr(model, "_initial_epoch", None) is not None:
        model._initial_epoch = None


def with_run_backups(callbacks):
    """`(callbacks, backup)`: `callbacks` with each of Keras' own `BackupAndRestore` replaced by a
    `RunBackup` of the same settings, and the backup callback among them (the last; None if none).

    Keras' callback restores the weights, the optimizer and the epoch, not the state of the
    model's seed generators: a fit resumed in a new process drew the first epoch's dropout masks
    again. The `RunBackup` writes Keras' files, atomically, with that state beside them, and keeps
    Keras' `History` (the resumed epochs only). The caller skips the batches the backup has
    trained on (`resumed_backup_epoch`).

    A subclass of Keras' callback (yours) stays the object you passed, its methods first: it
    becomes a `RunBackup` too (`as_run_backup`), so that what it inherits from Keras' callback
    is `RunBackup`'s and the resume is as exact.

    Example:

    >>> import tempfile, keras
    >>> callbacks, backup = with_run_backups([keras.callbacks.BackupAndRestore(tempfile.mkdtemp())])
    >>> type(backup).__name__, callbacks[0] is backup
    ('RunBackup', True)
    """
    callbacks = callbacks_as_list(callbacks)
    replaced, backup = [], None
    for callback in callbacks or ():
        if type(callback) is keras.callbacks.BackupAndRestore:
            callback = RunBackup(callback.backup_dir, save_freq=callback.save_freq,
                                 double_checkpoint=callback.double_checkpoint,
                                 delete_checkpoint=callback.delete_checkpoint, whole_history=False)
        elif isinstance(callback, keras.callbacks.BackupAndRestore):
            as_run_backup(callback)
        if isinstance(callback, keras.callbacks.BackupAndRestore):
            backup = callback
        replaced.append(callback)
    return (replaced if callbacks is not None else None), backup


def as_run_backup(callback):
    """Makes `callback`, a subclass of Keras' `BackupAndRestore`, a `RunBackup` in place.

    Left as it was, a subclass backed up and resumed as Keras' callback does: the dropout masks
    of the first epoch drawn again (weights ~3e-3 off the uninterrupted run), an integer
    `save_freq` dated by the epoch it is in (a backup at an epoch's last batch replayed that
    whole epoch on weights that had trained on it), saves not atomic. Its class becomes one
    derived from its own and `RunBackup` (in that order): its own methods run first, and what
    they leave to `super()` is `RunBackup`'s. A `RunBackup` already is returned as it is.

    >>> import tempfile, keras
    >>> class Logged(keras.callbacks.BackupAndRestore):
    ...     pass
    >>> backup = Logged(tempfile.mkdtemp())
    >>> as_run_backup(backup) is backup, isinstance(backup, (Logged, RunBackup)), type(backup).__name__
    (True, True, 'Logged')
    """
    if not isinstance(callback, RunBackup):
        callback.__class__ = _with_run_backup(type(callback))
        callback.companion_files, callback.whole_history = (), False  # Keras' History, as a plain one's
        callback._epochs, callback._logs, callback._earlier = [], {}, ([], {})
        callback._save_at_epoch_end = False
    return callback


@functools.lru_cache(maxsize=None)
def _with_run_backup(cls):
    """The class of `cls`'s callbacks once made `RunBackup`s: `cls` first, then `RunBackup`."""
    return type(cls.__name__, (cls, RunBackup), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                                 "__doc__": cls.__doc__})


def resumed_backup_epoch(callback):
    """The epoch a fit with the backup callback `callback` resumes at (0: none): a `RunBackup`'s
    settled backup, or what the metadata of another `BackupAndRestore` says."""
    if isinstance(callback, RunBackup):
        return callback.resumed_epoch()
    return backed_up_epoch(callback.backup_dir)


def backed_up_epoch(backup_dir, previous=False):
    """The epoch a backup holds (0 when there is none or it cannot be read).

    Args:
        backup_dir: str. The callback's `backup_dir`.
        previous: bool. Read the previous backup (the `.bkp` pair that
            `double_checkpoint=True` keeps) instead of the latest.
    """
    epoch = _read_metadata_epoch(os.path.join(backup_dir, METADATA + (PREVIOUS if previous else "")))
    return epoch or 0


def resumed_step(backup_dir, steps_per_epoch):
    """The global step a run killed under `RunBackup` will resume at (0 if none).

    Keras 3's `BackupAndRestore` restores weights + optimizer and the *epoch*
    (`training_metadata.json`); a mid-epoch backup (integer `save_freq`)
    restores the weights but replays that epoch from its start. So the
    pretraining loop makes one Keras epoch = one backup interval (`save_freq=
    "epoch"`): the resume point is then exact, `epoch * steps_per_epoch`.

    The data position: pretraining reads an infinite (repeated) stream, so the
    data position *is* the step count, and the caller resumes it with
    `dataset.skip(step)` on the same seeded pipeline. That yields exactly the
    batches the uninterrupted run would have seen, and needs nothing beyond the
    step number. A checkpointed `tf.data` iterator would avoid re-reading the
    skipped records, but Keras `fit` owns its iterator (it cannot be put in a
    checkpoint), and iterator checkpoints hold shuffle buffers (hundreds of MB)
    and break when the pipeline or the number of workers changes. Skipping
    reads (not trains on) the consumed batches: input-pipeline work only.

    Example:

    >>> resumed_step("/nonexistent/backup", steps_per_epoch=100)
    0

    Args:
        backup_dir: str. The `backup_dir` given to the backup callback.
        steps_per_epoch: int. Steps per Keras epoch (= per backup).
    """
    return backed_up_epoch(backup_dir) * int(steps_per_epoch)


def settle_backup(backup_dir):
    """Makes a backup directory consistent before a resume; returns what it changed, in words.

    For the latest and the previous pair: a weights file that cannot be opened is set
    aside with its metadata; metadata without weights is set aside; metadata that
    disagrees with the weights' epoch stamp (or cannot be parsed) is rewritten from the
    stamp. A latest pair that is gone or set aside is replaced by the previous pair.
    Unstamped weights (plain Keras) with unreadable metadata cannot be dated: set aside.

    Args:
        backup_dir: str. A backup directory (need not exist).
    """
    from pipelines.atomic_writes import write_json

    if not os.path.isdir(backup_dir):
        return []
    notes = []
    for suffix in (PREVIOUS, ""):
        weights, metadata = (os.path.join(backup_dir, name + suffix) for name in (WEIGHTS, METADATA))
        if os.path.exists(weights):
            opens, stamped = _read_stamp(weights)
            recorded = _read_metadata_epoch(metadata)
            if not opens or (stamped is None and recorded is None):
                why = "cannot be opened" if not opens else "has metadata that cannot be read"
                notes.append(f"the backup {weights} {why} (cut off mid-write): set aside")
                _set_aside(weights, metadata)
            elif stamped is not None and stamped != recorded:
                write_json(metadata, {"epoch": stamped, "batch": 0})
                notes.append(f"the backup metadata {metadata} did not match its weights (epoch {stamped}): "
                             "rewritten from the weights")
        elif os.path.exists(metadata):
            _set_aside(metadata)
    latest, previous = os.path.join(backup_dir, WEIGHTS), os.path.join(backup_dir, WEIGHTS + PREVIOUS)
    if not os.path.exists(latest) and os.path.exists(previous):
        for name in (WEIGHTS, METADATA):
            path = os.path.join(backup_dir, name)
            if os.path.exists(path + PREVIOUS):
                os.replace(path + PREVIOUS, path)
        notes.append(f"resuming from the backup before the last one in {backup_dir} "
                     f"(epoch {backed_up_epoch(backup_dir)})")
    return notes


def remove_backup(backup_dir, *, companion_files=()):
    """Removes a backup's files (and staging files), then the directory if nothing else is in it.

    Args:
        backup_dir: str. A backup directory (need not exist).
        companion_files: names of other files that belong to the backup (a run description).
    """
    from pipelines.atomic_writes import is_staging_name

    if not os.path.isdir(backup_dir):
        return
    for name in os.listdir(backup_dir):
        if name in BACKUP_FILES or name in companion_files or is_staging_name(name):
            path = os.path.join(backup_dir, name)
            if os.path.isfile(path) or os.path.islink(path):
                os.remove(path)
    try:
        os.rmdir(backup_dir)
    except OSError:
        logger.warning("kept %s: it holds files that are not the backup's (%s)", backup_dir,
                       ", ".join(sorted(os.listdir(backup_dir))[:5]))


def roll_back_backup(backup_dir, epoch):
    """Makes `backup_dir` hold the backup of `epoch`: the latest one, or the previous (`.bkp`) one.

    Multi-worker runs need every worker to resume from the same epoch. A worker
    killed while writing its backup has one epoch fewer than the others (its
    commit did not happen); the others then step back to theirs. The backup that
    is given up is moved to `<file>.ahead` (removed with the backup directory when
    the run completes).

    Args:
        backup_dir: str. A backup directory (double_checkpoint=True), settled.
        epoch: int. The epoch to resume from; 0 moves the backup aside (start afresh).

    Raises:
        RuntimeError: neither the latest nor the previous backup is of `epoch`.
    """
    latest = backed_up_epoch(backup_dir)
    if latest == epoch:
        return
    names = [os.path.join(backup_dir, name) for name in (WEIGHTS, METADATA)]
    if epoch == 0:
        for name in names:
            for path in (name, name + PREVIOUS):
                if os.path.exists(path):
                    os.replace(path, path + SET_ASIDE)
        return
    previous = backed_up_epoch(backup_dir, previous=True)
    if previous != epoch or not all(os.path.exists(name + PREVIOUS) for name in names):
        raise RuntimeError(
            f"{backup_dir} holds the backups of epochs {latest} and {previous}, but the other workers can only "
            f"resume from epoch {epoch}: their backups differ by more than one save. Start every worker "
            f"afresh (move the backup directories aside) or restore matching backups."
        )
    for name in names:
        os.replace(name, name + SET_ASIDE)
        os.replace(name + PREVIOUS, name)


def _keep_previous(path):
    """Makes `path + PREVIOUS` the current content of `path`, atomically, without copying."""
    from pipelines.atomic_writes import staged_path

    with staged_path(path + PREVIOUS, suffix=".bkp") as staging:
        os.remove(staging)
        try:
            os.link(path, staging)
        except OSError:  # file systems without hard links
            shutil.copyfile(path, staging)


def seed_generator_states(model):
    """The state variables of `model`'s seed generators (`keras.random.SeedGenerator`: dropout
    masks), in layer order: what a backup saves so that a resumed run draws the same masks."""
    states, seen = [], set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for generator in getattr(layer, "_seed_generators", ()):
            if id(generator.state) not in seen:
                seen.add(id(generator.state))
                states.append(generator.state)
    return states


def _stamp(weights_path, epoch, *, history=None, seeds=None, within_epoch=0):
    """Writes the epoch (and the run's history, seed generator states, and for a mid-epoch
    backup the batches of the epoch trained) into the weights file."""
    import h5py

    with h5py.File(weights_path, "a") as f:
        f.attrs[_EPOCH_ATTRIBUTE] = int(epoch)
        if within_epoch:
            f.attrs[_WITHIN_EPOCH_ATTRIBUTE] = int(within_epoch)
        if history is not None:
            epochs, logs = history
            f.attrs[_HISTORY_ATTRIBUTE] = json.dumps({"epoch": epochs, "logs": logs})
        if seeds is not None:
            group = f.require_group(_SEED_GROUP)
            for index, seed in enumerate(seeds):
                group.create_dataset(str(index), data=seed)


def _read_run_state(weights_path):
    """`((epochs, logs) or None, [seed generator states] or None, batches trained within the epoch)`
    from a backup's weights file (None: written without them, by Keras or an earlier version;
    0: a backup at an epoch's end)."""
    import h5py

    with h5py.File(weights_path, "r") as f:
        history = f.attrs.get(_HISTORY_ATTRIBUTE)
        within_epoch = int(f.attrs.get(_WITHIN_EPOCH_ATTRIBUTE, 0))
        group = f.get(_SEED_GROUP)
        seeds = None if group is None else [group[str(index)][()] for index in range(len(group))]
    if history is not None:
        history = json.loads(history)
        history = ([int(epoch) for epoch in history["epoch"]],
                   {name: [float(v) for v in values] for name, values in history["logs"].items()})
    return history, seeds, within_epoch


def _read_stamp(weights_path):
    """(whether the weights file opens, the epoch stamped into it or None: plain Keras)."""
    import h5py

    try:
        with h5py.File(weights_path, "r") as f:
            value = f.attrs.get(_EPOCH_ATTRIBUTE)
    except (OSError, ValueError):
        return False, None
    return True, (None if value is None else int(value))


def _read_metadata_epoch(path):
    try:
        with open(path, encoding="utf-8") as f:
            return int(json.load(f)["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _set_aside(*paths):
    for path in paths:
        if os.path.exists(path):
            os.replace(path, path + SET_ASIDE)
