"""The device check's steps, one module each, run by ``check.py`` in a process of their own.

Each module has ``run(recorder, context)``, which runs its parts through ``recorder.part`` (see
``record.py``) and sets a one-line ``summary``. Modules import torch, plait and the rest inside
their functions, where a failing import is one part's finding.
"""
