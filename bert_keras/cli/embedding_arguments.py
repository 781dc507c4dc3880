"""What `embed` and `export --init` share about sentence embeddings: the pooling flags
(`--pooling`, `--pooling-layer`, `--idf-corpus`, `--normalize`) and the reading of the BM25
corpus. No TensorFlow: `--help` stays fast."""

import os

from bert_keras.cli.main import CommandError
from bert_keras.pooling_modes import POOLING_MODES

POOLING_LAYER_HELP = ("the encoder state pooled by mean / cls / max / bm25, as bert-as-service's "
                      "-pooling_layer: -1 the last block (default), -2 the one before, ... -L the first; "
                      "1..L counted from the first; 0 the embeddings output")


def add_pooling_options(parser, *, applies_to="", idf_default=""):
    """`--pooling`, `--pooling-layer N`, `--idf-corpus FILE`, `--normalize`.

    Args:
        parser: the subcommand's parser.
        applies_to: a help prefix (`"--init: "` for `export`).
        idf_default: what `--idf-corpus` defaults to, for its help.
    """
    # Defaults None (the Embedder's own: mean, -1, not normalized): a saved embedder directory keeps
    # what it was saved with, and only a flag the user gave is checked against it.
    parser.add_argument("--pooling", choices=POOLING_MODES, default=None,
                        help=f"{applies_to}how token vectors become one (default mean; a saved embedder: its own)")
    parser.add_argument("--pooling-layer", type=int, default=None, metavar="N",
                        help=f"{applies_to}{POOLING_LAYER_HELP}")
    parser.add_argument("--idf-corpus", metavar="FILE",
                        help=f"{applies_to}--pooling bm25: fit the IDF on this UTF-8 file's lines (one text "
                             f"each, blank lines skipped){idf_default}")
    parser.add_argument("--normalize", action="store_true", default=None,
                        help=f"{applies_to}L2-normalize the vectors (unit length)")


def embedder_from_flags(args, **windows):
    """`Embedder.from_pretrained` of `--init` with the pooling and tokenizer flags (one not given: the
    Embedder's default, or what a saved embedder directory keeps); `windows`: `max_length` / `stride`
    where the command reads them."""
    from bert_keras.cli.flag_arguments import given_lowercase, refuse_tokenizer_flags
    from bert_keras.tasks import Embedder

    refuse_tokenizer_flags(args)
    # `--unicode-normalization` where the command has it (export): None, the encoder's recorded one
    normalization = getattr(args, "unicode_normalization", None)
    return Embedder.from_pretrained(args.init, pooling=args.pooling, normalize=args.normalize,
                                    pooling_layer=args.pooling_layer,
                                    vocab_file=args.vocab, lowercase=given_lowercase(args),
                                    strip_accents=args.strip_accents, seq_length=args.seq_length,
                                    **({"unicode_normalization": normalization} if normalization else {}), **windows)


def read_idf_corpus(args):
    """The lines of `--idf-corpus` (blank ones skipped), None without it; only with `--pooling bm25`
    (or no --pooling and `--init` a saved directory)."""
    if args.idf_corpus is None:
        return None
    from bert_keras.finetuned_model import is_finetuned_directory

    # Without --pooling a saved embedder directory pools as it was saved (bm25 perhaps): the
    # command checks that once it is read.
    if args.pooling != "bm25" and not (args.pooling is None and is_finetuned_directory(args.init)):
        raise CommandError(f"--idf-corpus {args.idf_corpus}: the IDF is for --pooling bm25 "
                           f"(not {args.pooling or 'mean'})")
    from pipelines.datasets.text_files import not_a_file
    from serving.text_requests import read_texts

    if not os.path.isfile(args.idf_corpus):
        raise CommandError(f"--idf-corpus {not_a_file(args.idf_corpus)}")

    corpus = read_texts(args.idf_corpus)
    if not corpus:
        raise CommandError(f"--idf-corpus {args.idf_corpus}: holds no text")
    return corpus
