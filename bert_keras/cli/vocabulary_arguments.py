"""What several commands share about a model's vocabulary: finding it (`--vocab`, beside the
model) and the tokenizer + packer of `--seq-length` / `--cased`."""

from bert_keras.cli.main import CommandError


def vocabulary_of(args):
    if args.vocab:
        return args.vocab
    from bert_keras.checkpoints import find_vocabulary

    path = find_vocabulary(args.init)
    if path is None:
        raise CommandError(f"{args.init} has no vocab.txt; pass --vocab FILE")
    return path


def tokenizer_and_packer_for(config, args):
    """The tokenizer of `--vocab`/`--init`, checked against the model, and a packer
    padding to the longest text (at most `--max-length` and the model's positions)."""
    from pipelines import BertPacker, BertTokenizer

    tokenizer = BertTokenizer(vocabulary_of(args), lowercase=not args.cased)
    if tokenizer.vocabulary_size != config.vocab_size:
        raise CommandError(
            f"the vocabulary has {tokenizer.vocabulary_size} tokens but the model expects "
            f"{config.vocab_size}: pass the model's own vocab.txt with --vocab"
        )
    special = tokenizer.special_tokens
    packer = BertPacker(min(args.max_length, config.max_position_embeddings),
                        cls_id=special.cls, sep_id=special.sep, pad_id=special.pad, pad_to="longest")
    return tokenizer, packer
