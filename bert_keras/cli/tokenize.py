"""`bert-keras tokenize`: BERT tokenization of text, with ids and offsets."""

from bert_keras import json_output
from bert_keras.cli.flag_arguments import (add_case_options, add_unicode_normalization_option, given_lowercase,
                                           refuse_other_normalization, refuse_tokenizer_flags)
from pipelines.command_options import add_option, positive_int
from bert_keras.cli.main import CommandError


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "tokenize",
        help=summary,
        description=(
            "Tokenize text exactly as the original BERT tokenizer does, in the TensorFlow graph. "
            "Shows each token, its id and the part of the original text it came from ([start:end]: "
            "UTF-8 byte offsets; --json adds start_char / end_char, code point offsets)."
        ),
    )
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to tokenize (default: lines of stdin)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vocab", help="vocab.txt")
    source.add_argument("--init", metavar="SPEC",
                        help="take the vocabulary of a model (hf:DIR, tf1:CKPT, keras-hub:DIR, pip:PACKAGE, or a "
                             "fine-tuned model directory: tokenized as it was trained); an HF "
                             "tokenizer's added tokens ([E1], <ent>) are found whole, as transformers does")
    add_case_options(parser, cased_help="cased rules (no lowercasing or accent stripping; default: as the "
                                        "vocabulary's tokenizer_config.json says, else as its tokens show)")
    add_option(parser, "--tokenizer", "--backend", choices=["tf_text", "core"], default="tf_text",
               help="tokenizer backend (identical output; default tf_text)")
    add_unicode_normalization_option(parser, help=(
        "NFC composes every text before tokenizing (Hangul written decomposed, NFD jamo, reads as [UNK] with a "
        "Korean vocabulary otherwise); none reads text as given. Default: what the vocabulary records (bert-keras "
        "vocab --unicode-normalization), else none. A fine-tuned model (--init DIR) keeps the one it was trained "
        "with: another is refused"))
    parser.add_argument("--pair", metavar="TEXT_B", help="second segment: show the packed [CLS] A [SEP] B [SEP] input")
    # At least 1 (the packer asks 3): `--seq-length 0` was taken for "not given" and ignored.
    add_option(parser, "--seq-length", "--max-seq-length", type=positive_int, default=None,
               help="pack to this length ([CLS]/[SEP] included)")
    parser.add_argument("--max-chars-per-word", type=positive_int, default=None,
                        help="longer words become [UNK] (default: the checkpoint's: its tokenizer.json's, 100 in an "
                             "HF directory, a fine-tuned model's own; else the original's 200)")
    parser.add_argument("--json", action="store_true", help="one JSON object per text (each token's start / end in UTF-8 bytes, "
                                                          "start_char / end_char in code points)")
    parser.set_defaults(func=run)


def run(args):
    from serving.text_requests import read_texts, utf8_arguments

    texts = utf8_arguments(args.texts) if args.texts else read_texts("-", keep_blank=True)
    if args.pair is not None:
        utf8_arguments([args.pair], "--pair")
    if not texts:
        raise CommandError("no text given: pass TEXT arguments or pipe lines to stdin")
    from pipelines.tokenizer.bert_tokenizer import tokenization_lines

    tokenizer = _tokenizer(args)
    for record in tokenizer.tokenization_records(texts, args.pair, args.seq_length):
        print(json_output.dumps(record, ensure_ascii=False) if args.json else "\n".join(tokenization_lines(record)))
    return 0


def _tokenizer(args):
    from bert_keras.checkpoints import load_tokenizer, tokenizer_added_tokens
    from bert_keras.finetuned_model import is_finetuned_directory, read_finetuned

    options = dict(backend=args.tokenizer)
    if args.unicode_normalization is not None:
        options["unicode_normalization"] = args.unicode_normalization
    if args.init is not None and is_finetuned_directory(args.init):
        # A fine-tuned directory is no weight checkpoint (`load_tokenizer` cannot tell its format):
        # show the tokenization its model was trained with, as `attention`/`embed --init DIR` use.
        refuse_tokenizer_flags(args)
        record = read_finetuned(args.init, load_model=False)
        refuse_other_normalization(args.unicode_normalization, record, args.init)
        from pipelines import BertTokenizer

        options["unicode_normalization"] = record.unicode_normalization
        return BertTokenizer(record.vocab_file, lowercase=record.lowercase, strip_accents=record.strip_accents,
                             pre_tokenizer=record.pre_tokenizer, added_tokens=record.added_tokens, **options,
                             max_input_chars_per_word=args.max_chars_per_word or record.max_input_chars_per_word)
    # an HF tokenizer's added tokens ("[E1]"), found whole as transformers and a task from it find them
    # (not under a morpheme analyzer, which splits the text first)
    added = tokenizer_added_tokens(args.init, args.vocab) if args.init is not None else []
    if added:
        options["added_tokens"] = added
    return load_tokenizer(args.init, vocab_file=args.vocab, lowercase=given_lowercase(args),
                          strip_accents=args.strip_accents, max_input_chars_per_word=args.max_chars_per_word, **options)
