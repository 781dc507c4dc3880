"""A fine-tuned task's head as a Hugging Face `BertFor...` model: tensor names and config fields.

`bert-keras convert FINETUNED_DIR hf:OUT` writes the encoder and this head, so that
`transformers.AutoModelFor...from_pretrained(OUT)` computes the fine-tuned model's outputs.
Each family names its `transformers` twin (`bert_keras.families.HfHead`): sequence
classification and regression (`BertForSequenceClassification`), word tagging
(`BertForTokenClassification`), extractive QA (`BertForQuestionAnswering`: start, end)
and multiple choice (`BertForMultipleChoice`). Keras kernels are `[in, out]`, torch
`nn.Linear` weights `[out, in]`: transposed. An embedding model has no head weights (its
pooling is a setting): it is a `BertModel`.

The other way round, `read_hf_task_head` reads such a directory's head (and `id2label`) for the
task of its family, and `assign_hf_task_head` puts it into that task's head (`X.from_pretrained("hf:DIR")`).
`read_tf1_task_head` reads the head google-research's fine-tuning scripts leave in a TF1 checkpoint
(`run_classifier.py`'s `output_weights` / `output_bias`, `run_squad.py`'s `cls/squad/output_*`: the
family's `HfHead.tf1_scope`), and
`read_task_head` picks the reader of a spec's format; `convert_with_task_head` writes a TF1 one to `hf:`.
"""

import dataclasses
import json
import os
from typing import Optional

import numpy as np

from bert_keras.checkpoints.errors import CheckpointFormatError, CheckpointMismatchError
from bert_keras.families import family


def hf_task_head(finetuned):
    """The head of a fine-tuned model as `transformers` stores it, or None when it has none.

    Example:

    >>> from bert_keras.config import BertConfig
    >>> from bert_keras.encoder import BertEncoder
    >>> from bert_keras.finetuned_model import FinetunedModel
    >>> from bert_keras.models import BertClassifier
    >>> head = BertClassifier(BertEncoder(BertConfig.named("tiny", vocab_size=6)), num_classes=2)
    >>> record = FinetunedModel(kind="classification", model=head, vocab_file="vocab.txt", seq_length=8,
    ...                         labels=["neg", "pos"])
    >>> architecture, tensors, fields, dropped = hf_task_head(record)
    >>> architecture, tensors["classifier.weight"].shape, fields["id2label"], dropped
    ('BertForSequenceClassification', (2, 128), {'0': 'neg', '1': 'pos'}, [])

    Args:
        finetuned: a `bert_keras.finetuned_model.FinetunedModel` (`read_finetuned`).

    Returns:
        `(architecture, {HF tensor name: float32 array}, {config.json field: value}, dropped)`:
        `dropped` names the head model's weights outside the encoder and this head, which the
        `transformers` class has no place for (a classifier's `window_relevance`, which only
        weighs a long text's windows). None when the family has no head weights.
    """
    twin = family(finetuned.kind).hf_head
    if twin is None:
        return None
    layer = getattr(finetuned.model, twin.layer)
    kernel = np.asarray(layer.kernel.numpy(), dtype=np.float32)
    bias = np.asarray(layer.bias.numpy(), dtype=np.float32)
    tensors = {f"{twin.module}.weight": np.ascontiguousarray(kernel.T), f"{twin.module}.bias": bias}
    fields = {}
    if finetuned.labels is not None:
        labels = list(finetuned.labels)
        fields.update(num_labels=len(labels), id2label={str(i): label for i, label in enumerate(labels)},
                      label2id={label: i for i, label in enumerate(labels)})
    if twin.problem_type is not None:
        fields.update(num_labels=int(kernel.shape[1]), problem_type=twin.problem_type)
    used = {id(v) for v in finetuned.model.encoder.weights} | {id(layer.kernel), id(layer.bias)}
    dropped = sorted(v.path for v in finetuned.model.weights if id(v) not in used)
    return twin.architecture, tensors, fields, dropped


@dataclasses.dataclass(frozen=True)
class HfTaskHead:
    """The fine-tuned head of a `transformers` `BertFor...` directory, as a task's head holds it.

    Args:
        kind: the family of fine-tuned model that computes it (`bert_keras.families`).
        architecture: its `transformers` class (`config.json`'s `architectures`).
        module: the torch module name of its tensors (`classifier`, `qa_outputs`).
        kernel: float32 `[hidden, outputs]` (the Keras layout of `{module}.weight`).
        bias: float32 `[outputs]`.
        labels: the class / tag names of `id2label`, in id order, when the family has labels; else None.
        num_classes: the outputs of a sequence classifier without labels (1: regression); else None.
        names: the checkpoint's names of the weight and the bias, when not `{module}.weight` /
            `{module}.bias` (a TF1 checkpoint's `output_weights` / `output_bias`).
    """

    kind: str
    architecture: str
    module: str
    kernel: np.ndarray
    bias: np.ndarray
    labels: Optional[list]
    num_classes: Optional[int] = None
    names: tuple = ()

    @property
    def tensor_names(self):
        """`(weight name, bias name)` as the checkpoint holds them."""
        return self.names or (f"{self.module}.weight", f"{self.module}.bias")


def read_hf_task_head(spec, task_class):
    """The head of a fine-tuned `transformers` directory that `task_class` computes, or None.

    An `hf:DIR` whose `config.json` names the `BertFor...` class of one of `task_class`'s families
    (`BertForSequenceClassification` for a `TextClassifier`, by `problem_type`: classification or
    regression) holds that head as `{module}.weight` / `{module}.bias`; `id2label` names its classes.
    `bert-keras convert FINETUNED hf:OUT` writes such a directory; this reads one back.

    Example:

    >>> head = read_hf_task_head("hf:sst2-bert", TextClassifier)  # doctest: +SKIP
    >>> head.kind, head.labels, head.kernel.shape  # doctest: +SKIP
    ('classification', ['negative', 'positive'], (768, 2))

    Args:
        spec: a weights spec (`bert_keras.checkpoints.parse_spec`); other formats than `hf:` give None.
        task_class: a `bert_keras.tasks` class.

    Raises:
        CheckpointMismatchError: the directory names the class but lacks its tensors, or their shapes
            disagree with each other, the encoder's width or `id2label`.
        CheckpointFormatError: a `problem_type` no family here computes (`multi_label_classification`).
    """
    from bert_keras.checkpoints import hf
    from bert_keras.checkpoints.loading import parse_spec
    from bert_keras.families import KINDS, resolve

    location = parse_spec(spec)
    if location.kind != "hf":
        return None
    config_path = os.path.join(location.path, hf.CONFIG_FILE)
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):  # reading the encoder says what is wrong with it
        return None
    if not isinstance(config, dict):
        return None
    architectures = config.get("architectures") or []
    candidates = [family(kind) for kind in KINDS if family(kind).hf_head is not None
                  and family(kind).hf_head.architecture in architectures
                  and issubclass(task_class, resolve(family(kind).task_class))]
    if not candidates:
        return None
    num_labels = len(config.get("id2label") or {}) or config.get("num_labels")
    problem_type = config.get("problem_type") or ("regression" if num_labels == 1 else "single_label_classification")
    if len(candidates) > 1:  # transformers' BertForSequenceClassification: classification or regression
        chosen = [entry for entry in candidates if entry.hf_head.problem_type == problem_type]
        if not chosen:
            computed = sorted(entry.hf_head.problem_type for entry in candidates)
            raise CheckpointFormatError(
                f"{config_path}: problem_type {problem_type!r}, which a {task_class.__name__} does not compute "
                f"({', '.join(computed)}); pass strict=False / --no-strict to train a new head on its encoder")
        candidates = chosen
    entry = candidates[0]
    twin = entry.hf_head
    names = (f"{twin.module}.weight", f"{twin.module}.bias")
    tensors = hf.load_hf_tensors(location.path, names)  # those two alone: load_pretrained reads the encoder
    missing = [name for name in names if name not in tensors]
    if missing:
        raise CheckpointMismatchError(f"{location.path}: config.json names {twin.architecture}, but its weights "
                                      f"lack {missing}", missing=missing)
    weight, bias = (np.asarray(tensors[name], dtype=np.float32) for name in names)
    hidden = config.get("hidden_size")
    if weight.ndim != 2 or bias.shape != weight.shape[:1] or (hidden is not None and weight.shape[1] != hidden):
        raise CheckpointMismatchError(
            f"{location.path}: {names[0]} {tuple(weight.shape)} and {names[1]} {tuple(bias.shape)} are not a "
            f"[outputs, hidden_size {hidden}] layer and its [outputs] bias")
    labels = None
    if entry.needs_labels:
        id2label = config.get("id2label") or {}
        try:
            order = sorted(id2label.items(), key=lambda item: int(item[0]))
        except (TypeError, ValueError):
            order = None
        if order is None or [int(i) for i, _ in order] != list(range(len(order))) or len(order) != len(bias):
            raise CheckpointMismatchError(
                f"{config_path}: id2label {id2label} does not name the {len(bias)} outputs of {names[0]} "
                "as ids 0..n-1; fix id2label, or pass labels=[names]")
        labels = [str(label) for _, label in order]
    num_classes = len(bias) if labels is None and twin.problem_type is not None else None
    return HfTaskHead(entry.kind, twin.architecture, twin.module, np.ascontiguousarray(weight.T), bias, labels,
                      num_classes)


def assign_hf_task_head(model, head):
    """Loads a `read_hf_task_head` head into a task's head `model` (built for its family).

    Raises:
        CheckpointMismatchError: the head built has another shape (other labels given, say).
    """
    layer = getattr(model, family(head.kind).hf_head.layer)
    weight_name, bias_name = head.tensor_names
    for variable, value, name in ((layer.kernel, head.kernel, weight_name), (layer.bias, head.bias, bias_name)):
        if tuple(variable.shape) != value.shape:
            weight = name == weight_name  # stored [outputs, hidden]: the Keras kernel transposed
            raise CheckpointMismatchError(
                f"{head.architecture} {name}: shape {value.shape[::-1] if weight else value.shape}"
                f" but the {head.kind} head built has {tuple(variable.shape)[::-1] if weight else tuple(variable.shape)}"
                " (labels= or num_classes= other than its outputs?)")
        variable.assign(value.astype(variable.dtype))


# The name of the head's variables that google-research's fine-tuning scripts write in a TF1 checkpoint.
TF1_HEAD_AUTHOR = "google-research TF1"


def read_tf1_task_head(spec, task_class):
    """The head a google-research fine-tuning script left in a TF1 checkpoint, when `task_class`
    computes it; else None.

    Each family's `HfHead.tf1_scope` names its variables: `run_classifier.py` stores
    `output_weights` `[num_labels, hidden]` and `output_bias` `[num_labels]` (logits = pooled
    `[CLS]` @ `output_weights`ᵀ + `output_bias`: a `TextClassifier`; 1 output is regression),
    `run_squad.py` `cls/squad/output_weights` `[2, hidden]` (start, end) and its bias (a `SpanQA`).
    The weights are the Keras kernel transposed. run_classifier stores no label names: the classes
    are named `LABEL_0`, `LABEL_1`, ... as transformers names a head saved without names, and
    `labels=` given to `from_pretrained` name its rows in order.

    Example:

    >>> head = read_tf1_task_head("tf1:mrpc_output/model.ckpt-343", TextClassifier)  # doctest: +SKIP
    >>> head.kind, head.labels, head.kernel.shape  # doctest: +SKIP
    ('classification', ['LABEL_0', 'LABEL_1'], (768, 2))

    Args:
        spec: a weights spec (`bert_keras.checkpoints.parse_spec`); other formats than `tf1:` give None.
        task_class: a `bert_keras.tasks` class.

    Raises:
        CheckpointMismatchError: the weight and bias do not make one layer on the encoder's width
            (`bert_config.json`'s `hidden_size`).
    """
    import tensorflow as tf

    from bert_keras.checkpoints import tf1
    from bert_keras.checkpoints.loading import parse_spec
    from bert_keras.families import KINDS, resolve

    location = parse_spec(spec)
    if location.kind != "tf1":
        return None
    try:
        prefix = tf1.resolve_tf1_prefix(location.path)
        reader = tf.train.load_checkpoint(prefix)
    except Exception:  # noqa: BLE001  reading the encoder says what is wrong with it
        return None
    shapes = reader.get_variable_to_shape_map()
    entries = [family(kind) for kind in KINDS if family(kind).hf_head is not None and family(kind).hf_head.tf1_scope]
    for scope in dict.fromkeys(entry.hf_head.tf1_scope for entry in entries):
        names = (f"{scope}_weights", f"{scope}_bias")
        if not all(name in shapes for name in names):
            continue
        candidates = [entry for entry in entries if entry.hf_head.tf1_scope == scope
                      and issubclass(task_class, resolve(entry.task_class))]
        if not candidates:
            return None  # another task's head: refused as unused by the encoder's reader
        weight, bias = (np.asarray(reader.get_tensor(name), dtype=np.float32) for name in names)
        hidden = _tf1_hidden_size(prefix)
        if weight.ndim != 2 or bias.shape != weight.shape[:1] or (hidden is not None and weight.shape[1] != hidden):
            raise CheckpointMismatchError(
                f"{prefix}: {names[0]} {tuple(weight.shape)} and {names[1]} {tuple(bias.shape)} are not a "
                f"[outputs, hidden_size {hidden}] layer and its [outputs] bias")
        if len(candidates) > 1:  # classification or regression, by the outputs (transformers' rule)
            problem_type = "regression" if len(bias) == 1 else "single_label_classification"
            candidates = [entry for entry in candidates if entry.hf_head.problem_type == problem_type] or candidates
        entry = candidates[0]
        labels = [f"LABEL_{i}" for i in range(len(bias))] if entry.needs_labels else None
        num_classes = len(bias) if labels is None and entry.hf_head.problem_type is not None else None
        return HfTaskHead(entry.kind, TF1_HEAD_AUTHOR, scope, np.ascontiguousarray(weight.T), bias, labels,
                          num_classes, names=names)
    return None


def _tf1_hidden_size(prefix):
    """`hidden_size` of the `bert_config.json` beside a TF1 checkpoint, or None (the encoder's
    reader says what is wrong with a missing or bad one)."""
    from bert_keras.checkpoints import tf1

    path = os.path.join(os.path.dirname(os.path.abspath(prefix)), tf1.CONFIG_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            hidden = json.load(f).get("hidden_size")
    except (OSError, ValueError, AttributeError):
        return None
    return hidden if isinstance(hidden, int) else None


def tf1_task_head_as_hf(spec):
    """The head a google-research fine-tuning script left in the TF1 checkpoint `spec`
    (`read_tf1_task_head`, whichever task computes it), as `transformers` stores it, or None
    (no such head): `(architecture, {HF tensor name: float32 array},
    {config.json field: value}, scope)`, the first three as `hf_task_head` gives them, `scope` the
    checkpoint's (`output`, `cls/squad/output`): what `convert tf1:RUN hf:OUT` writes with the encoder."""
    from bert_keras.families import KINDS, resolve

    for kind in KINDS:
        twin = family(kind).hf_head
        if twin is None or not twin.tf1_scope:
            continue
        head = read_tf1_task_head(spec, resolve(family(kind).task_class))
        if head is None:
            continue
        twin = family(head.kind).hf_head
        tensors = {f"{twin.module}.weight": np.ascontiguousarray(head.kernel.T), f"{twin.module}.bias": head.bias}
        fields = {}
        if head.labels is not None:
            fields.update(num_labels=len(head.labels), id2label={str(i): label for i, label in enumerate(head.labels)},
                          label2id={label: i for i, label in enumerate(head.labels)})
        if twin.problem_type is not None:
            fields.update(num_labels=int(head.kernel.shape[1]), problem_type=twin.problem_type)
        return twin.architecture, tensors, fields, head.module
    return None


def convert_with_task_head(source, dest, *, strict=True, overwrite=False):
    """`bert_keras.checkpoints.loading.convert`, which writes the head a google-research fine-tuning
    script left in a `tf1:` source (`tf1_task_head_as_hf`) with an `hf:` destination as transformers'
    `BertFor...` class (`bert-keras convert tf1:RUN hf:OUT`); other conversions are `convert`'s.

    Example:

    >>> convert_with_task_head("tf1:mrpc_output", "hf:mrpc-hf").task_head  # doctest: +SKIP
    'BertForSequenceClassification'
    """
    from bert_keras.checkpoints.loading import convert, parse_spec

    task_head = None
    if parse_spec(dest, for_writing=True).kind == "hf" and parse_spec(source).kind == "tf1":
        task_head = tf1_task_head_as_hf(source)
    return convert(source, dest, strict=strict, overwrite=overwrite, task_head=task_head)


def read_task_head(spec, task_class):
    """The fine-tuned head of a checkpoint that `task_class` computes (`read_hf_task_head` for
    `hf:`, `read_tf1_task_head` for `tf1:`), or None."""
    return read_hf_task_head(spec, task_class) or read_tf1_task_head(spec, task_class)
