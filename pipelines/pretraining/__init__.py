"""BERT pretraining data (masked LM + next sentence prediction): write, read, or stream.

Two modes feed the same `(x, y)` batches to a model (`contract`):

- Static: `write_pretraining_data(PretrainingDataSettings(...))` builds
  instances exactly as the original `create_pretraining_data.py`
  (`instances`), writes shards atomically (`shard_writer`, `wire_format`),
  in parallel (`workers`), checked against `PREFIX-config.json`
  (`run_record`); `pretraining_dataset` reads them, ours or the original's
  (`reader`). `write_pretraining_data_with_beam` writes the same shards
  with an Apache Beam pipeline on any runner (`beam_pipeline`); both seed
  every random choice from (seed, document id, dupe index) (`seeding`).
- Dynamic: `dynamic_pretraining_dataset` tokenizes, pairs and masks inside
  `tf.data`, with fresh masks every epoch (`dynamic`).

Example:

>>> from pipelines.pretraining import PretrainingDataSettings, feature_spec
>>> sorted(feature_spec(128, 20))[-1]
'segment_ids'
"""

import importlib

# The public names load lazily: `settings` imports no TensorFlow, so the command line's `--help`
# reads `PretrainingDataSettings` fast; the rest loads on first use.
_LAZY = {
    "FEATURE_DTYPES": "contract", "feature_spec": "contract", "shard_file_name": "contract",
    "dynamic_pretraining_dataset": "dynamic",
    "TokenizedCorpus": "instances", "create_instances_from_document": "instances",
    "tokenize_corpus": "instances", "truncate_seq_pair": "instances",
    "RecordsMismatchError": "reader", "check_records_layout": "reader",
    "pretraining_dataset": "reader", "records_layout": "reader",
    "OutputExistsError": "run_record",
    "PretrainingDataSettings": "settings",
    "write_pretraining_data": "writer",
    "write_pretraining_data_with_beam": "beam_pipeline",  # needs apache-beam (extra `beam`)
}

__all__ = [
    "FEATURE_DTYPES",
    "OutputExistsError",
    "PretrainingDataSettings",
    "RecordsMismatchError",
    "TokenizedCorpus",
    "check_records_layout",
    "create_instances_from_document",
    "dynamic_pretraining_dataset",
    "feature_spec",
    "pretraining_dataset",
    "records_layout",
    "shard_file_name",
    "tokenize_corpus",
    "truncate_seq_pair",
    "write_pretraining_data",
    "write_pretraining_data_with_beam",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"pipelines.pretraining.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'pipelines.pretraining' has no attribute {name!r}")
