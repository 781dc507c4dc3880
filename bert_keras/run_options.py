"""The options of a training run, one record per command: pretraining, fine-tuning, distillation.

Each field is a keyword argument of the Python call it configures, with the same default
(`Pretrainer.pretrain`, `tasks.finetuning.finetune`, `tasks.distillation.distill_directory`; a
test holds them equal), and a flag of the `bert-keras` command (`pipelines.command_options`): the
command line reads its defaults and help from here. Plain Python: `--help` imports no TensorFlow.

>>> options = FinetuningOptions(epochs=2, seed=1)
>>> options.learning_rate is None, options.warmup_ratio   # None: chosen by the data's size
(True, 0.1)
"""

import dataclasses
from typing import Optional

from pipelines.command_options import option
from pipelines.pretraining.settings import MaskingSettings

STRATEGIES = ("auto", "default", "mirrored", "multiworker", "tpu")


@dataclasses.dataclass(frozen=True)
class PretrainingOptions(MaskingSettings):
    """`bert-keras pretrain` / `Pretrainer.pretrain`: the model, the schedule, the machine, the checkpoints,
    and how `--input` text is masked (`MaskingSettings`: `create-pretraining-data`'s own flags)."""

    steps: int = option(help="total optimizer steps", type="positive_int")
    config: str = option("base", "model size (tiny, mini, small, medium, base, large) or a config JSON (ours, "
                                 "google or HF); ignored with --init (default base)", metavar="NAME|JSON")
    init: Optional[str] = option(None, "start from these weights (encoder + pretraining heads when present): "
                                       "hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras",
                                 metavar="SPEC")
    seq_length: Optional[int] = option(None, "tokens per example (default: the records' --seq-length, "
                                             "from create-pretraining-data; with --input 128)", None,
                                       "--max-seq-length", type="pair_sequence_length")
    max_predictions: Optional[int] = option(None, "masked positions per example (default: the records' "
                                                  "--max-predictions; with --input 20)", None,
                                            "--max-predictions-per-seq", type="positive_int")
    batch_size: int = option(32, "examples per step over all replicas (default 32)", None, "--global-batch-size",
                             type="positive_int")
    learning_rate: float = option(1e-4, "peak learning rate (default 1e-4)", type="positive_float")
    warmup_steps: Optional[int] = option(None, "linear warmup (default 10%% of --steps)", metavar="N")
    weight_decay: float = option(0.01, "AdamW weight decay (default 0.01)")
    strategy: str = option("auto", "tf.distribute strategy (default auto: TPU, else all GPUs, else one device)",
                           choices=STRATEGIES)
    tpu: Optional[str] = option(None, "TPU name or address (with --strategy tpu/auto)", metavar="NAME")
    steps_per_execution: int = option(1, "steps per tf.function call (default 1)", type="positive_int")
    mixed_precision: str = option("auto", "default auto: bfloat16 on TPU, float16 on GPU, off on CPU",
                                  choices=("auto", "off", "float16", "bfloat16"))
    jit_compile: str = option("auto", "XLA compilation (default auto: Keras' choice; off under distribution strategies)",
                              choices=("auto", "on", "off"))
    checkpoint_every: int = option(1000, "steps between checkpoints and resume backups (default 1000)",
                                   type="positive_int")
    keep_checkpoints: int = option(3, "checkpoints kept (default 3)", type="positive_int")
    seed: int = option(0, "seed of initialisation, dropout, data order and masking (default 0): the same seed "
                          "prints the same losses", type="seed")
    overwrite: bool = option(False, "start afresh in a non-empty --output-dir that is not this run: removes the "
                                    "outputs of the pretraining run recorded there (checkpoints, backup, logs, "
                                    "encoder); never your other files, nor a file this run reads")


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """The run options `finetune` and `distill` share: one name, default and help for each."""

    epochs: float = option(3, "training epochs (default 3)", type="non_negative_float")
    batch_size: Optional[int] = option(None, "batch size (default by data size: 16 under 1,000 examples, else 32)",
                                       type="positive_int")
    learning_rate: Optional[float] = option(
        None, "peak learning rate (default by data size: 1e-4 under 1,000 examples, else 2e-5, the BERT paper's)",
        type="positive_float")
    max_steps: Optional[int] = option(None, "stop after this many steps (quick runs)", type="positive_int")
    checkpoint_every: Optional[int] = option(
        None, "back up the run every STEPS steps (default: every epoch) in DIR/.finetune-run; after Ctrl-C or a "
              "kill, the same command resumes", metavar="STEPS", type="positive_int")
    seed: int = option(0, "the random seed (default 0)", type="seed")
    evaluate: bool = option(True, "skip the final dev evaluation", "--no-eval")


@dataclasses.dataclass(frozen=True)
class FinetuningOptions(TrainingOptions):
    """`bert-keras finetune` / `tasks.finetuning.finetune`: `TrainingOptions` and the fine-tuning run's own."""

    warmup_ratio: float = option(0.1, "warmup fraction (default 0.1)", type="fraction")
    strategy: str = option("auto", "tf.distribute strategy (default auto: TPU, else all GPUs, else one device)",
                           choices=STRATEGIES)
    tpu: Optional[str] = option(None, "TPU name/address for --strategy tpu")
    tune_threshold: bool = option(False, "SQuAD v2.0: keep the dev set's best null threshold (best_f1_thresh) "
                                         "for predict and export (default: 0.0, as run_squad.py)")


@dataclasses.dataclass(frozen=True)
class DistillationOptions(TrainingOptions):
    """`bert-keras distill` / `tasks.distillation.distill_directory`: `TrainingOptions` and the student's."""

    layers: Optional[int] = option(None, "the student's transformer layers, picked evenly from the teacher's "
                                         "(required unless --init: then all of its layers)", type="positive_int")
    init: Optional[str] = option(None, "start from this smaller pretrained encoder (same vocabulary) instead of "
                                       "the teacher's layers (needed for another hidden size)", metavar="SPEC")
    hidden_size: Optional[int] = option(None, "the student's hidden size (with --init)", type="positive_int")
    temperature: float = option(2.0, "soft-target temperature (default 2)", type="positive_float")
    alpha: Optional[float] = option(None, "weight of the data's labels (default 0.5; 0: the teacher's outputs "
                                          "only, and --data may be a file of texts alone)", type="fraction")
    augment: Optional[int] = option(None, "also distil on N copies of each batch with 10%% of the tokens masked "
                                          "(N+1 times the step cost; default 2 below 20,000 examples)",
                                    metavar="N")
    validation_split: float = option(0.0, "hold out this last share of --data (before shuffling) and report the "
                                          "distillation loss on it after every epoch, as val_loss (as Keras' "
                                          "validation_split; default 0: none)", type="held_out_fraction",
                                     metavar="SHARE")
    hidden_weight: float = option(0.0, "weight of TinyBERT's hidden-state loss: each student block's output "
                                       "against its teacher block's (default 0: off; runs both encoders once "
                                       "more per step)", type=float, metavar="W")
    unlabelled: Optional[str] = option(
        None, "also distil on this UTF-8 file's texts, without labels (one per line; a pair as 'A<TAB>B' or "
              "'A ||| B'; NER: a sentence, split at spaces): each step reads a batch of the data and one of "
              "these, as DistilBERT and TinyBERT distil on more text than the labelled set", metavar="FILE")
