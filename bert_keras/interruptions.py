"""Interruptions of a long command: Ctrl-C, SIGTERM, and an interrupt TensorFlow turned into
another error. Plain Python (no TensorFlow), shared by the command line and the library's
`after_saving` (`bert_keras.tasks.finetuning_run`).
"""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, a scheduler or a container stopping the job) during a training command:
    it stops as Ctrl-C stops it (the last backup stays whole; the same command resumes from it),
    says so, and exits with 143 (128 + 15, the shell's status for SIGTERM)."""


def interrupt_behind(error):
    """The Ctrl-C (or SIGTERM's `Terminated`) that TensorFlow turned into another exception, or None.

    An interrupt that lands inside TensorFlow's C++ (`tf.saved_model.save` tracing) can surface as
    the error it caused while unwinding ("Nesting violated for default stack", then a TypeError),
    or as pybind11's "error_already_set: MISMATCH ... REPLACED BY KeyboardInterrupt": the command
    was interrupted, and says so, instead of printing that traceback.

    >>> try:
    ...     try:
    ...         raise KeyboardInterrupt
    ...     except KeyboardInterrupt:
    ...         raise AssertionError("Nesting violated for default stack")
    ... except AssertionError as error:
    ...     type(interrupt_behind(error)).__name__
    'KeyboardInterrupt'
    >>> interrupt_behind(ValueError("bad file")) is None
    True
    """
    seen = set()
    cause = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, KeyboardInterrupt):
            return cause
        if isinstance(cause, RuntimeError) and "REPLACED BY" in str(cause):
            replaced_by = str(cause).rsplit("REPLACED BY", 1)[1]
            if "Terminated" in replaced_by:
                return Terminated()
            if "KeyboardInterrupt" in replaced_by:
                return KeyboardInterrupt()
        cause = cause.__cause__ or cause.__context__
    return None
