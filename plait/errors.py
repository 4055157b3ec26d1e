"""Errors a user can cause and fix.

Every error here carries a message that says what went wrong, the value involved and what to do
about it. The CLI prints the message alone (no traceback) and exits with code 2. All of them keep
their constructor arguments in ``self.args`` so they pickle intact across process and Ray
boundaries.
"""

from __future__ import annotations


class PlaitError(Exception):
    """Base class for every error caused by user input (config, data, paths, settings)."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(PlaitError):
    """The config is invalid. ``problems`` lists every problem found, one line each."""

    def __init__(self, problems: list[str] | str):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        header = "invalid config" if len(self.problems) == 1 else f"invalid config ({len(self.problems)} problems)"
        super().__init__(header + ":\n" + "\n".join(f"  {p}" for p in self.problems))
        self.args = (self.problems,)


class UsageError(PlaitError):
    """An argument cannot be used as given: a command-line one (a missing --config, a URL where
    only a local path works) or a Python API one (``random_seed="x"``)."""


class DataError(PlaitError):
    """A dataset is missing, unreadable, empty or does not match the config."""


class CacheError(PlaitError):
    """The preprocessing cache cannot be read or written."""


class BackendError(PlaitError):
    """A backend cannot start or be reached (an unreachable Ray cluster, a missing package)."""


class ModelError(PlaitError):
    """A saved model is missing, not a plait model, or of an incompatible format."""


class TrainingError(PlaitError):
    """Training cannot go on (for example the loss became NaN)."""
