"""google-research BERT (TensorFlow 1) checkpoints.

The canonical weight dict of `bert_keras.checkpoints` is keyed by exactly the
variable names and shapes of the original google-research `modeling.py`
(`bert/encoder/layer_0/attention/self/query/kernel`, ...), so reading and
writing a TF1 checkpoint is a rename-free copy. This module therefore also owns
the grammar of canonical names (`CANONICAL_NAME`) that the other formats use to
classify what they read.

A TF1 checkpoint is a prefix (`.../bert_model.ckpt`) naming two files,
`bert_model.ckpt.index` and `bert_model.ckpt.data-00000-of-00001`, next to a
`bert_config.json` and usually a `vocab.txt`. TensorFlow is imported lazily, so
that importing this module (e.g. for `CANONICAL_NAME`) stays cheap.
"""

import dataclasses
import glob
import json
import os
import re
import warnings

import numpy as np

from bert_keras.checkpoints.errors import (
    CheckpointFormatError,
    CheckpointMismatchError,
    reject_or_drop_unused,
)
from bert_keras.config import BertConfig
from pipelines.atomic_writes import atomic_directory

# Every name the canonical dict may hold: the google-research encoder and its
# pretraining heads (masked LM `cls/predictions`, next sentence `cls/seq_relationship`).
CANONICAL_NAME = re.compile(
    r"^(?:"
    r"bert/embeddings/(?:word_embeddings|token_type_embeddings|position_embeddings"
    r"|LayerNorm/(?:gamma|beta))"
    r"|bert/encoder/layer_\d+/(?:attention/self/(?:query|key|value)|attention/output/dense"
    r"|intermediate/dense|output/dense)/(?:kernel|bias)"
    r"|bert/encoder/layer_\d+/(?:attention/output|output)/LayerNorm/(?:gamma|beta)"
    r"|bert/pooler/dense/(?:kernel|bias)"
    r"|cls/predictions/transform/dense/(?:kernel|bias)"
    r"|cls/predictions/transform/LayerNorm/(?:gamma|beta)"
    r"|cls/predictions/output_bias"
    r"|cls/seq_relationship/output_(?:weights|bias)"
    r")$"
)

# Variables a training run leaves in a checkpoint that are not model weights:
# optimizer slots (AdamWeightDecay's adam_m/adam_v, tf.train optimizers' slots),
# step counters, loss-scale state, object-graph metadata. Skipped silently.
_BOOKKEEPING = re.compile(
    r"(?:^|/)(?:adam_m|adam_v|Adam|Adam_\d+|Momentum|RMSProp|RMSProp_\d+|Adagrad|Adadelta"
    r"|Adadelta_\d+|Ftrl|Ftrl_\d+|LAMB|LAMB_\d+|lamb_m|lamb_v|ExponentialMovingAverage)$"
    r"|^(?:global_step|beta1_power|beta2_power|_CHECKPOINTABLE_OBJECT_GRAPH|good_steps"
    r"|current_loss_scale|loss_scale(?:/.*)?|learning_rate)$"
)

# TF-Hub exports of BERT put every variable under this scope.
_HUB_PREFIX = "module/"

CONFIG_FILE = "bert_config.json"
DEFAULT_PREFIX_NAME = "bert_model.ckpt"


def resolve_tf1_prefix(path):
    """Returns the checkpoint prefix for a prefix or a directory holding one.

    Args:
        path: a prefix (`dir/bert_model.ckpt`, whose `.index` file exists), or a
            directory holding `bert_model.ckpt.index`, a `checkpoint` state
            file, or exactly one `*.index` file.

    Raises:
        CheckpointFormatError: nothing that looks like a TF1 checkpoint is there.
    """
    path = os.fspath(path)
    if path.endswith(".index") and os.path.isfile(path):
        return path[: -len(".index")]
    if os.path.isfile(path + ".index"):
        return path
    if os.path.isdir(path):
        default = os.path.join(path, DEFAULT_PREFIX_NAME)
        if os.path.isfile(default + ".index"):
            return default
        state = _latest_from_state_file(path)
        if state:
            return state
        found = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(found) == 1:
            return found[0][: -len(".index")]
        if len(found) > 1:
            names = ", ".join(os.path.basename(f)[: -len(".index")] for f in found)
            raise CheckpointFormatError(
                f"{path}: holds several TF1 checkpoints ({names}); name one: tf1:{path}/PREFIX"
            )
    raise CheckpointFormatError(
        f"{path}: no TF1 checkpoint here (expected PREFIX.index + PREFIX.data-* files, "
        f"e.g. {os.path.join(path, DEFAULT_PREFIX_NAME)}.index)"
    )


def _latest_from_state_file(directory):
    """Reads `model_checkpoint_path` from a `checkpoint` state file, without TF."""
    state = os.path.join(directory, "checkpoint")
    if not os.path.isfile(state):
        return None
    with open(state, encoding="utf-8") as f:
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', f.read(), re.M)
    if not match:
        return None
    prefix = match.group(1)
    prefix = prefix if os.path.isabs(prefix) else os.path.join(directory, prefix)
    return prefix if os.path.isfile(prefix + ".index") else None


def read_tf1(path, *, config=None, strict=True, task_module=None):
    """Reads a google-research BERT checkpoint into the canonical weight dict.

    Example:

    >>> config, weights = read_tf1("uncased_L-2_H-128_A-2/bert_model.ckpt")  # doctest: +SKIP
    >>> weights["bert/pooler/dense/kernel"].shape  # doctest: +SKIP
    (128, 128)

    Args:
        path: checkpoint prefix, its `.index` file, or the directory holding it.
        config: optional `BertConfig`; by default `bert_config.json` next to
            the checkpoint is read (its `"gelu"` means the tanh approximation).
        strict: bool. If True, variables that are neither BERT weights nor
            training bookkeeping (e.g. a fine-tuned `output_weights` classifier)
            raise `CheckpointMismatchError`; if False they are dropped with a
            warning.
        task_module: the scope of a fine-tuned head the caller reads itself (`output`:
            run_classifier's, `cls/squad/output`: run_squad's; `bert_keras.checkpoints.task_heads.
            read_tf1_task_head`): its `_weights` / `_bias` are left out, not refused.

    Returns:
        `(BertConfig, dict[str, np.ndarray])`, including `cls/` pretraining
        heads when the checkpoint has them. A TF-Hub `module/` scope is removed.
    """
    import tensorflow as tf

    prefix = resolve_tf1_prefix(path)
    if config is None:
        config_path = os.path.join(os.path.dirname(os.path.abspath(prefix)), CONFIG_FILE)
        if not os.path.isfile(config_path):
            raise CheckpointFormatError(
                f"{prefix}: no {CONFIG_FILE} next to the checkpoint (looked for {config_path}); "
                "google-research checkpoints ship one, copy it there"
            )
        config = BertConfig.from_google_json(config_path)

    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as error:  # TF raises several types for a corrupt index
        raise CheckpointFormatError(f"{prefix}: cannot open TF1 checkpoint: {error}") from error
    names = sorted(reader.get_variable_to_shape_map())

    weights, unknown = {}, []
    for name in names:
        canonical = name[len(_HUB_PREFIX):] if name.startswith(_HUB_PREFIX) else name
        if _BOOKKEEPING.search(canonical):
            continue
        if task_module is not None and canonical in (f"{task_module}_weights", f"{task_module}_bias"):
            continue
        if CANONICAL_NAME.match(canonical):
            try:
                weights[canonical] = np.asarray(reader.get_tensor(name), dtype=np.float32)
            except (IndexError, ValueError, tf.errors.OpError) as error:
                # a cut or damaged .data file: "Read less bytes than requested", a checksum mismatch
                raise CheckpointFormatError(f"{prefix}: cannot read variable {name} ({error}); the "
                                            "checkpoint's .data file is damaged or cut short") from None
        else:
            unknown.append(name)
    reject_or_drop_unused(prefix, unknown, strict=strict, what="variable(s)")
    if not weights:
        raise CheckpointMismatchError(
            f"{prefix}: no BERT variables found (first names: {names[:5]}); "
            "expected google-research names such as bert/embeddings/word_embeddings"
        )
    return config, weights


def prefix_to_write(prefix):
    """The checkpoint prefix `write_tf1` writes for `prefix`: a directory (existing, or written
    with a trailing slash) means `DIR/bert_model.ckpt`.

    >>> prefix_to_write("out/")
    'out/bert_model.ckpt'
    """
    prefix = os.fspath(prefix)
    if os.path.isdir(prefix) or prefix.endswith(("/", os.sep)):
        return os.path.join(prefix, DEFAULT_PREFIX_NAME)
    return prefix


def write_tf1(prefix, config, canonical, *, stage_files=None):
    """Writes a google-research BERT checkpoint that `modeling.py` can restore.

    Next to the checkpoint files go `bert_config.json` and a `checkpoint` state
    file. All are written into a staging directory and committed together
    (`pipelines.atomic_writes.atomic_directory`): a kill leaves either the old
    files or, once the commit has begun (finished by the next write there), the
    new ones; never new data beside an old index. Other files in the directory
    stay, except the data shards of an earlier checkpoint of the same prefix.

    Example:

    >>> write_tf1("out/bert_model.ckpt", config, weights)  # doctest: +SKIP
    >>> [n for n, _ in tf.train.list_variables("out/bert_model.ckpt")][:1]  # doctest: +SKIP
    ['bert/embeddings/LayerNorm/beta']

    Args:
        prefix: checkpoint prefix to write, e.g. `dir/bert_model.ckpt`; a path
            to an existing directory means `dir/bert_model.ckpt`.
        config: `BertConfig`. Its `"gelu_approximate"` is written as
            google's `"gelu"`. An exact `"gelu"` model has no google name: it
            is written as `"gelu"` with a warning, because google-research code
            would run it with the tanh formula (outputs differ by ~1e-3, 4e-3 on all-MiniLM-L6-v2).
        canonical: dict of canonical name -> array (see `CANONICAL_NAME`).
        stage_files: optional `callable(staging directory)` that writes more files (the
            vocabulary and its rules) to be committed with the checkpoint.

    Returns:
        The prefix written.
    """
    import tensorflow as tf

    prefix = prefix_to_write(prefix)
    bad = sorted(name for name in canonical if not CANONICAL_NAME.match(name))
    if bad:
        raise CheckpointMismatchError(f"cannot write non-BERT weight name(s) to a TF1 checkpoint: {bad}")

    if config.hidden_act == "gelu":
        warnings.warn(
            "this model uses the exact (erf) GELU; google-research BERT has no name for it and "
            "modeling.py would compute the tanh approximation for hidden_act='gelu' "
            "(outputs differ by ~1e-3, 4e-3 on all-MiniLM-L6-v2). "
            "bert_keras reads the file back as gelu_approximate.",
            stacklevel=2,
        )
        google_config = dataclasses.replace(config, hidden_act="gelu_approximate").to_google_dict()
    else:
        google_config = config.to_google_dict()

    directory = os.path.dirname(os.path.abspath(prefix))
    base = os.path.basename(prefix)
    commit = atomic_directory(directory)
    with commit as staging:
        names = sorted(canonical)
        tf.raw_ops.SaveV2(
            prefix=os.path.join(staging, base),
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(np.asarray(canonical[n], dtype=np.float32)) for n in names],
        )
        with open(os.path.join(staging, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(google_config, f, indent=2)
            f.write("\n")
        # The state file makes `tf.train.latest_checkpoint(directory)` find it.
        with open(os.path.join(staging, "checkpoint"), "w", encoding="utf-8") as f:
            f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
        if stage_files is not None:
            stage_files(staging)
        # an earlier checkpoint's data shards under this prefix that the new index does not name
        old = os.listdir(directory) if os.path.isdir(directory) else []
        commit.remove = [name for name in old if name.startswith(base + ".data-")
                         and not os.path.exists(os.path.join(staging, name))]
    return prefix
