"""Reading static pretraining TFRecords (ours or google-research/bert's) into `(x, y)` batches.

`records_layout` tells what `seq_length` / `max_predictions_per_seq` records
were written with, so a trainer can check its settings before building a model.
"""

import json
import os
from typing import Optional, Sequence, Union

import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines.pretraining.contract import config_file_name, feature_spec, shard_prefix, to_batch_contract


class RecordsMismatchError(ValueError):
    """The records were written with another `seq_length` / `max_predictions_per_seq` than asked for."""


def records_layout(file_pattern: Union[str, Sequence[str]]) -> dict:
    """`max_seq_length` and `max_predictions_per_seq` of pretraining records, and where they were read.

    From `PREFIX-config.json` next to the shards when there is one (what
    `write_pretraining_data` records), else from the widths of each file's first
    record (any google-research-format file); all files must agree.

    Example:

    >>> records_layout("out/sample-*.tfrecord")  # doctest: +SKIP
    {'max_seq_length': 128, 'max_predictions_per_seq': 20, 'source': 'out/sample-config.json'}

    Args:
        file_pattern: glob(s), comma-separated list, or list of files.

    Returns:
        A dict: `max_seq_length`, `max_predictions_per_seq`, `source` (the
        config file, or the record file measured).

    Raises:
        FileNotFoundError: the pattern matches no file.
        ValueError: a file is not pretraining records, none holds a record, or two
            differ in layout.
    """
    files = record_files(file_pattern)
    for path in files:
        _check_record_file(path)
    # Every file is measured (its writer's config, else its first record), not the first file
    # alone: a first shard with no record hid the others, and records of two lengths matched by
    # one pattern stopped training at the first batch that mixed them, with TensorFlow's parse error.
    layouts = {}  # source -> layout, each config file once
    for path in files:
        prefix = shard_prefix(path)
        if prefix is not None and config_file_name(prefix) in layouts:
            continue
        layout = _layout_of(path, prefix)
        if layout is not None:
            layouts[layout.pop("source")] = layout
    if not layouts:
        raise ValueError(f"{files[0]} holds no record." if len(files) == 1
                         else f"none of the {len(files)} files ({files[0]}, ...) holds a record.")
    (source, layout), *others = layouts.items()
    for other_source, other in others:
        if other != layout:
            raise ValueError(f"the records differ in layout: {source} has {_shown(layout)}, {other_source} "
                             f"{_shown(other)}; give the records of one create-pretraining-data run")
    return {**layout, "source": source}


def records_word_limits(file_pattern: Union[str, Sequence[str]]) -> dict:
    """`{PREFIX-config.json: max_input_chars_per_word}`: the word length limit each writer's config
    beside the records says they were tokenized with (200, the original's, when it records none: the
    writer leaves that one out). Records without a config (google-research's) are not in it.

    Example:

    >>> records_word_limits("out/sample-*.tfrecord")  # doctest: +SKIP
    {'out/sample-config.json': 200}
    """
    from pipelines.tokenizer.tokenizer_config import ORIGINAL_MAX_CHARS_PER_WORD

    limits = {}
    for source, settings in _writer_configs(file_pattern):
        limit = settings.get("max_input_chars_per_word", ORIGINAL_MAX_CHARS_PER_WORD)
        if type(limit) is not int or limit < 1:
            raise ValueError(f"{source}: field 'settings.max_input_chars_per_word' must be a "
                             f"positive integer, got {limit!r}: the file is damaged; write the records again")
        limits[source] = limit
    return limits


def records_unicode_normalizations(file_pattern: Union[str, Sequence[str]]) -> dict:
    """`{PREFIX-config.json: "NFC" or None}`: the Unicode normalization each writer's config beside the
    records says their text was composed to before tokenizing (None: read as given, the writer leaves
    that one out). Records without a config (google-research's) are not in it.

    Example:

    >>> records_unicode_normalizations("out/sample-*.tfrecord")  # doctest: +SKIP
    {'out/sample-config.json': 'NFC'}
    """
    from pipelines.tokenizer.composition import checked_unicode_normalization

    forms = {}
    for source, settings in _writer_configs(file_pattern):
        try:
            forms[source] = checked_unicode_normalization(settings.get("unicode_normalization"),
                                                          f"{source}: field 'settings.unicode_normalization'")
        except ValueError as error:
            raise ValueError(f"{error}: the file is damaged; write the records again") from None
    return forms


def _writer_configs(file_pattern):
    """`(PREFIX-config.json, its settings)` of each writer's config beside the records, once each."""
    seen = set()
    for path in record_files(file_pattern):
        prefix = shard_prefix(path)
        if prefix is None or config_file_name(prefix) in seen or not tf.io.gfile.exists(config_file_name(prefix)):
            continue
        seen.add(config_file_name(prefix))
        yield config_file_name(prefix), _writer_settings(config_file_name(prefix))


def record_files(file_pattern: Union[str, Sequence[str]]) -> list:
    """The files of a records pattern (`corpus_lib.list_files`); `FileNotFoundError` with a hint that
    names records when it matches nothing or a directory.

    `corpus_lib`'s own hint is for text (`'DIR/*.txt'`): given `--data DIR`, it sent a user to a
    pattern that matches no record. The output prefix of `create-pretraining-data`, the other
    natural thing to give, is no file either: its shards are `PREFIX-*.tfrecord`.
    """
    patterns = file_pattern.split(",") if isinstance(file_pattern, str) else [os.fspath(p) for p in file_pattern]
    for pattern in (p.strip() for p in patterns if p.strip()):
        if tf.io.gfile.isdir(pattern):
            raise FileNotFoundError(f"No pretraining data: {pattern} is a directory: give the records in it, "
                                    f"'{pattern.rstrip('/') or '/'}/*.tfrecord' (quoted)")
        if not tf.io.gfile.glob(pattern) and tf.io.gfile.glob(f"{pattern}-*.tfrecord"):
            raise FileNotFoundError(f"No pretraining data: {pattern} is an output prefix, not a file: give its "
                                    f"shards, '{pattern}-*.tfrecord' (quoted)")
    try:
        return corpus_lib.list_files(file_pattern)
    except corpus_lib.CorpusError as error:
        raise FileNotFoundError(f"No pretraining data: {error}") from None


def _shown(layout):
    return ", ".join(f"{name} {value}" for name, value in layout.items())


def _layout_of(path, prefix):
    """The layout of one record file (with `source`): its writer's config, else its first record;
    None for a file with no record."""
    if prefix is not None and tf.io.gfile.exists(config_file_name(prefix)):
        settings = _writer_settings(config_file_name(prefix))
        layout = {}
        for name in ("max_seq_length", "max_predictions_per_seq"):
            value = settings.get(name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{config_file_name(prefix)}: field 'settings.{name}' must be a positive integer, "
                                 f"got {value!r}: the file is damaged; write the records again (create-pretraining-data)")
            layout[name] = value
        return {**layout, "source": config_file_name(prefix)}
    try:
        first = [record.numpy() for record in tf.data.TFRecordDataset([path]).take(1)]
    except tf.errors.DataLossError:
        raise ValueError(f"{path} is not a TFRecord file (a text corpus goes in with --input / corpus=; "
                         "records come from `bert-keras create-pretraining-data`)") from None
    for record in first:
        example = tf.train.Example.FromString(record)
        feature = example.features.feature
        if "input_ids" not in feature or "masked_lm_positions" not in feature:
            raise ValueError(f"{path} does not hold pretraining examples (no input_ids / masked_lm_positions).")
        return {"max_seq_length": len(feature["input_ids"].int64_list.value),
                "max_predictions_per_seq": len(feature["masked_lm_positions"].int64_list.value),
                "source": path}
    return None


def _writer_settings(path):
    """The settings object of a writer's `PREFIX-config.json`; a `ValueError` naming the file when it
    is not one (a damaged file stopped the run with a `KeyError` traceback)."""
    try:
        with tf.io.gfile.GFile(path) as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a JSON records config ({error}): the file is damaged; write the records "
                         "again (create-pretraining-data)") from None
    settings = config.get("settings", config) if isinstance(config, dict) else None
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: expected a JSON object with the writer's 'settings': the file is damaged; write "
                         "the records again (create-pretraining-data)")
    return settings


def _check_record_file(path: str):
    """Raises `ValueError` naming `path` when it is not a TFRecord file a trainer can read to the end.

    A pattern such as `out/sample-*` also matches `out/sample-config.json` (and an interrupted
    writer's `*.tfrecord.tmp-PID`): read as records, it stopped training at its first batch with
    TensorFlow's "corrupted record". A shard named as the writer names them was renamed into place
    whole; any other file's first record header must fit in the file (the length that 8 bytes of
    text give is far larger than the file).
    """
    name = path.rsplit("/", 1)[-1]
    if ".tfrecord.tmp-" in name:
        raise ValueError(f"{path} is the temporary file of an unfinished create-pretraining-data run, not "
                         "records: rerun that command to finish it, and give the records as 'PREFIX-*.tfrecord'")
    if shard_prefix(path) is not None:
        return
    size = tf.io.gfile.stat(path).length
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(8)
    # A record: 8-byte length, 4-byte CRC, the data, 4-byte CRC. An empty file holds no record.
    if size and (len(header) < 8 or int.from_bytes(header, "little") + 16 > size):
        raise ValueError(f"{path} is not a TFRecord file (a text corpus goes in with --input / corpus=; records "
                         "come from `bert-keras create-pretraining-data`: give them alone, 'PREFIX-*.tfrecord')")


def check_records_layout(file_pattern, *, seq_length: int, max_predictions_per_seq: int) -> dict:
    """Raises `RecordsMismatchError`, quoting the records' settings, when they differ from the ones given.

    Example:

    >>> check_records_layout("out/sample-*.tfrecord", seq_length=128,  # doctest: +SKIP
    ...                      max_predictions_per_seq=20)["source"]
    'out/sample-config.json'

    Args:
        file_pattern: the records (see `records_layout`).
        seq_length, max_predictions_per_seq: what the reader will be asked for.

    Returns:
        `records_layout(file_pattern)`.
    """
    layout = records_layout(file_pattern)
    wanted = {"max_seq_length": seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    differ = [name for name in wanted if layout[name] != wanted[name]]
    if differ:
        found = ", ".join(f'"{name}": {layout[name]}' for name in wanted)
        asked = ", ".join(f"{name} {wanted[name]}" for name in differ)
        raise RecordsMismatchError(
            f"The records were written with {found} ({layout['source']}), but {asked} was asked for."
        )
    return layout


def pretraining_dataset(
    file_pattern: Union[str, Sequence[str]],
    *,
    batch_size: int,
    seq_length: int,
    max_predictions_per_seq: int,
    shuffle: bool = True,
    repeat: bool = True,
    seed: Optional[int] = None,
    shuffle_buffer: int = 10000,
    input_context: Optional[tf.distribute.InputContext] = None,
) -> tf.data.Dataset:
    """Reads pretraining TFRecords (ours, or google-research/bert's) into `(x, y)` batches.

    Files are sharded and interleaved at file level, records shuffled in a
    buffer, batched with `drop_remainder=True` and parsed per batch. Every
    tensor has a static shape (TPU/XLA ready); see the module docstring for
    the contract.

    Multi-worker: pass `input_context` (from
    `strategy.distribute_datasets_from_function`) to read only this worker's
    files. Without it the dataset asks `tf.distribute` for FILE auto-sharding
    (DATA when there is a single file); write at least as many shards as
    there are workers.

    Example:

    >>> ds = pretraining_dataset("/data/pretrain-*.tfrecord", batch_size=32,  # doctest: +SKIP
    ...                          seq_length=128, max_predictions_per_seq=20)
    >>> x, y = next(iter(ds))  # doctest: +SKIP

    Args:
        file_pattern: glob(s), comma-separated list, or list of files.
        batch_size: int. `B` (per replica when given an `input_context`).
        seq_length: int. `S`, the `max_seq_length` the files were written with.
        max_predictions_per_seq: int. `P`, as written.
        shuffle: shuffle files (each epoch) and records.
        repeat: repeat forever.
        seed: int or None. Shuffle seed (with a seed, file order and record
            order are deterministic).
        shuffle_buffer: records in the shuffle buffer.
        input_context: optional `tf.distribute.InputContext`.
    """
    files = record_files(file_pattern)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    spec = feature_spec(seq_length, max_predictions_per_seq)

    def parse(records):
        return to_batch_contract(tf.io.parse_example(records, spec))

    dataset = dataset.map(
        parse,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    options = tf.data.Options()
    if input_context is not None:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    elif len(files) > 1:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    else:
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
