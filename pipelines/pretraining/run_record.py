"""`PREFIX-config.json`: what the shards under a prefix were made from, checked on every rerun.

It records the settings (`PretrainingDataSettings.recorded`), a fingerprint of
the corpus (each file's path, size and content samples) and whether every
output shard was written. A rerun of the same settings on the same corpus
skips the shards already complete. Anything else is refused when it would mix
or replace finished work — other settings, a changed corpus — unless
`overwrite=True`, which removes the old shards first. A run that fails before
any of its shards exists (bad UTF-8, a vocabulary without `[MASK]`) leaves no
record (`recorded_run`): the file is removed, or put back as it was before the
run. A record with shards on disk stays, for the rerun that completes them.
"""

import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import re

import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.atomic_writes import write_bytes, write_json
from pipelines.pretraining.contract import config_file_name, shard_file_name
from pipelines.pretraining.settings import PretrainingDataSettings


logger = logging.getLogger(__name__)


class OutputExistsError(ValueError):
    """The output prefix holds shards of other settings or of another corpus."""


# Bytes hashed at the start, middle and end of each input file.
SAMPLE_BYTES = 1 << 16

# How the corpus reader splits lines, recorded with the corpus: 2 = `corpus.file_lines`, a lone CR
# ends a line, but a file on another file system (`gs://`) read through GFile's line iterator, which
# drops every CR ('one\rtwo' read 'onetwo'); 3 = `file_lines` on every file system; records of
# earlier versions have none (a lone CR was part of its line).
LINE_READER = 3


def _same_lines(old_reader, new_reader, files):
    """Whether line readers `old_reader` and `new_reader` split `files` alike, whatever they hold:
    2 and 3 differ on files of other file systems alone."""
    return old_reader == new_reader or (
        {old_reader, new_reader} == {2, 3} and not any("://" in path for path in files))


def corpus_fingerprint(settings: PretrainingDataSettings) -> dict:
    """Files, total bytes and a hash of each input file's path, size and content samples; the name for `tfds:`.

    The content samples (64 KiB at the start, middle and end of each file)
    rather than modification times: copies of one corpus on several machines
    (`num_shards > 1`) get the same fingerprint, while an appended, cut or
    regenerated corpus does not. Cheap on any corpus size (three reads a file).

    Example:

    >>> corpus_fingerprint(settings)  # doctest: +SKIP
    {'files': 1, 'bytes': 52871, 'sha256': '3f0c...'}

    Raises:
        CorpusError: a pattern matches nothing or names a directory.
    """
    if settings.is_tfds:
        return {"tfds": settings.input[0], "split": settings.tfds_split}
    digest = hashlib.sha256()
    total = 0
    files = corpus_lib.list_files(settings.input)
    for path in files:
        size = tf.io.gfile.stat(path).length
        total += size
        digest.update(f"{path}\t{size}\n".encode())
        with tf.io.gfile.GFile(path, "rb") as f:
            for offset in sorted({0, max(0, size // 2 - SAMPLE_BYTES // 2), max(0, size - SAMPLE_BYTES)}):
                f.seek(offset)
                digest.update(f.read(SAMPLE_BYTES))
    return {"files": len(files), "bytes": total, "sha256": digest.hexdigest(), "line_reader": LINE_READER}


def first_lone_carriage_return(files):
    """`(path, line)` of the first lone CR (one not ending a line: `corpus.file_lines` ends a line
    there, an earlier reader kept it in the line) in `files`, or None. Reads every file through:
    only a resume against a record of an earlier reader asks."""
    for path in files:
        line, pending = 1, b""
        with tf.io.gfile.GFile(path, "rb") as f:  # read in blocks: GFile's line iterator drops the CRs
            while True:
                block = f.read(1 << 20)
                if not block:
                    break  # CRs at the end of the file end its last line
                data = pending + block
                kept = data.rstrip(b"\r")  # a CR run at the block's end: the next block says what follows it
                pending = data[len(kept):]
                lone = re.search(rb"\r+(?=[^\r\n])", kept)
                if lone:
                    return path, line + kept[:lone.start()].count(b"\n")
                line += kept.count(b"\n")
    return None


def _corpus_content(fingerprint):
    """A fingerprint without its `line_reader` (which files and bytes, alone)."""
    return {key: value for key, value in fingerprint.items() if key != "line_reader"}


def existing_shards(prefix: str):
    """Complete shard files under `prefix` (any `-of-N`), sorted."""
    return sorted(tf.io.gfile.glob(f"{prefix}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].tfrecord"))


def read_run_record(prefix: str):
    """The parsed `PREFIX-config.json`, or None. A file of an older version (flat settings) is read as one.

    Raises:
        OutputExistsError: a file of that name that this tool did not write (another JSON, not
            JSON at all): it is the user's, and no run reads or replaces it.
    """
    path = config_file_name(prefix)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    if isinstance(record, dict) and isinstance(record.get("settings"), dict) \
            and {"settings", "corpus", "complete"} == set(record) \
            and {"max_seq_length", "max_predictions_per_seq"} <= set(record["settings"]):
        return record
    if isinstance(record, dict) and {"max_seq_length", "max_predictions_per_seq"} <= set(record):
        return {"settings": record, "corpus": None, "complete": True}  # an older version's flat settings
    raise OutputExistsError(
        f"{path} exists and is not the record of a create-pretraining-data run: it is not read, nor "
        "replaced, even with overwrite=True. Move it, or use another output prefix.")


def check_outputs_are_not_inputs(settings: PretrainingDataSettings, also=()):
    """Raises `ValueError` when an input pattern matches the run's own outputs (its first shard,
    `PREFIX-config.json`, and the files in `also`: the Beam path's document shards).

    With `--input 'data/*' --output_prefix data/pt` the first run worked, and every rerun (the one
    that completes a killed run's shards, or the same command again) listed its shards and
    `PREFIX-config.json` among the inputs: refused as "another corpus", and with `--overwrite`
    they would have been read as text.
    """
    if settings.is_tfds:
        return
    prefix = settings.output_prefix
    outputs = [shard_file_name(prefix, 0, settings.num_output_shards), config_file_name(prefix), *also]
    for pattern in settings.input:
        for output in outputs:
            if _glob_matches(pattern, output):
                raise ValueError(
                    f"input {pattern!r} also matches this run's own outputs ({output}): a rerun would read "
                    f"them as corpus text. Give an --output-prefix outside it, or a pattern that matches "
                    "the corpus files only.")


def _glob_matches(pattern: str, path: str) -> bool:
    """Whether a file glob (`*`, `?`, `[...]`, none crossing a `/`) matches `path`."""
    parts, names = pattern.split("/"), path.split("/")
    return len(parts) == len(names) and all(fnmatch.fnmatchcase(n, p) for p, n in zip(parts, names))


def prepare_output(settings: PretrainingDataSettings, fingerprint: dict, *, overwrite: bool = False, log=None):
    """Checks the prefix against its record and (re)writes the record for this run.

    Args:
        settings: this run's settings.
        fingerprint: `corpus_fingerprint(settings)`.
        overwrite: remove shards of other settings / another corpus instead of refusing.
        log: optional `print`-like callable.

    Raises:
        OutputExistsError: the prefix holds shards made differently, and not `overwrite`.
    """
    log = log or (lambda *_: None)
    prefix = settings.output_prefix
    path = config_file_name(prefix)
    check_outputs_are_not_inputs(settings)
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    record = read_run_record(prefix)
    wanted = settings.recorded()
    if record is None and existing_shards(prefix):
        # Shard files no run recorded: not this tool's to skip as done, nor to replace.
        shards = existing_shards(prefix)
        raise OutputExistsError(
            f"{prefix}: {len(shards)} shard file(s) ({os.path.basename(shards[0])}, ...) exist but no run "
            f"recorded them ({path} is missing): they are not read as done, nor replaced, even with "
            "overwrite=True. Move them, or use another output prefix.")
    if record is not None:
        changed = sorted(k for k in set(record["settings"]) | set(wanted) if record["settings"].get(k) != wanted.get(k))
        old = record.get("corpus")
        corpus_changed = old is not None and _corpus_content(old) != _corpus_content(fingerprint)
        # Shards of an earlier reader, which kept a lone CR inside its line: a resume would write the rest
        # with documents split at it. Refused only when the corpus holds one (its documents are the same else).
        cr = None
        files = [] if settings.is_tfds else corpus_lib.list_files(settings.input)
        if old is not None and not corpus_changed and not _same_lines(old.get("line_reader"),
                                                                      fingerprint.get("line_reader"), files):
            cr = first_lone_carriage_return(files)
            if cr is not None and record.get("complete") and not changed:
                return record  # every shard is the earlier reader's: a rerun adds none to them
        if not changed and not corpus_changed and cr is None:
            if old is not None and old != fingerprint:  # an earlier reader's record, of a corpus without lone CRs
                record = dict(record, corpus=fingerprint)
                write_json(path, record)
            return record
        shards = existing_shards(prefix)
        if overwrite:
            # Only the recorded run's own shard names: a file of another `-of-N` is not its.
            recorded = record["settings"].get("num_output_shards")
            ours = {os.path.normpath(shard_file_name(prefix, j, int(recorded))) for j in range(int(recorded or 0))}
            kept = [shard for shard in shards if os.path.normpath(shard) not in ours]
            new_names = {os.path.normpath(shard_file_name(prefix, j, settings.num_output_shards))
                         for j in range(settings.num_output_shards)}
            in_the_way = [shard for shard in kept if os.path.normpath(shard) in new_names]
            if in_the_way:
                raise OutputExistsError(
                    f"{prefix}: {os.path.basename(in_the_way[0])} has the name of one of this run's shards "
                    f"but {path}'s run did not write it: it is not replaced, even with overwrite=True. Move it, "
                    "or use another output prefix.")
            removed = [shard for shard in shards if os.path.normpath(shard) in ours]
            for shard in removed:
                tf.io.gfile.remove(shard)
            log(f"--overwrite: removed {len(removed)} shard(s) of {path}'s earlier run"
                + (f"; kept {len(kept)} it did not write ({os.path.basename(kept[0])}, ...)" if kept else ""))
        elif shards:
            if changed:
                # Each setting with both values: "max_seq_length differ" left the user to diff the file.
                reason = "records other settings (" + "; ".join(
                    f"{k}: {record['settings'].get(k)!r} then, {wanted.get(k)!r} now" for k in changed) + ")"
            elif cr is not None:
                kept = ("dropped a lone carriage return (\\r) of a file on another file system, joining the "
                        "words on either side" if old.get("line_reader") == 2 else
                        "kept a lone carriage return (\\r) inside its line")
                reason = (f"was written by an earlier version, whose corpus reader {kept}; this one ends the line "
                          f"there, and {cr[0]}, line {cr[1]} holds one, so documents split differently and a "
                          "resume would mix the two")
            else:
                reason = (f"records another corpus: {record['corpus'].get('files')} file(s), "
                          f"{record['corpus'].get('bytes')} bytes then, {fingerprint.get('files')} file(s), "
                          f"{fingerprint.get('bytes')} bytes now, or their content differs")
            raise OutputExistsError(
                f"{path} {reason}, so the {len(shards)} shard(s) under {prefix} were made differently. "
                "Use another output prefix, or pass overwrite=True to replace them."
            )
        else:
            log(f"{path}: the earlier run wrote no shard; its settings are replaced")
    record = {"settings": wanted, "corpus": fingerprint, "complete": False}
    write_json(path, record)
    return record


@contextlib.contextmanager
def recorded_run(settings: PretrainingDataSettings, fingerprint: dict, *, overwrite: bool = False, log=None):
    """`prepare_output` around the writing of a run: yields the record; an error leaves no record of this run.

    On an exception (Ctrl-C included) before any of the record's shards exists, `PREFIX-config.json`
    is put back as it was: removed when this run created it, its earlier bytes written back when this
    run replaced it. Once a shard exists the record stays, so that the rerun skips what is done. Runs
    split over machines (`num_shards > 1`) share the record and leave it.

    Example:

    >>> with recorded_run(settings, corpus_fingerprint(settings)) as record:  # doctest: +SKIP
    ...     write_the_shards()
    >>> mark_complete_if_done(settings, record)  # doctest: +SKIP

    Raises:
        OutputExistsError: as `prepare_output`.
    """
    path = config_file_name(settings.output_prefix)
    before = _file_bytes(path)
    created = _missing_directories(os.path.dirname(path))
    try:
        record = prepare_output(settings, fingerprint, overwrite=overwrite, log=log)
        yield record
    except BaseException:
        _restore_record(settings, path, before)
        _remove_if_empty(settings, created)
        raise


def _missing_directories(directory):
    """The local directories `prepare_output` will create for `directory`, deepest first."""
    missing = []
    while directory and "://" not in directory and not os.path.exists(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    return missing


def _remove_if_empty(settings, directories):
    """Removes the directories this failed run created, where they are still empty: a run stopped
    by a bad vocabulary or corpus left an empty output directory behind."""
    if settings.num_shards > 1:
        return  # other machines may be writing into them
    for directory in directories:
        try:
            os.rmdir(directory)  # only an empty one
        except OSError:
            return


def _file_bytes(path):
    """The content of `path`, or None when there is no such file."""
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _restore_record(settings, path, before):
    """Puts the record file back as `before` (None: no file) unless a shard of the record exists."""
    if settings.num_shards > 1:
        return  # other machines may be writing shards this record stands for
    prefix, count = settings.output_prefix, settings.num_output_shards
    try:
        if any(tf.io.gfile.exists(shard_file_name(prefix, j, count)) for j in range(count)):
            return
        if before is None:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
        elif _file_bytes(path) != before:
            write_bytes(path, before)
    except (OSError, tf.errors.OpError) as error:  # the run's own error is the one to report
        logger.warning("could not put back %s after the failed run: %s", path, error)


def mark_complete_if_done(settings: PretrainingDataSettings, record: dict) -> bool:
    """Records `complete: true` once every output shard exists; returns whether it does."""
    done = all(tf.io.gfile.exists(shard_file_name(settings.output_prefix, j, settings.num_output_shards))
               for j in range(settings.num_output_shards))
    if done and not record.get("complete"):
        write_json(config_file_name(settings.output_prefix), {**record, "complete": True})
    return done


