"""A tiny fine-tuned (cased) classifier directory, as `bert-keras finetune` writes one, and its
encoder saved as a plain `.keras` file read with the same rules: the reference that a command
reading the directory's encoder (`attention --init DIR`, `embed --init DIR`) must equal.

Vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK] good Good bad cat ("Good" is id 6: not lowercased).
"""


def cased_classifier_directory(tmp_path):
    """`(model_dir, encoder_file)` under `tmp_path` (a pathlib.Path)."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.finetuned_model import FinetunedModel, save_finetuned
    from bert_keras.models import BertClassifier

    vocab = tmp_path / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "Good", "bad", "cat"]
    vocab.write_text("\n".join(tokens) + "\n")
    config = BertConfig(vocab_size=len(tokens), hidden_size=16, num_layers=2, num_heads=2, intermediate_size=19,
                        max_position_embeddings=24)
    head = BertClassifier(BertEncoder(config), num_classes=2)
    model_dir = save_finetuned(str(tmp_path / "model"), FinetunedModel(
        kind="classification", model=head, vocab_file=str(vocab), seq_length=16, labels=["neg", "pos"],
        lowercase=False))
    save_pretrained(head.encoder, str(tmp_path / "encoder.keras"), vocab_file=str(vocab),
                    tokenizer_settings={"lowercase": False, "strip_accents": False})
    return model_dir, str(tmp_path / "encoder.keras")
