"""Test-session setup shared by every package's tests."""

import atexit
import contextlib
import os
import shutil
import tempfile

# Tests must never read or write the user's autotune cache (a developer's `make demo` fills it).
if "HELION_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="helion-test-cache-")
    os.environ["HELION_CACHE_DIR"] = _cache_dir
    # removed at exit, so repeated test runs do not pile cache directories up in the temp dir
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)

# On a GPU machine, `HELION_TEST_DEVICE=cuda` makes the tests' own tensor factories (torch.randn,
# torch.tensor, ...) allocate there, so CPU-written tests such as test_torch_ops.py also check the
# compiled GPU code (benchmarks/gpu_session.sh verify); the CPU run (no variable) is the one CI
# checks.
if os.environ.get("HELION_TEST_DEVICE"):
    import torch

    torch.set_default_device(os.environ["HELION_TEST_DEVICE"])

# Triton wraps its library functions (tl.cdiv, tl.sum, ...) when triton.language is first
# imported, as interpreted functions if TRITON_INTERPRET=1 is set then. Some tests set it for
# a while; had Triton's first import fallen inside one, a later import of its gluon module (the
# compile path) asserts on the interpreted functions, failing unrelated Triton tests by order.
with contextlib.suppress(ImportError):  # core's isolated venv has no Triton
    import triton.language  # noqa: F401
