"""plait: declarative deep learning that scales from a laptop to a Ray cluster.

Importing ``plait`` stays cheap (no torch): :class:`Model` is loaded on first use.
"""

from plait.errors import ConfigError, DataError, ModelError, PlaitError

__version__ = "0.1.0"
__all__ = ["Model", "hyperopt", "auto_train", "PlaitError", "ConfigError", "DataError", "ModelError", "__version__"]


def __getattr__(name: str):
    if name == "Model":
        from plait.api import Model

        return Model
    if name == "hyperopt":  # the search of a config's hyperopt section (plait.search)
        from plait.search import hyperopt

        return hyperopt
    if name == "auto_train":  # Ludwig's AutoML (plait.automl)
        from plait.automl.train import auto_train

        return auto_train
    raise AttributeError(f"module 'plait' has no attribute {name!r}")
