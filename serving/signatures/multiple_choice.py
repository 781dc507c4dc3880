"""Signatures of a multiple-choice model (`BertMultipleChoice`, e.g. SWAG).

Each row is one question: a `context` and its `C` candidate `endings`; every
`(context, ending)` pair is packed `[CLS] context [SEP] ending [SEP]` (the
SWAG layout of `pipelines.datasets.swag`: put the shared start of the ending
sentence into each ending, `"He" + " pulls up a chair."`).

* `serving_default` (predict): `context` string `[B]`, `endings` string `[B, C]`
  (C = the model's number of choices) -> `choice` int64 `[B]` (index of the
  best ending), `probabilities` float32 `[B, C]` (softmax over the endings) and `empty`
  bool `[B]` (the context AND every ending have no token: empty, only whitespace or control /
  format characters). A context or an ending with no token is not an error: it is packed as
  zero pieces (`[CLS] [SEP] ending [SEP]`, `[CLS] context [SEP] [SEP]`), as `predict` packs it.
* `token_ids` (predict): int32 `[B, C, S]` inputs -> `logits` float32 `[B, C]`.

Example (a loaded export):

    >>> loaded = tf.saved_model.load("models/swag/1")
    >>> out = loaded.signatures["serving_default"](
    ...     context=tf.constant(["He enters the room."]),
    ...     endings=tf.constant([["He sits down.", "He eats the window.", "He flies.", "He sings."]]))
    >>> out["choice"].shape, out["probabilities"].shape       # choice 0 from a trained model
    (TensorShape([1]), TensorShape([1, 4]))
"""

import numpy as np
import tensorflow as tf

from serving.signatures.module import PREDICT
from serving.signatures.text_inputs import ids_specs, input_check, string_spec


def build(module, finetuned):
    """`{signature name: (concrete function, method name)}` for `module` (a `ServingModule`)."""
    num_choices = int(finetuned.model.num_choices)

    def serve(inputs):
        context, endings = inputs["context"], inputs["endings"]
        batch = tf.shape(endings)[0]
        check = input_check(tf.equal(tf.shape(endings)[1], num_choices),
                            f"input 'endings': expected {num_choices} endings per row")
        # Both inputs only after the check: the endings' own reshape to [batch, num_choices] (no_ending)
        # would otherwise be free to fail first, with a raw "Input to reshape is a tensor with 3 values".
        with tf.control_dependencies([check]):
            context, endings = tf.identity(context), tf.identity(endings)
        context_ids = module.text.tokenize(context, "context")
        ending_ids = module.text.tokenize(tf.reshape(endings, [-1]), "endings")
        # Row-major: pair i * C + c is (context i, ending c), as the model's reshape expects.
        pairs = module.text.pack([tf.gather(context_ids, tf.repeat(tf.range(batch), num_choices)),
                                  ending_ids])
        x = {k: tf.reshape(v, [batch, num_choices, -1]) for k, v in pairs.items()}
        logits = module.run_model(x)
        no_ending = tf.reshape(module.text.empty([ending_ids]), [batch, num_choices])
        empty = module.text.empty([context_ids]) & tf.reduce_all(no_ending, axis=1)
        return {"choice": tf.argmax(logits, axis=-1), "probabilities": tf.nn.softmax(logits), "empty": empty}

    serving = tf.function(serve, input_signature=[
        {"context": string_spec("context"), "endings": string_spec("endings", rank=2)}])
    token_ids = tf.function(lambda inputs: {"logits": module.run_model(inputs)},
                            input_signature=[ids_specs(3)])
    return {"serving_default": (serving.get_concrete_function(), PREDICT),
            "token_ids": (token_ids.get_concrete_function(), PREDICT)}


def reference_outputs(finetuned, inputs):
    """`serving_default`'s outputs the Python way: tokenizer + packer per pair + Keras model."""
    tokenizer = finetuned.tokenizer()
    packer = finetuned.packer(tokenizer)
    endings = np.asarray(inputs["endings"], object)
    batch, choices = endings.shape
    contexts = [c for c in inputs["context"] for _ in range(choices)]
    context_ids = tokenizer.tokenize(tf.constant(contexts))
    ending_ids = tokenizer.tokenize(tf.constant(endings.reshape(-1).tolist()))
    x = packer((context_ids, ending_ids))
    x = {k: tf.reshape(v, [batch, choices, -1]) for k, v in x.items()}
    logits = np.asarray(finetuned.model(x, training=False), np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    no_token = ((context_ids.row_lengths().numpy() == 0) & (ending_ids.row_lengths().numpy() == 0))
    return {"choice": logits.argmax(-1).astype(np.int64),
            "probabilities": probabilities.astype(np.float32),
            "empty": no_token.reshape(batch, choices).all(axis=1)}


# -- what the export path asks of this family (serving.signatures.kind_module) -------------

def card_settings(finetuned):
    """The head's number of choices (what the export serves)."""
    return {"num_choices": int(finetuned.model.num_choices)}


def sample_rows(finetuned):
    from serving.signatures.samples import CHOICES

    choices = int(finetuned.model.num_choices)
    return [{"context": c, "endings": list((e * choices)[:choices])} for c, e in CHOICES]


def rows_from_file(finetuned, path, count):
    """The first `count` questions of the run's SWAG evaluation file."""
    from pipelines.datasets.swag import read_swag_csv

    return [{"context": e.context, "endings": [b for _, b in e.choices()]} for e in read_swag_csv(path)[:count]]
