"""How the student of a fine-tuned task is planned and built (`distill`'s student).

`plan_student` checks the settings and returns a `StudentPlan`: which of the teacher's (or
`init`'s) transformer blocks the student keeps (`student_layers`: DistilBERT's even pick, from
the first block to the last) and its hidden size. `make_student` builds the untrained student
task of the teacher's class and settings: its encoder initialised from the teacher's blocks,
embeddings, pooler and head, or from `init=` a smaller pretrained encoder with the teacher's
vocabulary (then with a new head).
"""

import dataclasses
import inspect
import os
from typing import Optional, Tuple

import numpy as np

from bert_keras.tasks.inputs import TaskInputError, check_count
from pipelines.tokenizer.vocab import load_vocabulary


@dataclasses.dataclass(frozen=True)
class StudentPlan:
    """What the student is built from (checked, before anything is built).

    Attributes:
        source_layers: the teacher's (or `init`'s) number of transformer blocks.
        layers: the source's blocks the student keeps, in order.
        hidden_size: the student's hidden size.
        init: the pretrained encoder spec the student starts from (None: the teacher).
    """

    source_layers: int
    layers: Tuple[int, ...]
    hidden_size: int
    init: Optional[str] = None


def student_layers(source_layers, layers):
    """The source blocks a student of `layers` blocks keeps: evenly spread from the first to the last.

    Block `round(i * (source - 1) / (layers - 1))` for each `i` (one layer: the first):
    DistilBERT's own choice for 12 -> 6 (its extraction script keeps 0, 2, 4, 7, 9, 11).
    Keeping the last block measured better than every other block from the first (SST-2,
    MiniLM 6 -> 3: blocks 0, 2, 5 lost 1.2 points, 0, 2, 4 lost 1.7; docs/benchmarks.md).
    A list names the blocks itself (0-based, increasing).

    >>> student_layers(12, 6), student_layers(6, 3), student_layers(6, 2)
    ((0, 2, 4, 7, 9, 11), (0, 2, 5), (0, 5))
    >>> student_layers(6, 7)
    Traceback (most recent call last):
    ...
    bert_keras.tasks.inputs.TaskInputError: layers=7: the student has at most the teacher's 6 layers (1 to 6)
    """
    if isinstance(layers, (list, tuple)):
        picked = []
        for value in layers:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TaskInputError(f"layers={list(layers)}: block indices are ints")
            picked.append(int(value))
        if not picked:
            raise TaskInputError("layers=[]: a student needs at least one layer")
        if any(i < 0 or i >= source_layers for i in picked):
            raise TaskInputError(f"layers={picked}: the teacher's blocks are 0 to {source_layers - 1}")
        if any(b <= a for a, b in zip(picked, picked[1:])):
            raise TaskInputError(f"layers={picked}: block indices must increase (each block once)")
        return tuple(picked)
    if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)):
        raise TaskInputError(f"layers={layers!r}: expected a number of layers (or a list of block indices)")
    count = int(layers)
    if count <= 0:
        raise TaskInputError(f"layers={count}: a student needs at least one layer")
    if count > source_layers:
        only = "one layer (1)" if source_layers == 1 else f"{source_layers} layers (1 to {source_layers})"
        raise TaskInputError(f"layers={count}: the student has at most the teacher's {only}")
    if count == 1:
        return (0,)
    return tuple(int(round(i * (source_layers - 1) / (count - 1))) for i in range(count))


def plan_student(teacher, *, layers=None, hidden_size=None, init=None):
    """The checked `StudentPlan` of a student of `teacher` (see `distill`); builds nothing big.

    Raises:
        TaskInputError: too many / too few layers, a hidden size that the initialisation cannot
            give, an `init` with another vocabulary.
    """
    config = teacher.encoder.config
    if hidden_size is not None:
        hidden_size = check_count("hidden_size", hidden_size)
    if init is None:
        if hidden_size is not None and hidden_size != config.hidden_size:
            raise TaskInputError(
                f"hidden_size={hidden_size}: a student initialised from the teacher's layers keeps its "
                f"hidden size {config.hidden_size}; for hidden size {hidden_size}, pass init= a smaller "
                "pretrained encoder of that size with the teacher's vocabulary")
        if layers is None:
            raise TaskInputError(f"layers: how many layers the student keeps (the teacher has "
                                 f"{config.num_layers}; half: {max(1, config.num_layers // 2)})")
        return StudentPlan(config.num_layers, student_layers(config.num_layers, layers), config.hidden_size)
    from bert_keras.checkpoints import find_vocabulary
    from bert_keras.checkpoints.loading import load_pretrained

    init = os.fspath(init)
    source = load_pretrained(init)
    source_config = source.config
    if hidden_size is not None and hidden_size != source_config.hidden_size:
        raise TaskInputError(f"hidden_size={hidden_size}: init={init} has hidden size "
                             f"{source_config.hidden_size}")
    vocab = find_vocabulary(init)
    if source_config.vocab_size != config.vocab_size or (vocab and load_vocabulary(vocab) != load_vocabulary(
            teacher._record.vocab_file)):
        raise TaskInputError(f"init={init}: its vocabulary ({source_config.vocab_size} tokens"
                             f"{', ' + vocab if vocab else ''}) is not the teacher's "
                             f"({config.vocab_size} tokens, {teacher._record.vocab_file}); the student reads "
                             "the teacher's tokens")
    if source_config.max_position_embeddings < teacher.seq_length:
        raise TaskInputError(f"init={init}: {source_config.max_position_embeddings} positions, fewer than "
                             f"the teacher's seq_length {teacher.seq_length}")
    chosen = tuple(range(source_config.num_layers)) if layers is None else student_layers(
        source_config.num_layers, layers)
    if len(chosen) > config.num_layers:
        raise TaskInputError(f"layers={len(chosen)}: the student must have at most the teacher's "
                             f"{config.num_layers} layer{'s' if config.num_layers != 1 else ''}")
    return StudentPlan(source_config.num_layers, chosen, source_config.hidden_size, init)


def make_student(teacher, plan, *, dropout=None):
    """The untrained student task of `plan`: the teacher's class, settings and tokenizer."""
    from bert_keras.encoder import BertEncoder

    teacher_encoder = teacher.encoder
    if plan.init is None:
        source = teacher_encoder
    else:
        from bert_keras.checkpoints.loading import load_pretrained

        source = load_pretrained(plan.init, output_hidden_states=teacher_encoder.output_hidden_states)
    config = dataclasses.replace(source.config, num_layers=len(plan.layers))
    encoder = BertEncoder(config, output_hidden_states=teacher_encoder.output_hidden_states,
                          skip_padding=teacher_encoder.skip_padding,
                          inference_skip_padding=teacher_encoder.inference_skip_padding,
                          dtype=teacher_encoder.dtype_policy)
    encoder.embeddings.set_weights(source.embeddings.get_weights())
    encoder.pooler.set_weights(source.pooler.get_weights())
    for block, index in zip(encoder.transformer_layers, plan.layers):
        block.set_weights(source.transformer_layers[index].get_weights())
    cls = type(teacher)
    labels = teacher.labels
    settings = teacher.settings
    # The family's settings (window_aggregation="evidence": the head's relevance layer); a head that
    # takes them as **options takes them all, or its student is built with the defaults.
    accepted = inspect.signature(cls._build_head).parameters
    takes_any = any(parameter.kind is parameter.VAR_KEYWORD for parameter in accepted.values())
    options = {k: v for k, v in settings.items() if takes_any or k in accepted}
    num_classes = getattr(teacher.head, "num_classes", None)
    _, head, _ = cls._build_head(
        encoder, labels=labels, num_classes=num_classes if labels is None else None,
        dropout=getattr(teacher.head, "dropout", 0.1) if dropout is None else dropout, **options)
    if plan.init is None:  # the teacher's head reads the same representation: start from it
        _copy_matching(head_weights(teacher.head), head_weights(head))
        relevance = getattr(head, "window_relevance", None)
        if relevance is not None:  # the teacher's window statistics describe its blocks, not the student's
            relevance.threshold.assign(0.0)
            relevance.typical.assign(0.0)
    text = teacher._record
    student = cls(head, vocab_file=text.vocab_file, seq_length=text.seq_length, lowercase=text.lowercase,
                  strip_accents=text.strip_accents, pre_tokenizer=text.pre_tokenizer,
                  max_input_chars_per_word=text.max_input_chars_per_word, added_tokens=text.added_tokens,
                  unicode_normalization=text.unicode_normalization, labels=labels, settings=settings,
                  training=dict(text.training))
    return student


def head_weights(head):
    """The head's own weights (not its encoder's), in order."""
    inside = {id(w) for w in head.encoder.weights}
    return [w for w in head.weights if id(w) not in inside]


def _copy_matching(source, target):
    for s, t in zip(source, target):
        if tuple(s.shape) == tuple(t.shape):
            t.assign(s)
