"""Ctrl-C during training: every worker stops at the same step and they save one checkpoint
together, or none is saved.

A checkpoint is a collective (barriers, gathered weights), so a worker that saved alone while
the others kept training would hang. The SIGINT handler therefore only records the request; the
training loop's per-step all-reduce (:func:`plait.training.batches.lockstep`) carries it to every
worker, and all of them leave the loop after the same step.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from plait.errors import PlaitError
from plait.training.batches import count_flags


class TrainingInterrupted(PlaitError):
    exit_code = 130


class StopRequest:
    """Whether training should stop because someone pressed Ctrl-C, or save a checkpoint now
    and go on (a node about to be preempted).

    ``requested``: this worker was interrupted. ``agreed``: some worker was, and every worker
    knows it at the same step (set by the step's all-reduce, or by :meth:`agree`). The same
    pair for a checkpoint: ``checkpoint_requested`` (set by a watcher thread, such as
    :mod:`plait.backends.ray.preemption`) and ``checkpoint_agreed``."""

    def __init__(self):
        self.requested = False
        self.agreed = False
        self.checkpoint_requested = False
        self.checkpoint_agreed = False
        self._previous = None

    @contextlib.contextmanager
    def on_sigint(self):
        """While the block runs, Ctrl-C sets ``requested`` instead of raising KeyboardInterrupt;
        the handler that was there before comes back afterwards, or at the first Ctrl-C, so a
        second one aborts at once. Only in the main thread (the only one Python gives signals
        to), and not where SIGINT is ignored or was set outside Python."""
        previous = signal.getsignal(signal.SIGINT)
        if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
            yield self
            return
        self._previous = previous
        signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield self
        finally:
            if signal.getsignal(signal.SIGINT) == self._on_sigint:
                signal.signal(signal.SIGINT, previous)

    def _on_sigint(self, signum, frame) -> None:
        # Nothing written here: a handler runs between two bytecodes of whatever the main thread
        # was doing, possibly inside a write to the same stream.
        self.requested = True
        signal.signal(signal.SIGINT, self._previous)

    def agree(self, strategy) -> bool:
        """Whether any worker asked to stop, known to all (one all-reduce unless already agreed;
        every worker must call it at the same point)."""
        if not self.agreed:
            self.agreed = count_flags(strategy, [self.requested])[0] > 0
        return self.agreed
