"""Errors raised while reading checkpoints or loading them into an encoder."""


class CheckpointFormatError(ValueError):
    """A checkpoint file is unreadable, truncated, or contradicts itself/its config."""


class CheckpointMismatchError(ValueError):
    """Checkpoint weights do not fit the model: names missing, unexpected, or mis-shaped.

    Either pass a ready message, or the lists and let the message list them all:

    >>> str(CheckpointMismatchError(missing=["bert/pooler/dense/bias"]))
    "checkpoint does not match the encoder: missing: ['bert/pooler/dense/bias']"

    Args:
        message: str, optional. The whole message; built from the lists if omitted.
        missing: names the model needs but the checkpoint lacks.
        unexpected: names the checkpoint has but the model does not.
        shape_mismatches: `(name, expected_shape, got_shape)` triples.

    The three lists stay available as attributes of the same names.
    """

    def __init__(self, message=None, *, missing=(), unexpected=(), shape_mismatches=()):
        self.missing = sorted(missing)
        self.unexpected = sorted(unexpected)
        self.shape_mismatches = list(shape_mismatches)
        if message is None:
            parts = []
            if self.missing:
                parts.append(f"missing: {self.missing}")
            if self.unexpected:
                parts.append(f"unexpected: {self.unexpected}")
            if self.shape_mismatches:
                parts.append(
                    "shape mismatch: "
                    + ", ".join(
                        f"{name} expected {tuple(want)} got {tuple(got)}"
                        for name, want, got in self.shape_mismatches
                    )
                )
            message = "checkpoint does not match the encoder: " + "; ".join(parts)
        super().__init__(message)


def reject_or_drop_unused(source, unused, *, strict, what="tensor(s)"):
    """Reports checkpoint entries that neither the encoder nor its pretraining heads use.

    With `strict` they are an error that lists them (a fine-tuned task head is
    the usual cause); otherwise they are dropped with a warning that lists them.
    Shared by every reader, so the message is the same for every format.
    """
    if not unused:
        return
    message = (
        f"{source}: {len(unused)} {what} not used by the BERT encoder or its "
        f"pretraining heads: {sorted(unused)}"
    )
    if strict:
        raise CheckpointMismatchError(
            message + " (a fine-tuned task head? pass strict=False / --no-strict to drop them)",
            unexpected=unused,
        )
    import warnings

    warnings.warn(message + "; dropped", stacklevel=3)
