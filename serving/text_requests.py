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


def piped_standard_input():
    """Whether standard input is a pipe or a redirected file (`printf 'x\n' | bert-keras predict ...`,
    `< texts.txt`), not a terminal or /dev/null: a command given no text reads its lines then, as
    `tokenize` does; at a terminal it says what to pass instead of waiting for typed input."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no real stdin (closed, or replaced by a test runner)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def read_texts(path, *, keep_blank=False, refuse_blank=False):
    """The lines of UTF-8 file `path` (`-`: standard input), one text each, as `--input FILE` reads them.

    Blank lines are dropped unless `keep_blank` (then row i is line i); `refuse_blank`: row i is
    line i, and a blank line is an error (a row without a text would have no answer).

    Raises:
        TextRequestError: no such file, a byte that is not UTF-8 or a NUL byte, or (`refuse_blank`) a blank
            line, naming the line.
    """
    from pipelines.datasets.text_files import decode_text, decode_text_file, not_a_file
    from pipelines.line_ends import text_lines

    if path != "-" and not os.path.isfile(path):
        raise TextRequestError(f"--input {not_a_file(path)}")
    if path == "-":  # bytes, decoded as a file's are: a bad byte names its line
        text = decode_text(sys.stdin.buffer.read(), "standard input", error=TextRequestError)
    else:
        text = decode_text_file(path, error=TextRequestError)  # a bad byte names the file and line
    lines = text_lines(text)  # as every reader of a file reads them: "\r\r\n" (Windows' text mode twice) one end
    blank = next((number for number, line in enumerate(lines, 1) if not line.strip()), None)
    if refuse_blank and blank is not None:
        raise TextRequestError(f"--input {path}, line {blank}: an empty line (each line is one text; remove it)")
    return lines if keep_blank or refuse_blank else [line for line in lines if line.strip()]


def utf8_arguments(texts, what="TEXT"):
    """`texts` given as command-line arguments, checked: a byte that is not UTF-8 (Python passes it
    on as a lone surrogate, which TensorFlow cannot convert) is an error naming the argument."""
    for number, text in enumerate(texts, 1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as bad:
            byte = ord(text[bad.start]) - 0xDC00 if 0xDC80 <= ord(text[bad.start]) <= 0xDCFF else None
            raise TextRequestError(f"{what} argument {number} ({text!r}): "
                                   + (f"byte 0x{byte:02x} is not valid UTF-8" if byte is not None
                                      else "not valid Unicode text") + "; give UTF-8 text") from None
    return list(texts)


def given_texts(arguments, path=None, *, refuse_blank=False):
    """`(texts, sources)`: the TEXT `arguments` (checked as `utf8_arguments`) then the lines of
    `--input` file `path` (`-`: standard input; blank lines dropped, or with `refuse_blank` an
    error), and where each came from in a command user's words, 1-based as an editor counts:
    `TEXT argument 2`, `--input texts.tsv, line 7`, `standard input, line 3`. An error about
    text i names `sources[i]` (`split_pairs(..., sources=)`, `request_inputs(..., sources=)`).

    Raises:
        TextRequestError: as `read_texts` and `utf8_arguments`.
    """
    given = utf8_arguments(arguments)
    sources = [f"TEXT argument {number}" for number in range(1, len(given) + 1)]
    if not path:
        return given, sources
    where = "standard input" if path == "-" else f"--input {path}"
    lines = read_texts(path, keep_blank=True, refuse_blank=refuse_blank)
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    return given + [line for _, line in numbered], sources + [f"{where}, line {number}" for number, _ in numbered]


def named_text(index, text, sources=None):
    """Text `index` of a list as an error names it: its source (`given_texts`) when known, else
    `texts[index]` (a script's list), with the text's start.

    >>> named_text(1, "no pair"), named_text(1, "no pair", ["TEXT argument 1", "--input t.tsv, line 3"])
    ("texts[1] ('no pair')", "--input t.tsv, line 3 ('no pair')")
    >>> named_text(0, "좋다 ||| 싫다".encode())
    "texts[0] ('좋다 ||| 싫다')"
    """
    where = sources[index] if sources is not None and index < len(sources) else f"texts[{index}]"
    # a script's bytes are shown as the text they hold, not as Python's b'\xec...' spelling
    shown = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    return f"{where} ({shown[:60]!r})"


def split_pairs(texts, *, at_tabs=True, exact=False, sources=None):
    """Each text as a `(text, text_b)` pair where it holds a tab or `PAIR_SEPARATOR`, else as is.

    It is split at the first of them: a tab inside a context written after ' ||| ' stays in it.
    `at_tabs=False` (a model that reads single texts): a tab is the text's own whitespace, as in
    a pasted TSV line; only `PAIR_SEPARATOR` splits. `exact` (a model that reads sentence pairs,
    and nothing more): a text of three fields or more (`A<TAB>B<TAB>label`, `A ||| B ||| C`) is an
    error naming it: by `sources[i]` (`given_texts`: the argument, or the file and line), else as
    `texts[i]`; not a pair whose second text holds the rest.

    >>> split_pairs(["one", "A ||| B", "C\\tD", "who? ||| a\\tb"])
    ['one', ('A', 'B'), ('C', 'D'), ('who?', 'a\\tb')]
    >>> split_pairs(["C\\tD", "A ||| B"], at_tabs=False)
    ['C\\tD', ('A', 'B')]
    >>> split_pairs(["A ||| B", "C\\tD\\t1"], exact=True)
    Traceback (most recent call last):
    ...
    serving.text_requests.TextRequestError: texts[1] ('C\\tD\\t1'): 3 fields separated by tabs; a sentence pair is 2 (A<TAB>B, or 'A ||| B'): remove the extra field, or join it to its text with a space
    """
    separators = ("\t", PAIR_SEPARATOR) if at_tabs else (PAIR_SEPARATOR,)
    result = []
    for row, text in enumerate(texts):
        found = [(text.find(separator), separator) for separator in separators if separator in text]
        if found:
            separator = min(found)[1]
            a, b = text.split(separator, 1)
            # After a tab a further tab or ' ||| ' is a field too; after ' ||| ', only another ' ||| '
            # (a tab there is the second text's whitespace, as the line above reads it).
            extra = [s for s in (separators if separator == "\t" else (PAIR_SEPARATOR,)) if s in b]
            if exact and extra:
                fields = 2 + sum(b.count(s) for s in extra)
                used = {separator, *extra}
                named = "tabs and ' ||| '" if len(used) > 1 else "tabs" if "\t" in used else "' ||| '"
                raise TextRequestError(
                    f"{named_text(row, text, sources)}: {fields} fields separated by {named}; a sentence pair is 2 "
                    "(A<TAB>B, or 'A ||| B'): remove the extra field, or join it to its text with a space")
            result.append((a.strip(), b.strip()))
        else:
            result.append(text)
    return result


def takes_texts(signature_inputs):
    """Whether a signature's requests are built from `texts` (not SQuAD's question + context, nor
    multiple choice's context + endings): its family's `TAKES_TEXTS`.

    >>> takes_texts({"question": {}, "context": {}}), takes_texts({"text": {}})
    (False, True)
    """
    family, _ = _family_taking(set(signature_inputs))
    return True if family is None else family.TAKES_TEXTS


def _family_modules():
    """Each family's request module (`Family.requests`, `serving.requests`), in registry order."""
    import importlib

    from bert_keras.families import KINDS, family

    paths = dict.fromkeys(family(kind).requests for kind in KINDS if family(kind).requests)
    return [importlib.import_module(path) for path in paths]


def _family_taking(names, output_names=None):
    """`(request module, known)`: the module of the family whose signature takes these input names
    (None: none does), and whether `output_names` told it apart from the other families that take
    the same inputs (a classifier, a tagger and an embedder all take one `text`, and read it
    differently: 'A ||| B' is a pair a classifier refuses, one text for an embedder)."""
    taking = [module for module in _family_modules() if names in module.INPUTS]
    if output_names:
        answering = _family_answering(set(output_names))
        if answering in taking:
            return answering, True
    return (taking[0] if taking else None), len(taking) == 1


def request_inputs(signature_inputs, texts=(), *, sources=None, signature_outputs=None, **flags):
    """`{input name: list of rows}` for a signature from raw text.

    Args:
        signature_inputs: the signature's inputs (`ServingClient.signature(...)["inputs"]`).
        texts: texts; `'A ||| B'` is a sentence pair for a pair signature.
        sources: where each text came from (`given_texts`): an error about a text names it so
            (`--input texts.tsv, line 7`); None: as `texts[i]`.
        signature_outputs: the signature's outputs, when known: they tell the families that take
            the same inputs apart (a classifier or tagger of single texts refuses 'A ||| B', as
            `bert-keras predict` does; an embedder's is one text, and so is any text when the
            outputs are not known or are no family's).
        **flags: the values of the families' `query_flags()`, each a list, by name:
            `text_b` (second sentences: one per text, or one for all); `question`, `context`
            (SQuAD questions, or `texts`, and their passage(s)); `context`, `ending` (one
            multiple-choice context and its endings).

    Raises:
        TextRequestError: what is missing or does not fit.
    """
    names = set(signature_inputs)
    strings = {name for name, info in signature_inputs.items() if info["dtype"] == "DT_STRING"}
    if strings != names:
        raise TextRequestError(f"signature takes non-text inputs {sorted(names - strings)}: send raw "
                               "text only here (use serving.client.ServingClient for tensors)")
    family, known = _family_taking(names, signature_outputs)
    if family is not None:
        return family.request_inputs(list(texts), names=names, sources=sources, family_known=known, **{
            flag_name(flag): list(flags.get(flag_name(flag)) or ()) for flag, _, _ in query_flags()})
    if len(names) == 1:  # a signature of one text input under another name
        if not texts:
            raise TextRequestError("give at least one TEXT")
        return {next(iter(names)): list(texts)}
    raise TextRequestError(f"cannot build inputs {sorted(names)} from text arguments")


def query_flags():
    """`(flag, metavar, help)` of each flag a family's requests read besides the texts
    (`FLAGS` of each `serving.requests` module), once each; a flag two families read (`--context`)
    has both helps.

    >>> [flag for flag, _, _ in query_flags()]
    ['--text-b', '--question', '--context', '--ending']
    """
    flags = {}
    for module in _family_modules():
        for flag, metavar, help_text in module.FLAGS:
            if flag in flags:
                flags[flag] = (metavar, f"{flags[flag][1]}, or {help_text}")
            else:
                flags[flag] = (metavar, help_text)
    return [(flag, metavar, help_text) for flag, (metavar, help_text) in flags.items()]


def sample_texts(signature_inputs, text, **flags):
    """The texts a command sends when the user typed none: `[text]`, as the signature's family makes
    it fit (`sample_texts`: a sentence pair for a pair classifier).

    >>> sample_texts({"text": {}, "text_b": {}}, "A dog ran.")
    ['A dog ran. ||| A fast fox leaps over a sleepy dog.']
    >>> sample_texts({"text": {}, "text_b": {}}, "A dog ran.", text_b=["B"]), sample_texts({"text": {}}, "A dog ran.")
    (['A dog ran.'], ['A dog ran.'])
    """
    family, _ = _family_taking(set(signature_inputs))
    if family is None or not hasattr(family, "sample_texts"):
        return [text]
    return family.sample_texts(signature_inputs, text, **flags)


def example_request(signature_inputs=None, settings=None):
    """`(bert-keras query arguments, REST instance)` of a request a served signature answers, for
    the hints commands print: its family's `example`, else one text.

    A fixed `"some text"` failed as printed for a sentence-pair classifier ("this model takes
    sentence pairs"), a question-answering or a multiple-choice model.

    Args:
        signature_inputs: the signature's inputs (`ServingClient.signature(...)["inputs"]`, or a
            model card's `signatures.serving_default.inputs`); None: not known.
        settings: the export's task settings (its model card's `task.settings`: a multiple-choice
            model's `num_choices`), when known.

    >>> example_request({"question": {}, "context": {}})[0]
    '--question "Who lives there?" --context "John Smith lives in New York."'
    >>> example_request(None)
    ('"your text"', 'your text')
    """
    family = _family_taking(set(signature_inputs))[0] if signature_inputs else None
    return family.example(signature_inputs, settings or {}) if family is not None else ('"your text"', "your text")


def flag_name(flag):
    """The keyword a flag's values arrive under: `"--text-b"` -> `"text_b"`."""
    return flag.lstrip("-").replace("-", "_")


def text_request(texts, *, text_b=(), sources=None, pairs_refused=False, pair_fix=""):
    """`{"text": texts}`: the request of a signature of one text input (classifier, tagger, embedder).

    Such a model reads no second sentence: `text_b` (--text-b) is refused rather than dropped, and
    with `pairs_refused` (a model whose `bert-keras predict` splits 'A ||| B' into a pair and
    refuses it: a classifier or tagger of single texts) so is a text written as a pair, which
    would otherwise be answered as one text holding ' ||| '. `pair_fix`: what else the user can
    do, after "send each text alone" (a classifier: a model fine-tuned on pairs).

    >>> text_request(["one"])
    {'text': ['one']}
    >>> text_request(["one", "A ||| B"], pairs_refused=True)
    Traceback (most recent call last):
    ...
    serving.text_requests.TextRequestError: texts[1] ('A ||| B'): a sentence pair ('A ||| B'), but this model reads single texts: send each text alone
    """
    if not texts:
        raise TextRequestError("give at least one TEXT")
    if text_b:
        raise TextRequestError(f"--text-b {text_b[0]!r}: this model reads single texts, not sentence pairs: "
                               f"leave out --text-b{pair_fix}")
    if pairs_refused:
        paired = next((i for i, text in enumerate(texts) if PAIR_SEPARATOR in text_of(text)), None)
        if paired is not None:
            raise TextRequestError(f"{named_text(paired, text_of(texts[paired]), sources)}: a sentence pair "
                                   f"('A ||| B'), but this model reads single texts: send each text alone{pair_fix}")
    return {"text": list(texts)}


def broadcast(values, count, flag):
    """`values` once per input: given once (repeated) or once per input; else a TextRequestError naming `flag`."""
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


def split_morphemes(inputs, pre_tokenizer):
    """`(split inputs, char maps)`: every text of `inputs` (`request_inputs`' rows; an `endings` row
    is a list of texts) with a space at each morpheme boundary, as `morpheme_splitter(pre_tokenizer)
    .spaced` writes it, and `{input name: per row, its char map back to the raw text}`.

    A model whose vocabulary holds morphemes as words (`bert-keras vocab --pre-tokenizer kiwi`; its
    model card's `tokenization.pre_tokenizer`) tokenizes in its graph, where no analyzer runs: raw
    "대출을" was read as one word, not as the 대출 + 을 it was trained on, and answered otherwise.
    `restore_offsets` brings the answers' character spans back to the raw text.

    Raises:
        ValueError: an unknown `pre_tokenizer` (the message lists the known ones).
        MissingDependencyError: the analyzer is not installed (the message says what to install).
    """
    from pipelines.tokenizer.morphemes import morpheme_splitter

    splitter = morpheme_splitter(pre_tokenizer)
    split, maps = {}, {}
    for name, rows in inputs.items():
        nested = [isinstance(row, (list, tuple)) for row in rows]
        flat = [text for row, many in zip(rows, nested) for text in (row if many else [row])]
        spaced, char_maps = splitter.spaced(flat) if flat else ([], [])
        split[name], maps[name], at = [], [], 0
        for row, many in zip(rows, nested):
            width = len(row) if many else 1
            split[name].append(spaced[at:at + width] if many else spaced[at])
            maps[name].append(char_maps[at:at + width] if many else char_maps[at])
            at += width
    return split, maps


# The character spans of a family's answers, with the input they index and the output holding
# their text: a tagger's entities (in `text`), an answer span (in `context`).
_SPAN_OUTPUTS = (("entity_text", "text"), ("answer", "context"))


def restore_offsets(outputs, raw_inputs, split_inputs, char_maps):
    """`outputs` of a request sent as `split_morphemes` wrote it, with `start_char` / `end_char` in
    the raw texts (`char_maps`) and each span's text cut from the raw text: "대출을", not the
    "대출 을" the model read. Spans that are no span of the text sent (-1: no entity) stay as they are."""
    spans = next(((text_name, source) for text_name, source in _SPAN_OUTPUTS
                  if {text_name, "start_char", "end_char"} <= set(outputs) and source in raw_inputs), None)
    if spans is None:
        return outputs
    text_name, source = spans
    starts, ends = np.array(outputs["start_char"], copy=True), np.array(outputs["end_char"], copy=True)
    texts = np.array(outputs[text_name], dtype=object, copy=True)
    for i, (raw, sent, char_map) in enumerate(zip(raw_inputs[source], split_inputs[source], char_maps[source])):
        row = (i,) + (() if starts.ndim == 1 else (slice(None),))
        for j in np.ndindex(np.shape(starts[row])):
            at = row[:1] + j
            start, end = int(starts[at]), int(ends[at])
            if not 0 <= start <= end <= len(sent):
                continue
            starts[at], ends[at] = char_map[start], char_map[end]
            text = raw[char_map[start]:char_map[end]]
            texts[at] = text.encode("utf-8") if isinstance(texts[at], bytes) else text
    return {**outputs, "start_char": starts, "end_char": ends, text_name: texts}


def answer_rows(inputs, outputs, **context):
    """Per row of a request, its `(inputs, outputs)`, JSON-ready (what `bert-keras query --json` prints).

    `context`: `answer_context`'s keywords; the family's `answer_json` applies them (a classifier's
    probabilities come as `{class name: p}`, as `bert-keras predict --json` writes them). Outputs
    in name order (a gRPC answer's come in no fixed order)."""
    hook = getattr(_family_answering(set(outputs)), "answer_json", None)
    for i in range(len(next(iter(inputs.values())))):
        answer = {name: json_ready(outputs[name][i] if np.ndim(outputs[name]) else outputs[name])
                  for name in sorted(outputs)}
        yield ({name: json_ready(rows[i]) for name, rows in inputs.items()},
               hook(answer, **context) if hook is not None else answer)


def answer_context(client, signature_name=None):
    """What the answers of a served signature need from the server besides their outputs, as
    `answer_lines` keywords: the family's `answer_context` (a classifier's `class_names`), or {}."""
    signature = client.signature(signature_name)
    family = _family_answering(set(signature["outputs"]))
    hook = getattr(family, "answer_context", None)
    return hook(client, signature_name or client.signature_name, signature) if hook is not None else {}


def answer_lines(outputs, i, **context):
    """Readable lines for row `i` of a served model's outputs (the export contract's output names).

    `context`: `answer_context`'s keywords (a classifier's `class_names` name its probabilities).
    A row the model read only in part (its `truncated` output) says so: truncation is never
    silent, on the command line either. Nor is a text with no token (its `empty` output): the
    answer shown is the model's answer to an empty input."""
    lines = _answer_lines(outputs, i, context)
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


def _family_answering(names):
    """The request module of the family whose answers have these output names (the most specific
    match of their `OUTPUTS`), or None."""
    matches = [(len(wanted), module) for module in _family_modules() for wanted in module.OUTPUTS
               if wanted <= names]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def _answer_lines(outputs, i, context):
    """The lines of the family whose answers these outputs are, else each output as JSON."""
    family = _family_answering(set(outputs))
    if family is not None:
        return family.answer_lines(outputs, i, **context)
    return [f"  {name}: {_json_line(outputs[name][i] if np.ndim(outputs[name]) else outputs[name])[:200]}"
            for name in sorted(outputs)]


def probability_line(probabilities, names=None):
    """A row's class probabilities as one line: `[0] 0.120  [1] 0.880`, or with the class
    `names` (one per column) as `predict` prints them: `neg=0.120  pos=0.880`."""
    if names is not None and len(names) == len(probabilities):
        return "  probabilities: " + "  ".join(f"{name}={float(p):.3f}" for name, p in zip(names, probabilities))
    return "  probabilities: " + "  ".join(f"[{k}] {float(p):.3f}" for k, p in enumerate(probabilities))


def _json_line(value):
    return json_output.dumps(json_ready(value), default=str)
