"""The run directory of `run_pretraining`: what is in it, and what a new call may do with it.

`run.json` in the output directory records the run's identifying settings, its
target step, the segment being trained (the step it started from and the
steps per Keras epoch, which map a backup's epoch to a step) and, once done,
`"status": "complete"` with the final step and metrics. From it and the
directory's checkpoints and backup, `plan_run` decides:

- `complete`: a finished run asked for no more steps: nothing is touched.
- `resume`: a killed run (a backup exists): `BackupAndRestore` restores it.
- `continue`: a finished run asked for more steps (or a killed run whose
  backup is gone): model and optimizer come back from the latest checkpoint.
- `start`: an empty (or new) directory.

A non-empty directory that is not a run of the same settings is refused
(`RunDirectoryError`) unless `overwrite=True`, which first removes the files a
run writes. Work is never destroyed without that flag. A run that stopped before
its first backup or checkpoint trained nothing: its record is replaced.
"""

import dataclasses
import json
import os
import re
from typing import Optional

from pipelines.atomic_writes import claim_owner, is_remote, write_json

RUN_FILE = "run.json"
# What a run writes into its directory (removed by overwrite=True).
RUN_OUTPUTS = ("checkpoints", "backup", "logs", "encoder.keras", "encoder.heads.npz", "config.json",
               "vocab.txt", "tokenizer_config.json", RUN_FILE)
# `backup.owner` (the chief's), `backup-worker-N.owner`: which process trains with that backup now.
OWNER_SUFFIX = ".owner"


class RunDirectoryError(ValueError):
    """The output directory holds other work that a new run would destroy."""


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What `run_pretraining` does with its output directory (see the module docstring).

    Attributes:
        action: "start", "resume", "continue" or "complete".
        segment_start: the global step the current `fit` segment started from
            (a backup's epoch `e` is step `segment_start + e * steps_per_epoch`).
        steps_per_epoch: recorded steps per Keras epoch of that segment, or None (new segment).
        checkpoint: the checkpoint to restore ("continue") or the final one ("complete").
        completed_step: the step the checkpoint holds (0 when none).
        metrics: the final metrics of a complete run.
    """

    action: str
    segment_start: int = 0
    steps_per_epoch: Optional[int] = None
    checkpoint: Optional[str] = None
    completed_step: int = 0
    metrics: dict = dataclasses.field(default_factory=dict)


def claim_run(output_dir: str, backup_dir: str):
    """Records this process as the one training with `backup_dir` (in `BACKUP.owner` beside it)
    and returns that file, for `release_owner` when the run ends; None for a remote directory.

    Each worker of a multi-worker run has its own backup, so the workers of one run never
    collide; a second run on the same directory (same role) does, and is refused.

    Raises:
        RunDirectoryError: a live process of this host trains there now.
    """
    if is_remote(output_dir):
        return None
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.normpath(backup_dir) + OWNER_SUFFIX
    pid = claim_owner(path)
    if pid is not None:
        raise RunDirectoryError(
            f"{output_dir}: a pretraining run in process {pid} is training there now; wait for it to end "
            "(run the same command again then to continue it), or choose another output_dir.")
    return path


def read_run_record(output_dir: str) -> Optional[dict]:
    """`run.json` of `output_dir`, or None."""
    try:
        with open(os.path.join(output_dir, RUN_FILE), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except ValueError:
        return {}


def latest_checkpoint(output_dir: str):
    """(path prefix, step) of the newest `checkpoints/ckpt-STEP`, or (None, 0)."""
    import tensorflow as tf

    path = tf.train.latest_checkpoint(os.path.join(output_dir, "checkpoints"))
    if not path:
        return None, 0
    match = re.search(r"ckpt-(\d+)$", path)
    return path, int(match.group(1)) if match else 0


def plan_run(output_dir: str, *, settings: dict, num_train_steps: int, backup_epoch: int = 0,
             overwrite: bool = False, chief: bool = True, inputs=()) -> RunPlan:
    """Decides what a run with `settings` and `num_train_steps` does with `output_dir`.

    Example:

    >>> plan_run("/nonexistent/run", settings={"seed": 0}, num_train_steps=100).action
    'start'

    Args:
        output_dir: the run directory.
        settings: JSON-able dict identifying the run (data, model, batch,
            optimizer, seed...; not the step count, which may grow).
        num_train_steps: the total steps asked for.
        backup_epoch: the epoch of the `BackupAndRestore` backup (0 if none).
        overwrite: start afresh in a directory that holds other work: a recorded
            run's outputs are removed; files of the names a run writes that no run
            recorded (the user's) are never removed, and refused.
        chief: False on non-chief workers: they follow the chief's record and
            neither check nor remove anything.
        inputs: paths the run reads (vocabulary, initial weights, data): an
            overwrite that would remove one of them is refused.

    Raises:
        RunDirectoryError: the directory holds other work, and not `overwrite`.
    """
    settings = json.loads(json.dumps(settings))  # compare as stored
    names = set(os.listdir(output_dir)) if os.path.isdir(output_dir) else set()
    names = {name for name in names if not name.endswith(OWNER_SUFFIX)}  # which process runs, not work
    if overwrite and chief and names:
        return _start_afresh(output_dir, names, inputs)
    record = read_run_record(output_dir)
    if chief and names and record is None:
        theirs = sorted(name for name in names if name in RUN_OUTPUTS or name.startswith("backup-worker-"))
        if theirs:  # --overwrite would refuse them too (`_start_afresh`): do not suggest it
            advice = (f"it holds {', '.join(theirs[:5])}, of the names a run writes, which no run recorded: "
                      "choose another output_dir (or move them)")
        else:
            advice = ("choose an empty output_dir or pass overwrite=True to train there anyway (your files "
                      "stay; the run writes beside them)")
        raise RunDirectoryError(
            f"{output_dir} is not empty ({', '.join(sorted(names)[:5])}) and holds no pretraining run "
            f"({RUN_FILE} is missing): {advice}."
        )
    if record is None:
        return RunPlan("start")
    recorded = record.get("settings")
    checkpoint, step = latest_checkpoint(output_dir)
    if chief and recorded != settings and record.get("status") != "complete" and checkpoint is None \
            and backup_epoch == 0:
        # A run that stopped before its first backup or checkpoint (an error in its first steps, a
        # model that could not be built) trained nothing to lose: its record is replaced, as a
        # corrected rerun expects.
        return RunPlan("start")
    if chief and recorded != settings:
        differ = sorted(k for k in set(recorded or {}) | set(settings)
                        if (recorded or {}).get(k) != settings.get(k)) or ["run.json unreadable"]
        values = "; ".join(f"{k}: {_shown_setting(recorded or {}, k)} in {RUN_FILE}, {_shown_setting(settings, k)} now"
                           for k in differ if recorded is not None)
        raise RunDirectoryError(
            f"{output_dir} holds a pretraining run of other settings ({', '.join(differ)} differ"
            f"{': ' + values if values else ''}; "
            f"it is {record.get('status', 'unfinished')} at step {record.get('final_step', '?')}): "
            "rerun with its settings to resume or continue it, pass overwrite=True to start afresh there, "
            "or choose another output_dir."
        )
    if record.get("status") == "complete":
        final = max(step, int(record.get("final_step", 0)))
        if final >= num_train_steps:
            return RunPlan("complete", checkpoint=checkpoint, completed_step=final, metrics=record.get("metrics", {}))
        if checkpoint is None:
            raise RunDirectoryError(
                f"{output_dir} holds a run complete at step {final}, but no checkpoint to continue it to step "
                f"{num_train_steps} from ({output_dir}/checkpoints is empty): pass overwrite=True to start afresh."
            )
    elif backup_epoch > 0:
        return RunPlan("resume", segment_start=int(record.get("segment_start", 0)),
                       steps_per_epoch=record.get("steps_per_epoch"))
    if checkpoint is not None:
        return RunPlan("continue", segment_start=step, checkpoint=checkpoint, completed_step=step)
    return RunPlan("start")


def _shown_setting(settings, key, width=80):
    """One run setting as a refusal shows it: its JSON, cut at `width` characters; a setting left
    out (a run records some only when they depart from their default) as the default."""
    if key not in settings:
        return "the default (not recorded)"
    shown = json.dumps(settings[key], sort_keys=True)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def record_segment(output_dir: str, *, settings: dict, num_train_steps: int, segment_start: int,
                   steps_per_epoch: int):
    """Records, before training, that a segment from `segment_start` to `num_train_steps` is running."""
    _write(output_dir, {"settings": settings, "status": "running", "num_train_steps": int(num_train_steps),
                        "segment_start": int(segment_start), "steps_per_epoch": int(steps_per_epoch)})


def record_complete(output_dir: str, *, final_step: int, metrics: dict):
    """Marks the run complete at `final_step` (after its outputs are saved)."""
    record = read_run_record(output_dir) or {}
    record.update(status="complete", final_step=int(final_step), metrics=metrics)
    _write(output_dir, record)


def _start_afresh(output_dir, names, inputs):
    """`overwrite`: removes a recorded run's outputs, after checking that no input and no file of
    the user's is among them."""
    outputs = sorted(name for name in names if name in RUN_OUTPUTS or name.startswith("backup-worker-"))
    if read_run_record(output_dir) is None:
        if outputs:
            raise RunDirectoryError(
                f"{output_dir} holds {', '.join(outputs[:5])}, of the names a pretraining run writes, but no run "
                f"({RUN_FILE} is missing): they are not this tool's to remove, even with overwrite=True. Move them, "
                "or choose another output_dir.")
        return RunPlan("start")  # only files of other names: they stay, the run writes beside them
    for path in inputs:
        path = os.path.realpath(os.fspath(path))
        for name in outputs:
            output = os.path.realpath(os.path.join(output_dir, name))
            if path == output or path.startswith(output + os.sep):
                raise RunDirectoryError(
                    f"overwrite=True would remove {output}, which this run reads ({path}): copy it out of "
                    f"{output_dir} first, or choose another output_dir.")
    remove_run_outputs(output_dir)
    return RunPlan("start")


def remove_run_outputs(output_dir: str):
    """Removes what a run writes into `output_dir`: its files, and inside `checkpoints/`, `logs/`
    and the backups only the files a run writes there (a file of yours in them stays, and so
    does the directory that holds it)."""
    from bert_keras.training.backup import remove_backup

    for name in os.listdir(output_dir):
        path = os.path.join(output_dir, name)
        if (name not in RUN_OUTPUTS and not name.startswith("backup-worker-")) or name.endswith(OWNER_SUFFIX):
            continue
        if not os.path.isdir(path) or os.path.islink(path):
            os.remove(path)
        elif name == "backup" or name.startswith("backup-worker-"):
            remove_backup(path)
        else:
            _remove_written_files(path, _is_checkpoint_file if name == "checkpoints" else _is_log_file)


def _is_checkpoint_file(relative):  # tf.train.CheckpointManager's files (and their temporaries)
    base = os.path.basename(relative)
    return base == "checkpoint" or base.startswith(("ckpt-", "ckpt_temp", "checkpoint.tmp"))


def _is_log_file(relative):  # TensorBoard's event files and profiler output
    parts = relative.split(os.sep)
    return os.path.basename(relative).startswith("events.out.tfevents.") or "plugins" in parts[:-1]


def _remove_written_files(directory, written):
    """Removes the files under `directory` that `written(relative path)` claims, then the
    directories left empty (bottom up); anything else stays."""
    for root, _, names in os.walk(directory, topdown=False):
        for name in names:
            path = os.path.join(root, name)
            if written(os.path.relpath(path, directory)):
                os.remove(path)
        try:
            os.rmdir(root)
        except OSError:
            pass  # it holds a file of the user's


def _write(output_dir, record):
    write_json(os.path.join(output_dir, RUN_FILE), record, indent=1, sort_keys=True)
