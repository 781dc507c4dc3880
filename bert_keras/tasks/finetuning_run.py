"""A fine-tuning run's backup directory (`TextTask.fit(run_dir=...)`, `bert-keras finetune`).

A fit with `run_dir` backs up its weights, optimizer and epoch there (`RunBackup`, atomic
saves) and records what identifies the run in `run.json`: the data, the starting weights,
the recipe, the schedule and how texts are read, as short fingerprints (`digest`). A fit
killed and run again with the same arguments resumes from the last backup; a directory
holding another run's backup, a running fit's (its owner file), or files of the user's is
refused by name (`RunDirectoryConflict`), never reused or deleted. `command_fit` words those
conflicts for the command line, and `remove_run_dir` removes a finished run's backup.

Example:

>>> digest(["a text", "another"]) == digest(["a text", "another"]) != digest(["a text"])
True
>>> digest(iter([1, 2])) is None  # a stream cannot be read twice: no fingerprint
True
"""

import contextlib
import os

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import family
from bert_keras.tasks.inputs import TaskInputError
from bert_keras.training.backup import BACKUP_FILES, RunBackup
from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD

# What a run directory may hold: the backup's files, the run's description, and which process
# runs it now (a second fit on the same directory would resume a live run's backup).
_RUN_OWNER = "run.owner"
_RUN_FILES = (*BACKUP_FILES, "run.json", _RUN_OWNER)


class RunDirectoryConflict(TaskInputError):
    """`run_dir` holds another run's backup, or a running fit's: `run_dir` and `holds` (what, in
    words) let a command say it in its own terms."""

    def __init__(self, run_dir, holds, message):
        super().__init__(message)
        self.run_dir, self.holds = run_dir, holds


def command_fit(fit, run_dir, output_dir, log, *, overwrite=False):
    """A command's fit with backups in `run_dir` (inside `output_dir`): `fit(callbacks)` with a
    callback that says "resuming" once the fit has accepted the backup. A `RunDirectoryConflict`
    is worded for the command line; with `overwrite`, the backup of another run that is not
    running is removed and the fit starts afresh (as `pretrain --overwrite` does)."""
    import shlex

    class SayResuming(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            if os.path.isfile(os.path.join(run_dir, "training_metadata.json")):
                log(f"resuming the interrupted run backed up in {run_dir}")

    for attempt in range(2):
        try:
            return fit([SayResuming()])
        except RunDirectoryConflict as conflict:
            running = "running now" in conflict.holds
            if overwrite and not running and attempt == 0:
                log(f"--overwrite: removing {run_dir}, which holds {conflict.holds}")
                remove_run_dir(run_dir)
                continue
            if running:
                advice = "wait for it to end, or choose another --output-dir"
            else:
                advice = (f"run the command that started it again to finish it, or remove it to start over "
                          f"(rm -r {shlex.quote(run_dir)}, or pass --overwrite)")
            raise TaskInputError(f"{output_dir}: {run_dir} holds {conflict.holds}: {advice}") from None


@contextlib.contextmanager
def after_saving(output_dir):
    """What a command does once its model is saved in `output_dir` (its dev evaluation): a Ctrl-C
    or SIGTERM there carries `saved` (the directory), so that the command line says the model is
    saved rather than "run the same command again to resume" (which would refuse the directory
    that now holds the model)."""
    from bert_keras.interruptions import interrupt_behind

    try:
        yield
    except KeyboardInterrupt as interrupt:
        interrupt.saved = os.fspath(output_dir)
        raise
    except Exception as error:  # noqa: BLE001 - a Ctrl-C TensorFlow turned into another error (tracing)
        interrupt = interrupt_behind(error)
        if interrupt is None:
            raise
        interrupt.saved = os.fspath(output_dir)
        raise interrupt from None


def remove_run_dir(run_dir):
    """Removes a fit's run directory (`fit(run_dir=..., keep_run_dir=True)`): the backup's files,
    its description and owner, then the directory if nothing else is in it."""
    from bert_keras.training.backup import remove_backup

    remove_backup(os.fspath(run_dir), companion_files=("run.json", _RUN_OWNER))


def backup_callback(run_dir, keep=False, earlier_readings=(), **run):
    """`RunBackup` in `run_dir`, after checking the directory holds nothing else (`keep`: the
    last backup stays when the fit completes).

    The backup deletes its directory when the fit completes, so a directory with
    other files (the user's) is refused; so is the backup of a different run (another
    number of steps, epoch length or batch size), which would resume the wrong schedule.
    `earlier_readings`: other fingerprints of this run's `reading`, as a backup written before
    a setting was renamed recorded it (`Family.earlier_names`): such a backup is this run's.
    """
    import json

    from pipelines.atomic_writes import claim_owner, is_staging_name, write_json

    run_dir = os.path.abspath(os.fspath(run_dir))
    if os.path.exists(run_dir):
        if not os.path.isdir(run_dir):
            raise TaskInputError(f"run_dir={run_dir}: exists and is not a directory")
        foreign = sorted(name for name in set(os.listdir(run_dir)) - set(_RUN_FILES)
                         if not is_staging_name(name))
        if foreign:
            raise TaskInputError(f"run_dir={run_dir}: holds other files ({', '.join(foreign[:5])}); a run "
                                 "directory is removed when the fit completes: give a new one")
        description = os.path.join(run_dir, "run.json")
        if os.path.isfile(description):
            with open(description, encoding="utf-8") as f:
                previous = json.load(f)
            if previous.get("reading") in earlier_readings:  # written before a setting's rename
                previous["reading"] = run.get("reading")
            if previous != run:
                differ = sorted(key for key in set(previous) | set(run) if previous.get(key) != run.get(key))
                raise RunDirectoryConflict(run_dir, f"the backup of another run ({', '.join(differ)} differ)",
                                           f"run_dir={run_dir}: holds the backup of another run ({', '.join(differ)} "
                                           "differ: the data, starting weights, recipe, schedule or how texts are "
                                           "read: seq_length, casing, labels, settings); remove it to "
                                           "start over, or give a new run_dir")
    os.makedirs(run_dir, exist_ok=True)
    pid = claim_owner(os.path.join(run_dir, _RUN_OWNER))
    if pid is not None:
        raise RunDirectoryConflict(run_dir, f"the run of process {pid}, running now",
                                   f"run_dir={run_dir}: a fit in process {pid} is running in it now; wait for "
                                   "it to end, or give another run_dir")
    write_json(os.path.join(run_dir, "run.json"), run)
    return RunBackup(run_dir, save_freq="epoch", delete_checkpoint=not keep,
                     companion_files=("run.json", _RUN_OWNER))


def task_backup_callback(task, run_dir, *, keep, total_steps, steps_per_epoch, batch_size, seed, data):
    """`backup_callback` for a task's fit: the run is identified by its schedule, batch, seed, and
    the fingerprints of its data, recipe, starting encoder weights and how the task reads text."""
    text = task._record
    reading = {"seq_length": task.seq_length, "lowercase": text.lowercase, "labels": task.labels,
               "settings": task.settings,
               # only when it departs from the casing: digests of earlier runs hold
               **({"strip_accents": text.strip_accents} if text.strip_accents != text.lowercase else {}),
               **({"pre_tokenizer": text.pre_tokenizer} if text.pre_tokenizer else {}),
               **({"max_input_chars_per_word": text.max_input_chars_per_word}
                  if text.max_input_chars_per_word != ORIGINAL_MAX_CHARS_PER_WORD else {}),
               **({"unicode_normalization": text.unicode_normalization} if text.unicode_normalization else {})}
    renamed = [(earlier, now) for earlier, now in family(task.kind).earlier_names if now in task.settings]
    earlier = [digest(dict(reading, settings={earlier if key == now else key: value
                                              for key, value in task.settings.items()}))
               for earlier, now in renamed]
    return backup_callback(run_dir, keep=keep, total_steps=total_steps, steps_per_epoch=steps_per_epoch,
                           batch_size=batch_size, seed=seed, recipe=digest(task._recipe),
                           weights=run_start_weights(task, run_dir), data=digest(data), reading=digest(reading),
                           earlier_readings=tuple(earlier))


def run_start_weights(task, run_dir):
    """`weights_digest` of the weights the run in `run_dir` started from: the task's now, unless
    this task's last fit with `run_dir` was stopped (Ctrl-C in a notebook, an exception) and left
    its backup: that fit's starting weights, so that the same call resumes it in the same process
    as in a new one (its weights have trained since: "the backup of another run" refused it)."""
    run_dir = os.path.abspath(os.fspath(run_dir))
    earlier = getattr(task, "_run_dir_start", None)  # "<weights digest> <run_dir>"
    if earlier and earlier.split(" ", 1)[1] == run_dir and os.path.isfile(os.path.join(run_dir, "run.json")):
        return earlier.split(" ", 1)[0]
    weights = weights_digest(task.head)
    task._run_dir_start = f"{weights} {run_dir}"
    return weights


def forget_run_start(task):
    """After a fit whose `run_dir` was removed as it completed: the task's next fit there is a new run."""
    task._run_dir_start = None


def digest(value):
    """A short fingerprint of in-memory data or settings (None for a dataset or generator, which
    cannot be read twice): a rerun with other data or another recipe is not the same run."""
    import hashlib

    digest = hashlib.sha256()

    def feed(item):
        if isinstance(item, (tf.data.Dataset, keras.utils.PyDataset)) or hasattr(item, "__next__"):
            raise TypeError("a stream")
        if hasattr(item, "columns") and hasattr(item, "to_dict"):  # a DataFrame
            item = item.to_dict("list")
        elif hasattr(item, "tolist"):  # numpy, pandas
            item = item.tolist()
        elif isinstance(item, tf.Tensor):
            item = item.numpy().tolist()
        if isinstance(item, dict):
            for key in sorted(item, key=str):
                digest.update(repr(key).encode())
                feed(item[key])
        elif isinstance(item, (list, tuple)):
            digest.update(b"[%d" % len(item))
            for element in item:
                feed(element)
            digest.update(b"]")
        else:
            digest.update(repr(item).encode("utf-8", "surrogatepass") + b"\x00")

    try:
        feed(value)
    except TypeError:
        return None
    return digest.hexdigest()[:16]


def weights_digest(head):
    """A fingerprint of the encoder's weights as the fit starts (its first values per variable;
    the head is left out: it is often initialised at random)."""
    import hashlib

    digest = hashlib.sha256()
    for variable in head.encoder.weights:
        values = np.asarray(keras.ops.convert_to_numpy(variable)).reshape(-1)[:256]
        digest.update(repr(tuple(variable.shape)).encode() + values.astype("float32").tobytes())
    return digest.hexdigest()[:16]
