"""A fine-tuned task's head as a Hugging Face `BertFor...` model: tensor names and config fields.

`bert-keras convert FINETUNED_DIR hf:OUT` writes the encoder and this head, so that
`transformers.AutoModelFor...from_pretrained(OUT)` computes the fine-tuned model's outputs.
Each family names its `transformers` twin (`bert_keras.families.HfHead`): sequence
classification and regression (`BertForSequenceClassification`), word tagging
(`BertForTokenClassification`), extractive QA (`BertForQuestionAnswering`: start, end)
and multiple choice (`BertForMultipleChoice`). Keras kernels are `[in, out]`, torch
`nn.Linear` weights `[out, in]`: transposed. An embedding model has no head weights (its
pooling is a setting): it is a `BertModel`.
"""

import numpy as np

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
