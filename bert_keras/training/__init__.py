"""Pretraining machinery: optimizer, distribution strategy, mixed precision, callbacks, the fit loop.

Example:

>>> from bert_keras.training import create_optimizer
>>> optimizer = create_optimizer(num_train_steps=1000, num_warmup_steps=100)
"""

from bert_keras.training.backup import RunBackup, resumed_step
from bert_keras.training.callbacks import StepCheckpoint, ThroughputLogger
from bert_keras.training.loop import PretrainingResult, run_pretraining
from bert_keras.training.optimizer import BertAdamW, WarmupLinearDecay, create_optimizer
from bert_keras.training.precision import apply_policy, choose_policy
from bert_keras.training.run_directory import RunDirectoryError
from bert_keras.training.strategy import StrategyError, check_tf_config, get_strategy, is_chief

__all__ = [
    "BertAdamW",
    "PretrainingResult",
    "RunBackup",
    "RunDirectoryError",
    "StepCheckpoint",
    "StrategyError",
    "ThroughputLogger",
    "WarmupLinearDecay",
    "apply_policy",
    "check_tf_config",
    "choose_policy",
    "create_optimizer",
    "get_strategy",
    "is_chief",
    "resumed_step",
    "run_pretraining",
]
