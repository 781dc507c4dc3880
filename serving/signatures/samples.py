"""Representative `serving_default` inputs of an export: for warmup requests and the export check.

Taken from the task's evaluation file when the model's provenance (`training`
in `task.json`) points at one that exists (`eval_path`: CSV/TSV/JSONL, CoNLL,
SQuAD JSON, SWAG CSV), otherwise
built-in sentences. Always a few rows, in a fixed order, so that exports are
reproducible.

Example:

    >>> from bert_keras.finetuned_model import read_finetuned
    >>> inputs = sample_inputs(read_finetuned("out/sentiment"), count=8)
    >>> sorted(inputs), len(inputs["text"])
    (['text'], 8)
"""

import logging
import os

logger = logging.getLogger(__name__)

SENTENCES = (
    "John Smith moved from Paris to New York in 1998.",
    "The battery lasts all week and the sound is rich.",
    "Terrible service: the package arrived broken and nobody answered.",
    "Angela Merkel met the president of the European Commission in Brussels.",
    "Zürich and São Paulo are cities; 東京 is Tokyo.",
    "A short one.",
    "I loved every minute of this film, the actors were wonderful!",
    "Apple released a new phone on Tuesday.",
)
QUESTIONS = (
    ("When did the oil crisis begin?",
     "The 1973 oil crisis began in October 1973 when the members of the Organization of Arab "
     "Petroleum Exporting Countries proclaimed an oil embargo."),
    ("Where does John Smith live?",
     "John Smith moved from Paris to New York in 1998. He has lived there ever since."),
    ("What is the capital of France?",
     "Paris is the capital and most populous city of France, on the Seine."),
)
CHOICES = (
    ("He enters the room.", ("He pulls up a chair and sits down.", "He eats the window.",
                             "He flies over the table.", "He sings to the lamp, loudly.")),
    ("The woman picks up the ball.", ("She throws it to the dog.", "She melts into the floor.",
                                      "She becomes a tree.", "She reads the ball a story.")),
)


def sample_inputs(finetuned, count=8):
    """`{input name: list}` of `count` rows for a `FinetunedModel` (see module docstring)."""
    rows = None
    path = finetuned.training.get("eval_path")
    if path and os.path.isfile(path):
        try:
            rows = _from_eval_file(finetuned, path, count)
        except Exception as error:  # a sample is a convenience: never fail an export on it
            logger.warning("%s: no sample inputs from it (%s); using built-in sentences", path, error)
    rows = rows or _built_in(finetuned)
    rows = (rows * (-(-count // len(rows))))[:count]
    return {name: [row[name] for row in rows] for name in rows[0]}


def _built_in(finetuned):
    from serving.signatures import kind_module

    return kind_module(finetuned.kind).sample_rows(finetuned)


def _from_eval_file(finetuned, path, count):
    from serving.signatures import kind_module

    return kind_module(finetuned.kind).rows_from_file(finetuned, path, count)
