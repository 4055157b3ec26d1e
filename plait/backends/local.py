"""The local backend: everything in this process."""

from __future__ import annotations

from plait.backends.base import Backend
from plait.data.engines import get_engine


class LocalBackend(Backend):
    name = "local"

    def __init__(self, config):
        self.config = config

    def data_engine(self):
        return get_engine("local")
