"""The Korean BERT of docs/korean.md, pretrained on a GPU machine that has PyTorch but no TensorFlow.

`examples/korean_bert.py` pretrains with `Pretrainer` on this project's own stack; on two CPU cores
that budget ends at a 2-layer model. This script moves only the pretraining steps to a GPU, keeping
everything else of the recipe: the vocabulary and the pretraining instances come from
`bert_keras` (`create-pretraining-data`), and the encoder comes back as a Hugging Face BERT
directory that `TextClassifier.from_pretrained(DIR)` and `examples/korean_bert.py --init DIR` read.

1. `pack` (here, TensorFlow): the records and NSMC as compact arrays to copy to the GPU machine.
2. `pretrain` (there, PyTorch + transformers): BERT's MLM + NSP on those instances. Masks are drawn
   anew at each read with BERT's rule (15% of the non-special pieces, at most 19 a sequence; 80%
   [MASK], 10% a random piece, 10% unchanged), as RoBERTa's dynamic masking does: a run of minutes
   on a GPU reads each instance many times. bf16 autocast, AdamW (decay 0.01, not on biases or
   LayerNorm), warmup over 6% of the steps then linear decay, clipping at 1.0. The number of steps
   is set by `--seconds` (timed over steps 10-30). Writes the encoder as float16 shards of < 16
   MiB and, as a quick check, fine-tunes NSMC there.
3. `merge` (here): the shards as one float32 `model.safetensors`, with `config.json`, `vocab.txt`
   and `tokenizer_config.json` (`do_lower_case=True, strip_accents=False`: Hangul kept whole).

    python examples/korean_bert.py --data ../shared/data/korean --workdir runs/korean --variant plain \\
        --domain-text --steps-only vocab records
    python benchmarks/korean_gpu_pretraining.py pack runs/korean/plain runs/gpu \\
        --nsmc ../shared/data/korean/nsmc/ratings_train.txt
    # on the GPU machine, with runs/gpu and this script copied there:
    python korean_gpu_pretraining.py pretrain runs/gpu --out OUT --seconds 330 --batch 512 --lr 8e-4
    python benchmarks/korean_gpu_pretraining.py merge OUT runs/gpu runs/korean-gpu/encoder-hf
    python examples/korean_bert.py --data ../shared/data/korean --workdir runs/korean-gpu --variant plain \\
        --init runs/korean-gpu/encoder-hf --finetune-learning-rate 5e-5 --nsmc-epochs 2
"""

import argparse
import glob
import json
import os
import shutil
import time

import numpy as np

MAX_PREDICTIONS = 19  # round(0.15 * 128): what the records were written with
NSMC_DEV_ROWS = 10_000  # the last rows of ratings_train.txt, as examples/korean_bert.py


def empty_folder(path, flag):
    """`path`, made if missing; a folder that already holds files is refused (nothing is written over)."""
    if os.path.isdir(path) and os.listdir(path):
        raise SystemExit(f"{flag} {path}: the folder is not empty; give a new folder (nothing there is replaced)")
    os.makedirs(path, exist_ok=True)
    return path


def pack(args):
    """Records -> pretrain.npz (the masks undone: the original pieces at masked_lm_positions) and
    NSMC -> nsmc.npz (pieces of the same vocabulary), plus vocab.txt."""
    import tensorflow as tf

    from pipelines.pretraining.contract import feature_spec

    seq = args.seq_length
    spec = feature_spec(seq, MAX_PREDICTIONS)
    files = sorted(glob.glob(os.path.join(args.workdir, "records", "pt-*.tfrecord")))
    if not files:
        raise SystemExit(f"{args.workdir}/records: no pt-*.tfrecord (run examples/korean_bert.py --steps-only "
                         "vocab records first)")
    empty_folder(args.out, "out")
    dataset = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, spec)).batch(4096)
    ids, lengths, second, nsp = [], [], [], []
    for batch in dataset.as_numpy_iterator():
        tokens = batch["input_ids"].copy()
        rows = np.arange(len(tokens))[:, None].repeat(MAX_PREDICTIONS, 1)
        real = batch["masked_lm_weights"] > 0
        tokens[rows[real], batch["masked_lm_positions"][real]] = batch["masked_lm_ids"][real]
        ids.append(tokens.astype(np.uint16))
        lengths.append(batch["input_mask"].sum(1).astype(np.uint8))
        segment = batch["segment_ids"]
        second.append(np.where(segment.any(1), segment.argmax(1), seq).astype(np.uint8))
        nsp.append(batch["next_sentence_labels"][:, 0].astype(np.uint8))
    lengths = np.concatenate(lengths)
    np.savez_compressed(os.path.join(args.out, "pretrain.npz"), input_ids=np.concatenate(ids), lengths=lengths,
                        second_start=np.concatenate(second), next_sentence_labels=np.concatenate(nsp))
    print(f"pretrain.npz: {len(lengths):,} instances, {int(lengths.sum()):,} pieces from {len(files)} files")
    shutil.copy(os.path.join(args.workdir, "vocab.txt"), args.out)

    from pipelines.tokenizer.bert_tokenizer import BertTokenizer

    # 100: the word length limit the merged HF directory is read with (`merge`), here and by transformers
    tokenizer = BertTokenizer(vocab_file=os.path.join(args.workdir, "vocab.txt"), lowercase=True,
                              strip_accents=False, max_input_chars_per_word=100)
    with open(args.nsmc, encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:]]
    is_dev = np.arange(len(rows)) >= len(rows) - NSMC_DEV_ROWS
    keep = [i for i, row in enumerate(rows) if len(row) == 3 and row[1].strip()]
    encoded = tokenizer.tokenize([rows[i][1] for i in keep]).to_list()
    offsets = np.zeros(len(keep) + 1, np.int64)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    np.savez_compressed(os.path.join(args.out, "nsmc.npz"), ids=np.concatenate(encoded).astype(np.uint16),
                        offsets=offsets, labels=np.array([int(rows[i][2]) for i in keep], np.int64),
                        is_dev=is_dev[keep])
    print(f"nsmc.npz: {len(keep):,} reviews ({int(is_dev[keep].sum()):,} dev), {offsets[-1]:,} pieces")


def pretrain(args):
    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file
    from transformers import BertConfig, BertForPreTraining, BertForSequenceClassification

    empty_folder(args.out, "--out")  # before minutes of training, not after
    started = time.time()

    def log(message):
        print(f"[{time.time() - started:7.1f}s] {message}", flush=True)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = device == "cuda"
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    with open(os.path.join(args.data, "vocab.txt"), encoding="utf-8") as f:
        vocab = f.read().splitlines()
    special = {token: vocab.index(token) for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    first_word = max(special.values()) + 1
    data = np.load(os.path.join(args.data, "pretrain.npz"))
    ids = torch.from_numpy(data["input_ids"].astype(np.int64)).to(device)
    lengths = torch.from_numpy(data["lengths"].astype(np.int64)).to(device)
    second_start = torch.from_numpy(data["second_start"].astype(np.int64)).to(device)
    nsp = torch.from_numpy(data["next_sentence_labels"].astype(np.int64)).to(device)
    count, seq = ids.shape
    positions = torch.arange(seq, device=device)
    log(f"{count:,} instances of {seq}, vocab {len(vocab):,}, "
        f"{torch.cuda.get_device_name() if cuda else 'cpu'}")

    config = BertConfig(vocab_size=len(vocab), hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                        max_position_embeddings=512, type_vocab_size=2, pad_token_id=special["[PAD]"])
    model = BertForPreTraining(config).to(device)
    log(f"model: {args.layers} layers x {args.hidden}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.98), eps=1e-6, fused=cuda)

    def masked_batch(index):
        """BERT's masking, drawn now; the masked positions' original pieces are the labels."""
        tokens, length = ids[index], lengths[index]
        real = positions[None, :] < length[:, None]
        candidate = real & (tokens != special["[CLS]"]) & (tokens != special["[SEP]"])
        wanted = torch.clamp(torch.round(candidate.sum(1) * 0.15), 1, MAX_PREDICTIONS)
        scores = torch.rand(tokens.shape, device=device).masked_fill(~candidate, -1.0)
        top = scores.topk(MAX_PREDICTIONS, dim=1).indices
        chosen = (torch.arange(MAX_PREDICTIONS, device=device)[None, :] < wanted[:, None])
        chosen &= torch.gather(candidate, 1, top)
        labels = torch.gather(tokens, 1, top)
        draw = torch.rand(top.shape, device=device)
        replacement = torch.where(draw < 0.8, torch.full_like(labels, special["[MASK]"]),
                                  torch.where(draw < 0.9, torch.randint_like(labels, first_word, len(vocab)), labels))
        masked = tokens.scatter(1, top, torch.where(chosen, replacement, labels))
        segments = ((positions[None, :] >= second_start[index][:, None]) & real).long()
        return masked, segments, real.long(), top, labels, chosen

    def losses(index):
        masked, segments, attention, top, labels, chosen = masked_batch(index)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
            sequence, pooled = model.bert(input_ids=masked, token_type_ids=segments, attention_mask=attention,
                                          return_dict=False)[:2]
            # the vocabulary projection at the masked positions only, as bert_keras' pretrainer does
            picked = torch.gather(sequence, 1, top[:, :, None].expand(-1, -1, sequence.shape[-1]))[chosen]
            logits = model.cls.predictions(picked).float()
            nsp_logits = model.cls.seq_relationship(pooled).float()
        mlm = F.cross_entropy(logits, labels[chosen])
        accuracy = (logits.argmax(-1) == labels[chosen]).float().mean()
        return mlm + F.cross_entropy(nsp_logits, nsp[index]), mlm, accuracy

    def learning_rate(step, total):
        warmup = max(1, int(0.06 * total))
        return args.lr * min(step / warmup, max(0.0, (total - step) / (total - warmup)))

    model.train()
    step, total, order, cursor, timer = 0, None, torch.randperm(count, device=device), 0, None
    while total is None or step < total:
        if cursor + args.batch > count:
            order, cursor = torch.randperm(count, device=device), 0
        index = order[cursor:cursor + args.batch]
        cursor += args.batch
        if step in (10, 30):
            if cuda:
                torch.cuda.synchronize()
            if step == 10:
                timer = time.time()
            else:
                per_step = (time.time() - timer) / 20
                total = max(40, int((args.seconds - (time.time() - started)) / per_step))
                log(f"{per_step * 1000:.1f} ms a step: {total:,} steps "
                    f"({total * args.batch / count:.1f} passes over the instances)")
        for group in optimizer.param_groups:  # before the step count is known: the warmup's slope
            group["lr"] = learning_rate(step + 1, total) if total else args.lr * (step + 1) / 2000
        loss, mlm, accuracy = losses(index)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % 500 == 0 or step == total:
            log(f"step {step:,}: loss {loss.item():.3f}, masked-LM loss {mlm.item():.3f}, "
                f"accuracy {accuracy.item():.3f}")
    model.eval()
    with torch.no_grad():  # fresh masks over 8 batches
        accuracies = [losses(torch.arange(i * args.batch, (i + 1) * args.batch, device=device) % count)[2].item()
                      for i in range(8)]
    summary = {"steps": step, "batch": args.batch, "seq_length": seq, "peak_lr": args.lr, "layers": args.layers,
               "hidden": args.hidden, "pretraining_seconds": round(time.time() - started, 1),
               "masked_lm_accuracy": round(float(np.mean(accuracies)), 4)}
    log(f"pretraining: {summary}")

    state = {n: t.detach().to("cpu", torch.float16).contiguous() for n, t in model.bert.state_dict().items()}
    shards, current, size = [], {}, 0
    for name, tensor in state.items():  # shards of < 16 MiB: what a lent machine sends back
        if current and size + tensor.numel() * 2 > 15.5 * 2**20:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensor
        size += tensor.numel() * 2
    shards.append(current)
    for number, shard in enumerate(shards):
        save_file(shard, os.path.join(args.out, f"encoder-{number}.safetensors"))
    config.to_json_file(os.path.join(args.out, "config.json"))
    log(f"saved {len(shards)} shards")

    # a quick check there: NSMC, batch 32, lr 5e-5, warmup 10%, seq 64, bf16 autocast
    nsmc = np.load(os.path.join(args.data, "nsmc.npz"))
    flat, offsets, labels_all = nsmc["ids"].astype(np.int64), nsmc["offsets"], nsmc["labels"]
    is_dev = nsmc["is_dev"].astype(bool)

    def nsmc_batch(rows, width=64):
        batch = np.zeros((len(rows), width), np.int64)
        for i, row in enumerate(rows):
            piece = flat[offsets[row]:offsets[row + 1]][: width - 2]
            batch[i, : len(piece) + 2] = [special["[CLS]"], *piece, special["[SEP]"]]
        tensor = torch.from_numpy(batch).to(device)
        return tensor, (tensor != special["[PAD]"]).long()

    classifier = BertForSequenceClassification(BertConfig(**{**config.to_dict(), "num_labels": 2})).to(device)
    classifier.bert.load_state_dict(model.bert.state_dict())
    train_rows, dev_rows = np.flatnonzero(~is_dev), np.flatnonzero(is_dev)
    batch_size, peak = 32, 5e-5
    steps = args.nsmc_epochs * (len(train_rows) // batch_size)
    warmup = int(0.1 * steps)
    ft_optimizer = torch.optim.AdamW(classifier.parameters(), lr=peak, weight_decay=0.01, eps=1e-6, fused=cuda)
    rng, step = np.random.default_rng(args.seed), 0
    for epoch in range(args.nsmc_epochs):
        classifier.train()
        order = rng.permutation(train_rows)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            if time.time() - started > args.deadline:
                log(f"NSMC fine-tuning stopped at --deadline, step {step:,} of {steps:,}")
                break
            rows = order[start:start + batch_size]
            tokens, attention = nsmc_batch(rows)
            step += 1
            for group in ft_optimizer.param_groups:
                group["lr"] = peak * min(step / warmup, (steps - step) / (steps - warmup))
            with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
                logits = classifier(input_ids=tokens, attention_mask=attention).logits.float()
            loss = F.cross_entropy(logits, torch.from_numpy(labels_all[rows]).to(device))
            ft_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(classifier.parameters(), 1.0)
            ft_optimizer.step()
        classifier.eval()
        correct = 0
        with torch.no_grad():
            for start in range(0, len(dev_rows), 256):
                rows = dev_rows[start:start + 256]
                tokens, attention = nsmc_batch(rows)
                with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
                    predicted = classifier(input_ids=tokens, attention_mask=attention).logits.argmax(-1)
                correct += int((predicted.cpu().numpy() == labels_all[rows]).sum())
        summary[f"nsmc_epoch{epoch + 1}"] = round(correct / len(dev_rows), 4)
        log(f"NSMC epoch {epoch + 1}: dev accuracy {correct / len(dev_rows):.4f} ({len(dev_rows):,} reviews)")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def merge(args):
    """The float16 shards -> a float32 Hugging Face BERT directory."""
    from safetensors.numpy import load_file, save_file

    state = {}
    for path in sorted(glob.glob(os.path.join(args.shards, "encoder-*.safetensors"))):
        state.update({name: value.astype(np.float32) for name, value in load_file(path).items()})
    if not state:
        raise SystemExit(f"{args.shards}: no encoder-*.safetensors")
    state = {name: value for name, value in state.items() if not name.endswith("position_ids")}
    empty_folder(args.target, "target")
    save_file(state, os.path.join(args.target, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(args.shards, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["architectures"] = ["BertModel"]
    with open(os.path.join(args.target, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    shutil.copy(os.path.join(args.vocab_dir, "vocab.txt"), args.target)
    with open(os.path.join(args.target, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": True,
                   "tokenizer_class": "BertTokenizer", "model_max_length": 512}, f, indent=1)
    print(f"{len(state)} tensors, {sum(v.size for v in state.values()) / 1e6:.1f}M values -> {args.target}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="records and NSMC -> arrays (TensorFlow)")
    packing.add_argument("workdir", help="examples/korean_bert.py's variant folder (vocab.txt, records/)")
    packing.add_argument("out")
    packing.add_argument("--nsmc", required=True, help="NSMC's ratings_train.txt")
    packing.add_argument("--seq-length", type=int, default=128)
    training = commands.add_parser("pretrain", help="MLM + NSP on a GPU (PyTorch + transformers)")
    training.add_argument("data", help="the folder `pack` wrote")
    training.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    training.add_argument("--seconds", type=float, default=330, help="pretraining time: sets the step count")
    training.add_argument("--batch", type=int, default=512)
    training.add_argument("--lr", type=float, default=8e-4)
    training.add_argument("--layers", type=int, default=6)
    training.add_argument("--hidden", type=int, default=512)
    training.add_argument("--nsmc-epochs", type=int, default=2)
    training.add_argument("--deadline", type=float, default=1e9, help="stop the NSMC check at this many seconds")
    training.add_argument("--seed", type=int, default=0)
    merging = commands.add_parser("merge", help="the shards -> a Hugging Face BERT directory")
    merging.add_argument("shards")
    merging.add_argument("vocab_dir")
    merging.add_argument("target")
    args = parser.parse_args(argv)
    {"pack": pack, "pretrain": pretrain, "merge": merge}[args.command](args)


if __name__ == "__main__":
    main()
