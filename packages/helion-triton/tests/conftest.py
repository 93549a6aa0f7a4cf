"""Shared fixtures of the helion-triton tests.

The kernels under test live in ``kernels.py`` beside this file. Tests run on CPU through the
Triton interpreter, and on CUDA as well where a GPU is present.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def triton_backend_registered():
    """Make sure the backend is there when the package is on sys.path but not installed (as on
    a machine that only has a checkout): register the plugin module by hand."""
    from helion import backends
    from helion import plugins

    if "triton" not in {b.name for b in backends.list_backends()}:
        import helion_triton.plugin

        plugins.register_plugin(
            helion_triton.plugin, "triton-checkout", distribution="helion-triton"
        )
    yield


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture
def descriptors_on_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter implements tensor descriptors: let the generator use them on CPU."""
    from helion_triton.target import TritonTarget

    monkeypatch.setattr(
        TritonTarget,
        "supports_tensor_descriptor",
        property(lambda self: self.has_tensor_descriptor),
    )
