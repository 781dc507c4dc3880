"""Raw-text requests for a served signature, and its answers as readable lines.

What `bert-keras query` and `bert-keras loadtest` send and print, usable from any script:
`request_inputs` builds `{input name: rows}` for a signature's text inputs (one text, a
sentence pair, question + context, context + endings); `answer_lines` turns row `i` of a
`ServingClient.predict` answer into lines (label + probabilities, entities with their
character spans, the answer span, the chosen ending, the embedding's size).

Example:

>>> request_inputs({"text": {"dtype": "DT_STRING"}, "text_b": {"dtype": "DT_STRING"}},
...                texts=["The cat sat. ||| A cat was sitting."])
{'text': ['The cat sat.'], 'text_b': ['A cat was sitting.']}
>>> import numpy as np
>>> answer_lines({"answer": np.array([b"Ann"], dtype=object), "start_char": np.array([17]),
...               "end_char": np.array([20]), "score": np.array([2.5])}, 0)
["  answer: 'Ann'  [17:20]  score 2.500"]
"""

import os
import sys

import numpy as np

from bert_keras import json_output

# A sentence pair in one text argument: 'A ||| B'.
PAIR_SEPARATOR = " ||| "


class TextRequestError(ValueError):
    """The texts given do not fit the signature's inputs; the message says what to give."""


def read_texts(path, *, keep_blank=False):
    """The lines of UTF-8 file `path` (`-`: standard input), one text each, as `--input FILE` reads them.

    Blank lines are dropped unless `keep_blank` (then row i is line i).

    Raises:
        TextRequestError: no such file, or a byte that is not UTF-8 (naming the line).
    """
    if path != "-" and not os.path.isfile(path):
        raise TextRequestError(f"--input {path}: no such file")
    if path == "-":
        text = sys.stdin.read()
    else:
        from pipelines.datasets.text_files import decode_text_file

        text = decode_text_file(path, error=TextRequestError)  # a bad byte names the file and line
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # a file's lines, as open() reads them
    if lines and lines[-1] == "":
        lines.pop()
    return lines if keep_blank else [line for line in lines if line.strip()]


def split_pairs(texts):
    """Each text as a `(text, text_b)` pair where it holds a tab or `PAIR_SEPARATOR`, else as is.

    >>> split_pairs(["one", "A ||| B", "C\\tD"])
    ['one', ('A', 'B'), ('C', 'D')]
    """
    result = []
    for text in texts:
        for separator in ("\t", PAIR_SEPARATOR):
            if separator in text:
                a, b = text.split(separator, 1)
                result.append((a.strip(), b.strip()))
                break
        else:
            result.append(text)
    return result


def takes_texts(signature_inputs):
    """Whether a signature's requests are built from `texts` (not SQuAD's question + context, nor
    multiple choice's context + endings).

    >>> takes_texts({"question": {}, "context": {}}), takes_texts({"text": {}})
    (False, True)
    """
    return set(signature_inputs) not in ({"question", "context"}, {"context", "endings"})


def request_inputs(signature_inputs, texts=(), *, text_b=(), question=(), context=(), ending=()):
    """`{input name: list of rows}` for a signature from raw text.

    Args:
        signature_inputs: the signature's inputs (`ServingClient.signature(...)["inputs"]`).
        texts: texts; `'A ||| B'` is a sentence pair for a pair signature.
        text_b: second sentences (one per text, or one for all).
        question, context: SQuAD questions (or `texts`) and their passage(s).
        ending: the endings of one multiple-choice `context`.

    Raises:
        TextRequestError: what is missing or does not fit.
    """
    names = set(signature_inputs)
    texts = list(texts)
    strings = {name for name, info in signature_inputs.items() if info["dtype"] == "DT_STRING"}
    if strings != names:
        raise TextRequestError(f"signature takes non-text inputs {sorted(names - strings)}: send raw "
                               "text only here (use serving.client.ServingClient for tensors)")
    if names == {"question", "context"}:
        questions = list(question) or texts
        if not questions or not context:
            raise TextRequestError("this model answers questions: give --question Q --context C")
        return {"question": questions, "context": _broadcast(context, len(questions), "--context")}
    if names == {"context", "endings"}:
        if len(context) != 1 or len(ending) < 2:
            raise TextRequestError("this model picks an ending: give one --context C and two or more --ending E")
        return {"context": list(context), "endings": [list(ending)]}
    if names == {"text", "text_b"}:
        pairs = [text.partition(PAIR_SEPARATOR) for text in texts]
        firsts = [a for a, _, _ in pairs]
        seconds = _broadcast(text_b, len(firsts), "--text-b") if text_b else [
            b if separator else None for _, separator, b in pairs]
        if not firsts or any(b is None for b in seconds):
            raise TextRequestError("this model takes sentence pairs: give 'A ||| B' or TEXT --text-b B")
        return {"text": firsts, "text_b": seconds}
    if len(names) == 1:
        if not texts:
            raise TextRequestError("give at least one TEXT")
        return {next(iter(names)): texts}
    raise TextRequestError(f"cannot build inputs {sorted(names)} from text arguments")


def _broadcast(values, count, flag):
    if len(values) in (1, count):
        return list(values) * (count if len(values) == 1 else 1)
    raise TextRequestError(f"give {flag} once, or once per input ({count}); got {len(values)}")


def text_of(value):
    """A string from the bytes or str of a served string output."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def json_ready(value):
    """A served output value (numpy, bytes) as JSON-able Python values."""
    if isinstance(value, np.ndarray):
        return [json_ready(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, bytes):
        return text_of(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def answer_rows(inputs, outputs):
    """Per row of a request, its `(inputs, outputs)`, JSON-ready (what `bert-keras query --json` prints)."""
    for i in range(len(next(iter(inputs.values())))):
        yield ({name: json_ready(rows[i]) for name, rows in inputs.items()},
               {name: json_ready(value[i] if np.ndim(value) else value) for name, value in outputs.items()})


def answer_lines(outputs, i):
    """Readable lines for row `i` of a served model's outputs (the export contract's output names).

    A row the model read only in part (its `truncated` output) says so: truncation is never
    silent, on the command line either. Nor is a text with no token (its `empty` output): the
    answer shown is the model's answer to an empty input."""
    lines = _answer_lines(outputs, i)
    if _flag(outputs, "empty", i):
        lines.append("  empty: the text has no token (empty, or only whitespace / control characters); "
                     "this is the model's answer to an empty input ([CLS] [SEP])")
    if _flag(outputs, "truncated", i):
        lines.append("  truncated: the text is longer than this model reads; only its first part "
                     "was read (export with max_length=N to read N word pieces in windows)")
    return lines


def _flag(outputs, name, i):
    """Row `i` of a bool per-row output such as `truncated` / `empty` (False when the answer has none)."""
    return name in outputs and bool(np.ndim(outputs[name])) and bool(outputs[name][i])


def _answer_lines(outputs, i):
    def get(name):
        return outputs[name][i]

    def probability_line(probabilities):
        return "  probabilities: " + "  ".join(f"[{k}] {float(p):.3f}" for k, p in enumerate(probabilities))

    if "entity_text" in outputs:
        count = int(get("num_entities")) if "num_entities" in outputs else len(get("entity_text"))
        return [f"  {text_of(get('entity_label')[j]):<6} {text_of(get('entity_text')[j])!r:<30} "
                f"[{int(get('start_char')[j])}:{int(get('end_char')[j])}]  score {float(get('score')[j]):.3f}"
                for j in range(count)] or ["  (no entities)"]
    if "answer" in outputs:
        if "has_answer" in outputs and not bool(get("has_answer")):
            return [f"  no answer in the context (score {float(get('score')):.3f})"]
        return [f"  answer: {text_of(get('answer'))!r}  [{int(get('start_char'))}:{int(get('end_char'))}]"
                f"  score {float(get('score')):.3f}"]
    if "choice" in outputs:
        choice = int(get("choice"))
        if "probabilities" not in outputs:
            return [f"  choice: ending {choice}"]
        probabilities = get("probabilities")
        return [f"  choice: ending {choice}  (p={float(probabilities[choice]):.3f})", probability_line(probabilities)]
    if "label" in outputs and "probabilities" in outputs:
        probabilities = get("probabilities")
        class_id = int(get("class_id")) if "class_id" in outputs else int(np.argmax(probabilities))
        return [f"  label: {text_of(get('label'))}  (p={float(probabilities[class_id]):.3f})",
                probability_line(probabilities)]
    if "embedding" in outputs:
        vector = np.asarray(get("embedding"), dtype=np.float32)
        head = ", ".join(f"{v:+.4f}" for v in vector[:6])
        return [f"  embedding: {vector.shape[-1]} dims, L2 norm {float(np.linalg.norm(vector)):.4f}: "
                f"[{head}{', ...' if vector.shape[-1] > 6 else ''}]"]
    if "score" in outputs:
        return [f"  score: {float(get('score')):.4f}"]
    return [f"  {name}: {_json_line(outputs[name][i] if np.ndim(outputs[name]) else outputs[name])[:200]}"
            for name in sorted(outputs)]


def _json_line(value):
    return json_output.dumps(json_ready(value), default=str)
