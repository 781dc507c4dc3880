"""SQuAD v1.1 / v2.0 for BERT: read, window, and decode spans back to text.

The same three steps as google-research/bert `run_squad.py`, but every mapping
goes through the tokenizer's offsets instead of whitespace words:

1. `read_squad_json` / `squad_examples_from_tfds`: questions with their
   context and gold answers (`SquadExample`), checked against the context.
2. `build_squad_features`: `[CLS] question [SEP] context-window [SEP]` windows
   (`max_seq_length=384`, `stride=128`: `run_squad.py`'s `doc_stride`,
   `max_query_length=64`; the windows and the max-context rule of
   `pipelines.windowing`) with start/end targets, and for every context
   token its character span in the original context (`token_char_spans`)
   and whether this window is its "max context" (the original's
   `_check_is_max_context`).
3. `decode_predictions`: start/end logits of every window back to answer
   strings cut from the original context (not detokenized word pieces), with
   the n-best lists and, for v2.0, the null-score odds. `write_predictions`
   writes the files the official evaluation scripts read.

Offsets: the tokenizer reports UTF-8 BYTE offsets, SQuAD `answer_start` and
everything here are CHARACTER offsets into the Python string; the conversion
is exact for any non-ASCII text ("Zürich", "東京").

Example (from the repository root, with any uncased BERT `vocab.txt`):
    >>> import numpy as np
    >>> from pipelines import BertTokenizer
    >>> from pipelines.datasets import squad
    >>> examples = squad.read_squad_json("tests/data/squad/dev-v1.1-mini.json",
    ...                                  is_training=False)
    >>> tokenizer = BertTokenizer("vocab.txt", lowercase=True)
    >>> features = squad.build_squad_features(examples, tokenizer, is_training=False)
    >>> features.token_ids.shape
    (11, 384)
    >>> # A model's outputs; here stand-ins that peak at the gold span.
    >>> start_logits = np.eye(384)[features.start_positions] * 10
    >>> end_logits = np.eye(384)[features.end_positions] * 10
    >>> predictions, nbest, null_odds = squad.decode_predictions(
    ...     examples, features, start_logits, end_logits)
    >>> predictions["oil_begin"]
    'October 1973'
    >>> sorted(squad.write_predictions(predictions, nbest, null_odds, "/tmp/squad_out"))
    ['nbest_predictions', 'predictions']
"""

import collections
import dataclasses
import json
import logging
import math
import os
import re
import sys
from typing import List

import numpy as np
import tensorflow as tf

from pipelines import windowing
from pipelines.atomic_writes import write_json
from pipelines.datasets.text_files import decode_text_file, no_token_message
from pipelines.file_kinds import lone_surrogate
from pipelines.json_objects import RepeatedKeyError, object_of_unique_keys
from pipelines.line_ends import line_position
from pipelines.tokenizer.tokenless import has_no_token
from pipelines.tokenizer.char_offsets import byte_to_char_offsets
from pipelines.tokenizer.combining_marks import extend_over_marks

logger = logging.getLogger(__name__)

VERSIONS = ("1.1", "2.0")
MISMATCH_POLICIES = ("error", "skip")
OUT_OF_WINDOW_POLICIES = ("cls", "drop")

# null_odds of a question for which no window offers any valid span: "no
# answer" is the only option, so it must rank above every real score
# difference in the official threshold search. Finite, to stay valid JSON.
NO_SPAN_NULL_ODDS = sys.float_info.max

# Tokenize contexts and questions in batches of this many strings: bounds the
# size of the ragged tensors without paying per-string op overhead.
_TOKENIZE_BATCH = 512


class SquadFormatError(ValueError):
    """A SQuAD file or record that cannot be read as SQuAD (names the file and question)."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    Args:
        id: the question id (`qas[i]["id"]`), the key of every prediction.
        question: question text.
        context: the paragraph, exactly as in the dataset.
        answers: gold answers, `[{"text": str, "answer_start": int}]` with
            `answer_start` a character offset into `context`; empty for
            unanswerable (v2.0) questions. Training targets use the first.
        is_impossible: v2.0 "no answer" question.
        title: article title ("" when unknown).
    """

    id: str
    question: str
    context: str
    answers: List[dict]
    is_impossible: bool = False
    title: str = ""


# -- reading -------------------------------------------------------------------


def read_squad_json(path_or_obj, *, is_training, version="auto", on_mismatch="error"):
    """Reads a SQuAD JSON file (or its parsed dict) into `SquadExample`s.

    Every answer is checked: `context[answer_start:answer_start + len(text)]`
    must equal `text`.

    Example:
        >>> examples = read_squad_json("tests/data/squad/dev-v1.1-mini.json", is_training=False)
        >>> examples[0].id, examples[0].answers[0]
        ('oil_begin', {'text': 'October 1973', 'answer_start': 29})

    Args:
        path_or_obj: path of the JSON file, or the already parsed dict.
        is_training: training data: every answerable question must have an
            answer (the first is the target). Evaluation data may list
            several answers per question.
        version: `"1.1"`, `"2.0"` (unanswerable questions allowed) or
            `"auto"`: the file's `"version"` field, else 2.0 when any question
            has `"is_impossible"`. In v2.0 a question without that field is
            unanswerable when its `answers` list is empty (as converted
            datasets write them).
        on_mismatch: what to do with a question whose answer does not match
            its context: `"error"` (default) raises `SquadFormatError` naming
            the file, the question id and both strings; `"skip"` leaves the
            question out and logs how many were left out.

    Returns:
        A list of `SquadExample`, in file order.

    Raises:
        SquadFormatError: empty file, invalid JSON (an object naming a key twice too), no questions, a mismatched
            answer (with `on_mismatch="error"`), a duplicated id,
            answers that contradict `is_impossible`, or a value of the wrong
            kind (named by its JSON path): an id that is not a string or int
            (an int id becomes its string), an `answer_start` that is not an
            int or ASCII digits, an `is_impossible` that is not true/false, a
            string holding half of a surrogate pair (`file_kinds.lone_surrogate`).
    """
    if isinstance(path_or_obj, dict):
        source, dataset = "<SQuAD dict>", path_or_obj
    else:
        source = os.fspath(path_or_obj)
        text = decode_text_file(source, error=SquadFormatError)
        if not text.strip():
            raise SquadFormatError(f"{source}: the file is empty.")
        try:
            dataset = json.loads(text, object_pairs_hook=object_of_unique_keys)
        except json.JSONDecodeError as e:  # its "line N" counts LF alone: a file of CR line ends was all line 1
            line, start = line_position(text, e.pos)
            raise SquadFormatError(f"{source}:{line}:{e.pos - start + 1}: not valid JSON ({e.msg}).") from None
        except RepeatedKeyError as e:  # json alone keeps the last value: a question's answer silently replaced
            raise SquadFormatError(f"{source}: an object names {e.args[0]!r} twice (JSON readers keep one of the "
                                   "two silently); give each field its own name.") from None
        except ValueError as e:  # a number of thousands of digits: Python's int limit, raised bare
            raise SquadFormatError(f"{source}: not valid JSON: a number too long to read ({e}).") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f'{source}: no "data" list; not a SQuAD file.')
    _check_version_argument(version)

    def objects(values, what):
        if not isinstance(values, list):
            raise SquadFormatError(f"{source}: {what} is not a list of objects ({str(values)[:80]})")
        for i, value in enumerate(values):
            if not isinstance(value, dict):
                raise SquadFormatError(f"{source}: {what} is not a list of objects: "
                                       f"{what}[{i}] is {repr(value)[:80]}; expected an object")
        return values

    # Every level is type-checked here, before anything else looks inside it.
    records, locations, has_impossible = [], [], False
    for a, article in enumerate(objects(dataset["data"], "data")):
        title = article.get("title", "")
        for p, paragraph in enumerate(objects(article.get("paragraphs", []), f'data[{a}]["paragraphs"]')):
            qas = f'data[{a}]["paragraphs"][{p}]["qas"]'
            for q, qa in enumerate(objects(paragraph.get("qas", []), qas)):
                has_impossible = has_impossible or "is_impossible" in qa
                try:
                    records.append(dict(
                        id=qa["id"], question=qa["question"], context=paragraph["context"],
                        title=title, answers=qa.get("answers", []),
                        is_impossible=qa.get("is_impossible"),
                    ))
                except KeyError as e:
                    raise SquadFormatError(
                        f"{source}: {qas}[{q}], a question of article {title!r}, has no {e} field.") from None
                locations.append(f"{qas}[{q}]")
    version = _resolve_version(version, dataset, has_impossible)
    return _examples_from_records(records, source, version, is_training, on_mismatch, locations,
                                  refuse_tokenless=True)


def unanswerable_question(examples):
    """The first of `examples` (`SquadExample`s) with no gold answer (a v2.0 "no answer" question),
    or None: SQuAD v1.1's metric scores answered questions only.

    Example:
        >>> unanswerable_question(read_squad_json("tests/data/squad/dev-v2.0-mini.json", is_training=False)).id
        'oil_1979'
    """
    return next((example for example in examples if example.is_impossible or not example.answers), None)


def declared_version(path):
    """The `"version"` field a SQuAD-format JSON file declares, as written (`"v2.0"`,
    `"KorQuAD_v1.0"`, ...), or None when it has none (or is not a JSON object).

    Example:
        >>> declared_version("tests/data/squad/dev-v1.1-mini.json")
        '1.1'
    """
    try:
        dataset = json.loads(decode_text_file(os.fspath(path), error=SquadFormatError))
    except (json.JSONDecodeError, SquadFormatError):
        return None
    version = dataset.get("version") if isinstance(dataset, dict) else None
    return str(version) if version is not None else None


def squad_examples_from_tfds(name="squad/v1.1", split="validation", *, is_training,
                             data_dir=None, on_mismatch="error"):
    """Loads SQuAD from TensorFlow Datasets into `SquadExample`s.

    Same examples and checks as `read_squad_json` on the original files.

    Example:
        >>> dev = squad_examples_from_tfds("squad/v2.0", "validation", is_training=False)  # TFDS download  # doctest: +SKIP

    Args:
        name: `"squad/v1.1"` or `"squad/v2.0"` (the version follows the name).
        split: `"train"` or `"validation"` (any TFDS split string).
        is_training: as in `read_squad_json`.
        data_dir: TFDS data directory (default: TFDS's own).
        on_mismatch: `"error"` or `"skip"`, as in `read_squad_json`.

    Returns:
        A list of `SquadExample`, in TFDS order.
    """
    import tensorflow_datasets as tfds  # only this function needs it

    version = "2.0" if "v2" in name else "1.1"
    dataset = tfds.load(name, split=split, data_dir=data_dir, shuffle_files=False)

    def text(value):
        return value.decode("utf-8")

    records = []
    for ex in tfds.as_numpy(dataset):
        answers = ex["answers"]
        records.append(dict(
            id=text(ex["id"]), question=text(ex["question"]), context=text(ex["context"]),
            title=text(ex.get("title", b"")),
            answers=[{"text": text(t), "answer_start": int(s)}
                     for t, s in zip(answers["text"], answers["answer_start"])],
            is_impossible=bool(ex.get("is_impossible", False)),
        ))
    return _examples_from_records(records, f"tfds:{name}[{split}]", version, is_training,
                                  on_mismatch, refuse_tokenless=True)


def _check_version_argument(version):
    if version != "auto" and version not in VERSIONS:
        raise ValueError(f"version must be 'auto', '1.1' or '2.0', not {version!r}.")


def _resolve_version(version, dataset, has_impossible):
    """`version`, or for "auto" the file's "version" field, else 2.0 when any question has
    `is_impossible` (`has_impossible`, found while the questions were type-checked)."""
    _check_version_argument(version)
    if version in VERSIONS:
        return version
    declared = str(dataset.get("version", "")).lstrip("v")
    if declared in VERSIONS:
        return declared
    return "2.0" if has_impossible else "1.1"


def examples_from_records(records, *, is_training, version, source="<records>", on_mismatch="error"):
    """`SquadExample`s from dicts (`id`, `question`, `context`, `title`, `answers`, `is_impossible`),
    with every check `read_squad_json` makes (answers match the context, ids unique, v2.0 only
    for unanswerable questions); errors name `source` and the question id.

    Example:
        >>> examples_from_records([dict(id="q", question="Who?", context="Ann ran.", title="",
        ...     answers=[{"text": "Ann", "answer_start": 0}], is_impossible=False)],
        ...     is_training=True, version="1.1")[0].answers
        [{'text': 'Ann', 'answer_start': 0}]
    """
    return _examples_from_records(records, source, version, is_training, on_mismatch)


def _examples_from_records(records, source, version, is_training, on_mismatch, locations=None,
                           refuse_tokenless=False):
    """`locations`: per record, where it is in the file (a JSON path); errors about a field name it.
    `refuse_tokenless`: a question or context with no token is refused (data files; a task's
    `predict` checks its texts itself, answering such a row as an empty input)."""
    if on_mismatch not in MISMATCH_POLICIES:
        raise ValueError(f"on_mismatch must be one of {MISMATCH_POLICIES}, not {on_mismatch!r}.")
    if not records:
        raise SquadFormatError(f"{source}: contains no questions.")
    examples, seen, skipped = [], set(), 0
    for index, r in enumerate(records):
        if r.get("is_impossible") is None:  # no field: in v2.0 a question without answers has none
            r = {**r, "is_impossible": version == "2.0" and r.get("answers") == []}
        _check_record_fields(r, source, locations[index] if locations else None, refuse_tokenless)
        qid = r["id"] if isinstance(r["id"], str) else str(r["id"])  # an int id is keyed as its string
        if qid in seen:
            raise SquadFormatError(f"{source}: question id {qid!r} appears twice.")
        seen.add(qid)
        if r["is_impossible"] and version != "2.0":
            raise SquadFormatError(
                f"{source}: question {qid!r} is marked is_impossible in a v{version} "
                "dataset; read it with version='2.0'.")
        if r["is_impossible"] and r["answers"]:
            raise SquadFormatError(
                f"{source}: question {qid!r} is_impossible but lists answers "
                f"{[a['text'] for a in r['answers']]}.")
        if not r["is_impossible"] and is_training and not r["answers"]:
            hint = (" (an unanswerable question is SQuAD v2.0: read the file with version='2.0', or "
                    "give the question \"is_impossible\": true)" if version != "2.0" else "")
            raise SquadFormatError(
                f"{source}: training question {qid!r} has no answer and is not is_impossible{hint}.")
        problem = _answer_mismatch(r["context"], r["answers"])
        if problem is not None:
            if on_mismatch == "error":
                raise SquadFormatError(f"{source}: question {qid!r}: {problem}")
            skipped += 1
            continue
        answers = [{"text": a["text"], "answer_start": int(a["answer_start"])}
                   for a in r["answers"]]
        examples.append(SquadExample(
            id=qid, question=r["question"], context=r["context"], answers=answers,
            is_impossible=bool(r["is_impossible"]), title=r["title"]))
    if skipped:
        logger.warning("%s: skipped %d of %d questions whose answer text does not match "
                       "the context at answer_start.", source, skipped, len(records))
    if not examples:
        raise SquadFormatError(f"{source}: every question was skipped; no examples left.")
    return examples


def _check_record_fields(record, source, location=None, refuse_tokenless=False):
    """A `SquadFormatError` naming the question (its JSON path when `location` is known) and the
    field whose value is of the wrong kind."""
    qid = record.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise SquadFormatError(f"{source}: {location or 'a question'}: 'id' is {qid!r}; "
                               "expected a string (or a whole number)")
    where = f"{source}: {location} (id {qid!r})" if location else f"{source}: question {qid!r}"
    impossible = record.get("is_impossible")
    if not isinstance(impossible, (bool, np.bool_)):
        raise SquadFormatError(f"{where}: 'is_impossible' is {impossible!r}; expected true or false "
                               "(a JSON boolean)")
    for field in ("context", "question"):
        if not isinstance(record.get(field), str):
            raise SquadFormatError(f"{where}: {field!r} is {record.get(field)!r}; expected a string")
    if not isinstance(record.get("answers"), list):
        raise SquadFormatError(f"{where}: 'answers' is {record.get('answers')!r}; expected a list")
    for i, answer in enumerate(record["answers"]):
        if not isinstance(answer, dict):
            raise SquadFormatError(f"{where}: answers[{i}] is {answer!r}; expected "
                                   '{"text": ..., "answer_start": ...}')
        if not isinstance(answer.get("text"), str):
            raise SquadFormatError(f"{where}: answers[{i}] has no string 'text' (got {answer.get('text')!r})")
        start = answer.get("answer_start")
        # An int, or a string of ASCII digits ("²".isdigit() is true, but int("²") fails); at most 18
        # of them: int() of thousands stopped on Python's digit limit, naming nothing.
        if isinstance(start, bool) or not (isinstance(start, (int, np.integer)) or isinstance(start, str)
                                           and re.fullmatch(r"-?[0-9]{1,18}", start)):
            shown = repr(start) if len(repr(start)) <= 40 else f"{repr(start)[:40]}... ({len(str(start))} characters)"
            raise SquadFormatError(f"{where}: answers[{i}] has no integer 'answer_start' (got {shown})")
    # Half of a surrogate pair ("\ud83d" alone) is no text: TensorFlow refused it later, naming nothing.
    strings = [("id", qid), ("question", record["question"]), ("context", record["context"])]
    strings += [(f"answers[{i}]['text']", answer["text"]) for i, answer in enumerate(record["answers"])]
    problem = next(filter(None, (lone_surrogate(where, field, value) for field, value in strings
                                 if isinstance(value, str))), None)
    if problem:
        raise SquadFormatError(problem)
    # A "\u0000" escape (the raw byte is refused when the file is decoded): the tokenizer drops it.
    field, value = next(((field, value) for field, value in strings if isinstance(value, str) and "\0" in value),
                        (None, None))
    if field is not None:
        raise SquadFormatError(f"{where}: field {field!r}: a NUL character (\\u0000) at character "
                               f"{value.index(chr(0)) + 1} (the tokenizer drops it, joining the words around it); "
                               "remove it")
    for field in ("question", "context") if refuse_tokenless else ():  # as the task's fit refuses one
        if has_no_token(record[field]):
            raise SquadFormatError(no_token_message(where, field, "question"))


def _answer_mismatch(context, answers):
    """The first answer that is not found at its answer_start, described; None if all match."""
    for a in answers:
        start, text = int(a["answer_start"]), a["text"]
        actual = context[start:start + len(text)] if start >= 0 else ""
        if actual != text:
            return (f"answer text {text!r} does not match "
                    f"context[{start}:{start + len(text)}] = {actual!r}.")
    return None


# -- features ------------------------------------------------------------------


@dataclasses.dataclass
class SquadFeatures:
    """Windows of SQuAD examples as model inputs, targets, and the maps to decode them.

    N windows of S = `max_seq_length` tokens, laid out as
    `[CLS] question [SEP] context-window [SEP] [PAD] ...` (segment ids 0 for
    `[CLS] question [SEP]`, 1 for the context and its `[SEP]`).

    Attributes:
        token_ids, segment_ids, padding_mask: int32 [N, S] model inputs.
        start_positions, end_positions: int32 [N] targets: positions of the
            first answer's first/last token in the window; 0 ([CLS]) when the
            question is unanswerable or the answer is not (entirely) in this
            window.
        example_index: int32 [N], the window's example in the examples list.
        example_ids: the window's question id, per window.
        window_start: int32 [N], context-token index of the window's first
            context token (0, stride, 2 * stride, ... when windows are
            longer than the stride).
        context_offset: int32 [N], position of the first context token in the
            window (`len(question tokens) + 2`).
        token_char_spans: int32 [N, S, 2], `[begin, end)` character span in
            the ORIGINAL context of each context token; -1 elsewhere
            ([CLS], question, [SEP], padding).
        token_is_max_context: bool [N, S], context tokens whose window
            gives them the most surrounding context (only these may start a
            predicted span).
        num_out_of_window: training windows targeted at [CLS] because the
            answer lies outside them (policy "cls").
        num_dropped_windows: training windows left out because the answer lies
            outside them (policy "drop").
        num_skipped_examples: training examples with no usable target (answer
            covers no token, or all their windows were dropped).
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    example_ids: List[str]
    window_start: np.ndarray
    context_offset: np.ndarray
    token_char_spans: np.ndarray
    token_is_max_context: np.ndarray
    num_out_of_window: int = 0
    num_dropped_windows: int = 0
    num_skipped_examples: int = 0

    def __len__(self):
        return len(self.token_ids)

    @property
    def inputs(self):
        """The model inputs: `{"token_ids", "segment_ids", "padding_mask"}`, int32 [N, S]."""
        return {"token_ids": self.token_ids, "segment_ids": self.segment_ids,
                "padding_mask": self.padding_mask}

    @property
    def labels(self):
        """The targets: `{"start_positions", "end_positions"}`, int32 [N]."""
        return {"start_positions": self.start_positions, "end_positions": self.end_positions}

    def as_dataset(self, with_labels=True):
        """An unbatched `tf.data.Dataset` of `(inputs, labels)`, or of `inputs` alone.

        Example:
            >>> from pipelines import BertTokenizer
            >>> examples = read_squad_json("tests/data/squad/dev-v1.1-mini.json", is_training=True)
            >>> features = build_squad_features(examples, BertTokenizer("vocab.txt"), is_training=True)
            >>> ds = features.as_dataset().shuffle(10_000).batch(32, drop_remainder=True)
        """
        if with_labels:
            return tf.data.Dataset.from_tensor_slices((self.inputs, self.labels))
        return tf.data.Dataset.from_tensor_slices(self.inputs)


def build_squad_features(examples, tokenizer, *, is_training, max_seq_length=384,
                         stride=128, max_query_length=64, out_of_window="cls"):
    """Tokenizes examples into overlapping `[CLS] question [SEP] context [SEP]` windows.

    Windows follow `run_squad.py`: the question keeps its first
    `max_query_length` tokens; the context is cut into windows of
    `max_seq_length - len(question) - 3` tokens, each starting `stride`
    tokens after the previous one, the last one ending at the context's end.
    Answers are mapped to tokens through the tokenizer's offsets: the target
    covers every token that overlaps the answer's characters.

    Example:
        >>> from pipelines import BertTokenizer
        >>> tokenizer = BertTokenizer("vocab.txt")
        >>> examples = read_squad_json("tests/data/squad/dev-v2.0-mini.json", is_training=True)
        >>> features = build_squad_features(examples, tokenizer, is_training=True)
        >>> len(features), features.start_positions[:4].tolist()
        (16, [16, 19, 49, 0])
        >>> batches = features.as_dataset().shuffle(1000).batch(4)  # (x, y) for model.fit

    Args:
        examples: `SquadExample`s.
        tokenizer: a `pipelines.BertTokenizer` (anything with
            `tokenize_with_offsets` giving byte offsets and `special_tokens`).
        is_training: training features. Only then does `out_of_window`
            apply and are examples without a usable target skipped; evaluation
            keeps every window (its targets, from the first gold answer, are
            for diagnostics).
        max_seq_length: window length in tokens, special tokens included.
        stride: tokens between the starts of consecutive windows (the
            `stride` of `pipelines.windowing`, the project's one windowing;
            `run_squad.py`'s `doc_stride`; above the window's size it acts as
            that size).
        max_query_length: question tokens kept (the rest are cut).
        out_of_window: training windows of an answerable question that do not
            contain the whole answer: `"cls"` (as the original) targets
            [CLS], position 0, teaching "not in this window"; `"drop"` leaves
            them out. Either way the number is counted on the result.

    Returns:
        A `SquadFeatures`.
    """
    if out_of_window not in OUT_OF_WINDOW_POLICIES:
        raise ValueError(
            f"out_of_window must be one of {OUT_OF_WINDOW_POLICIES}, not {out_of_window!r}.")
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must exceed max_query_length + 3 "
                         f"({max_query_length + 3}) to leave room for context.")
    if stride < 1:
        raise ValueError("stride must be at least 1.")
    specials = tokenizer.special_tokens
    cls_id, sep_id, pad_id = specials.cls, specials.sep, specials.pad

    # Many questions share one paragraph: tokenize each distinct context once.
    contexts = list(dict.fromkeys(ex.context for ex in examples))
    context_tokens = dict(zip(contexts, _tokenize_with_char_offsets(tokenizer, contexts)))
    question_ids = [ids[:max_query_length] for ids, _, _ in
                    _tokenize_with_char_offsets(tokenizer, [ex.question for ex in examples])]

    rows = collections.defaultdict(list)
    num_out_of_window = num_dropped = num_skipped = 0
    for index, (ex, query) in enumerate(zip(examples, question_ids)):
        doc_ids, doc_begin, doc_end = context_tokens[ex.context]
        room = max_seq_length - len(query) - 3  # context tokens per window
        starts, lengths = windowing.window_spans(len(doc_ids), room, stride)
        spans = list(zip(starts.tolist(), lengths.tolist()))
        best_span = windowing.max_context_windows(len(doc_ids), room, stride)
        answer = None  # (first, last) context token of the first gold answer
        if ex.answers and not ex.is_impossible:
            a = ex.answers[0]
            answer = _answer_token_span(doc_begin, doc_end, a["answer_start"],
                                        a["answer_start"] + len(a["text"]))
            if answer is None and is_training:
                logger.warning("Question %r: answer %r covers no token; skipped.",
                               ex.id, a["text"])
                num_skipped += 1
                continue
        offset = len(query) + 2
        kept = 0
        for span_index, (start, length) in enumerate(spans):
            target = (0, 0)
            if answer is not None:
                if start <= answer[0] and answer[1] < start + length:
                    target = (answer[0] - start + offset, answer[1] - start + offset)
                elif is_training and out_of_window == "drop":
                    num_dropped += 1
                    continue
                elif is_training:
                    num_out_of_window += 1
            kept += 1
            ids = [cls_id, *query, sep_id, *doc_ids[start:start + length], sep_id]
            char_spans = np.full((max_seq_length, 2), -1, np.int32)
            char_spans[offset:offset + length, 0] = doc_begin[start:start + length]
            char_spans[offset:offset + length, 1] = doc_end[start:start + length]
            is_max = np.zeros(max_seq_length, bool)
            is_max[offset:offset + length] = best_span[start:start + length] == span_index
            rows["token_ids"].append(ids + [pad_id] * (max_seq_length - len(ids)))
            rows["segment_ids"].append([0] * offset + [1] * (length + 1)
                                       + [0] * (max_seq_length - len(ids)))
            rows["padding_mask"].append([1] * len(ids) + [0] * (max_seq_length - len(ids)))
            rows["start_positions"].append(target[0])
            rows["end_positions"].append(target[1])
            rows["example_index"].append(index)
            rows["window_start"].append(start)
            rows["context_offset"].append(offset)
            rows["token_char_spans"].append(char_spans)
            rows["token_is_max_context"].append(is_max)
        if kept == 0:
            # Only with "drop": an answer longer than a window fits in none.
            num_skipped += 1

    if num_out_of_window or num_dropped or num_skipped:
        logger.info("SQuAD features: %d windows targeted at [CLS] (answer outside), "
                    "%d windows dropped, %d examples skipped.",
                    num_out_of_window, num_dropped, num_skipped)

    def array(key, dtype, shape):
        return np.asarray(rows[key], dtype).reshape(shape)

    n = len(rows["token_ids"])
    example_index = array("example_index", np.int32, [n])
    return SquadFeatures(
        token_ids=array("token_ids", np.int32, [n, max_seq_length]),
        segment_ids=array("segment_ids", np.int32, [n, max_seq_length]),
        padding_mask=array("padding_mask", np.int32, [n, max_seq_length]),
        start_positions=array("start_positions", np.int32, [n]),
        end_positions=array("end_positions", np.int32, [n]),
        example_index=example_index,
        example_ids=[examples[i].id for i in example_index],
        window_start=array("window_start", np.int32, [n]),
        context_offset=array("context_offset", np.int32, [n]),
        token_char_spans=array("token_char_spans", np.int32, [n, max_seq_length, 2]),
        token_is_max_context=array("token_is_max_context", bool, [n, max_seq_length]),
        num_out_of_window=num_out_of_window,
        num_dropped_windows=num_dropped,
        num_skipped_examples=num_skipped,
    )


def _tokenize_with_char_offsets(tokenizer, texts):
    """Per text: (ids, char_begin, char_end) numpy arrays, offsets in characters."""
    out = []
    for i in range(0, len(texts), _TOKENIZE_BATCH):
        batch = texts[i:i + _TOKENIZE_BATCH]
        ids, begin, end = tokenizer.tokenize_with_offsets(tf.constant(batch, tf.string))
        splits = ids.row_splits.numpy()
        ids, begin, end = (t.flat_values.numpy() for t in (ids, begin, end))
        for j, text in enumerate(batch):
            row = slice(splits[j], splits[j + 1])
            byte_to_char = byte_to_char_offsets(text)
            char_begin, char_end = byte_to_char[begin[row]], byte_to_char[end[row]]
            if (char_begin < 0).any() or (char_end < 0).any():
                raise ValueError(f"Tokenizer offsets fall inside a UTF-8 character of {text!r}.")
            # An accent-stripping tokenizer ends a piece before the combining marks after it.
            char_end = np.asarray(extend_over_marks(text, char_end.tolist()), char_end.dtype)
            out.append((ids[row].astype(np.int32), char_begin, char_end))
    return out


def _answer_token_span(token_begin, token_end, char_start, char_end):
    """(first, last) token overlapping characters [char_start, char_end), or None.

    Whitespace at the answer's edges overlaps no token and so falls away.
    """
    first = int(np.searchsorted(token_end, char_start, side="right"))
    last = int(np.searchsorted(token_begin, char_end, side="left")) - 1
    if first >= len(token_end) or last < first:
        return None
    return first, last


# -- decoding ------------------------------------------------------------------


def decode_predictions(examples, features, start_logits, end_logits, *, n_best_size=20,
                       max_answer_length=30, version_2=False, null_score_diff_threshold=0.0):
    """Turns start/end logits of all windows into one answer string per question.

    As `run_squad.py`'s `write_predictions`: per window, every pair of the
    `n_best_size` highest start and end logits is a candidate if both are
    context tokens, end >= start, the span has at most `max_answer_length`
    tokens and the start token has its max context in this window. Candidates
    of all windows are ranked by start_logit + end_logit; the text of a
    candidate is cut from the original context through `token_char_spans`.

    v2.0 adds the null answer, scored start_logit[CLS] + end_logit[CLS] (the
    lowest over the question's windows); the question is predicted
    unanswerable ("") when `score_null - best_non_null > threshold`. When no
    window has any valid span (google-research/bert#476) the prediction is ""
    and the n-best list holds only the empty answer, in v1.1 too.

    Example (stand-in logits that peak at the gold span):
        >>> import numpy as np
        >>> from pipelines import BertTokenizer
        >>> examples = read_squad_json("tests/data/squad/dev-v2.0-mini.json", is_training=False)
        >>> features = build_squad_features(examples, BertTokenizer("vocab.txt"), is_training=False)
        >>> start_logits = np.eye(384)[features.start_positions] * 10
        >>> end_logits = np.eye(384)[features.end_positions] * 10
        >>> predictions, nbest, null_odds = decode_predictions(
        ...     examples, features, start_logits, end_logits, version_2=True)
        >>> predictions["oil_begin"], predictions["oil_1979"], null_odds["oil_begin"]
        ('October 1973', '', -20.0)
        >>> best = nbest["oil_begin"][0]
        >>> best["text"], best["start_char"], best["end_char"], round(best["probability"], 4)
        ('October 1973', 29, 41, 0.9995)

    Args:
        examples: the `SquadExample`s the features were built from.
        features: their `SquadFeatures`.
        start_logits, end_logits: float arrays [len(features), S].
        n_best_size: start and end candidates per window, and n-best length.
        max_answer_length: longest answer in tokens.
        version_2: allow "no answer" (SQuAD v2.0).
        null_score_diff_threshold: v2.0 threshold on score_null - best_non_null
            (tune it on dev with the official script's best threshold).

    Returns:
        `(predictions, nbest, null_odds)`:
        - predictions: `{id: answer text}`.
        - nbest: `{id: [{"text", "probability", "start_logit", "end_logit",
          "start_char", "end_char"}]}`, best first; probabilities are a softmax
          over the list; `start_char`/`end_char` index the context (-1 for
          the empty answer).
        - null_odds: `{id: score_null - best_non_null}` for v2.0 (
          `NO_SPAN_NULL_ODDS` when there is no non-null candidate); `{}` for v1.1.
    """
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    expected = features.token_ids.shape
    if start_logits.shape != expected or end_logits.shape != expected:
        raise ValueError(f"Logits must be shaped like the features {expected}; got "
                         f"{start_logits.shape} and {end_logits.shape}.")
    windows_of = collections.defaultdict(list)
    for window, index in enumerate(features.example_index):
        if index >= len(examples) or examples[index].id != features.example_ids[window]:
            raise ValueError("These features were not built from these examples "
                             f"(window {window} belongs to {features.example_ids[window]!r}).")
        windows_of[int(index)].append(window)

    predictions, nbest_all, null_odds = {}, {}, {}
    for index, ex in enumerate(examples):
        windows = windows_of.get(index, [])
        candidates = []  # (score, start_logit, end_logit, start_char, end_char)
        for w in windows:
            candidates += _window_candidates(
                start_logits[w], end_logits[w], features.token_char_spans[w],
                features.token_is_max_context[w], n_best_size, max_answer_length)
        # The null answer: [CLS]..[CLS] of the window where it scores lowest.
        null = (0.0, 0.0)
        if windows:
            w = min(windows, key=lambda w: start_logits[w, 0] + end_logits[w, 0])
            null = (float(start_logits[w, 0]), float(end_logits[w, 0]))
        if version_2:
            candidates.append((null[0] + null[1], *null, -1, -1))
        candidates.sort(key=lambda c: c[0], reverse=True)  # stable: ties keep order

        nbest, seen = [], set()
        for _, s_logit, e_logit, s_char, e_char in candidates:
            if len(nbest) >= n_best_size:
                break
            text = ex.context[s_char:e_char] if s_char >= 0 else ""
            if text in seen:  # two token spans can cut the same text
                continue
            seen.add(text)
            nbest.append(_entry(text, s_logit, e_logit, s_char, e_char))
        # v2.0 always lists the null answer (as the original); with no valid
        # span at all it is the only answer left, in v1.1 too (bert#476).
        if (version_2 and "" not in seen) or not nbest:
            nbest.append(_entry("", *null, -1, -1))
        for entry, p in zip(nbest, _softmax([e["start_logit"] + e["end_logit"] for e in nbest])):
            entry["probability"] = p
        best_non_null = next((e for e in nbest if e["text"]), None)

        if version_2:
            score_null = null[0] + null[1]
            if best_non_null is None:
                diff = NO_SPAN_NULL_ODDS
            else:
                diff = score_null - best_non_null["start_logit"] - best_non_null["end_logit"]
            null_odds[ex.id] = diff
            answer = "" if diff > null_score_diff_threshold else best_non_null["text"]
        else:
            answer = best_non_null["text"] if best_non_null else ""
        predictions[ex.id] = answer
        nbest_all[ex.id] = nbest
    return predictions, nbest_all, null_odds


def _window_candidates(start_logits, end_logits, char_spans, is_max_context, n_best_size,
                       max_answer_length):
    """Valid (score, start_logit, end_logit, start_char, end_char) spans of one window."""
    # Stable sort: equal logits keep position order, as the original's sorted().
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    s, e = np.meshgrid(starts, ends, indexing="ij")
    s, e = s.ravel(), e.ravel()
    is_context = char_spans[:, 0] >= 0
    valid = (is_context[s] & is_context[e] & is_max_context[s]
             & (e >= s) & (e - s + 1 <= max_answer_length))
    return [
        (start_logits[i] + end_logits[j], float(start_logits[i]), float(end_logits[j]),
         int(char_spans[i, 0]), int(char_spans[j, 1]))
        for i, j in zip(s[valid], e[valid])
    ]


def _entry(text, start_logit, end_logit, start_char, end_char):
    return {"text": text, "probability": 0.0, "start_logit": start_logit,
            "end_logit": end_logit, "start_char": start_char, "end_char": end_char}


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exp = [math.exp(s - top) for s in scores]
    total = sum(exp)
    return [x / total for x in exp]

# the files `write_predictions` writes (null_odds.json for SQuAD v2.0 only)
PREDICTION_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")


def write_predictions(predictions, nbest, null_odds, directory):
    """Writes `predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json`.

    The official formats: `{id: text}`, `{id: [n-best entries]}` and
    `{id: score_null - best_non_null}` (the `na_prob_file` of
    `evaluate-v2.0.py`). Each file is written to a temporary file and renamed,
    so a reader never sees a half-written file.

    Example:
        >>> import tempfile
        >>> predictions = {"oil_begin": "October 1973", "oil_1979": ""}
        >>> nbest = {key: [{"text": text, "probability": 1.0}] for key, text in predictions.items()}
        >>> null_odds = {"oil_begin": -20.0, "oil_1979": 3.5}
        >>> paths = write_predictions(predictions, nbest, null_odds, tempfile.mkdtemp())
        >>> sorted(paths)  # v2.0 (null_odds not empty)
        ['nbest_predictions', 'null_odds', 'predictions']

    Args:
        predictions, nbest, null_odds: the three results of `decode_predictions`.
            `null_odds.json` is written only when `null_odds` is not empty.
        directory: output directory (created if missing).

    Returns:
        `{"predictions": path, "nbest_predictions": path[, "null_odds": path]}`.
    """
    os.makedirs(directory, exist_ok=True)
    files = {"predictions": predictions, "nbest_predictions": nbest}
    if null_odds:
        files["null_odds"] = null_odds
    paths = {}
    for name, content in files.items():
        paths[name] = os.path.join(directory, name + ".json")
        write_json(paths[name], content, indent=4)
    return paths
