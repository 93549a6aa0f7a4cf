"""Test-session setup shared by every package's tests."""

import atexit
import os
import shutil
import tempfile

# Tests must never read or write the user's autotune cache (a developer's `make demo` fills it).
if "HELION_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="helion-test-cache-")
    os.environ["HELION_CACHE_DIR"] = _cache_dir
    # removed at exit, so repeated test runs do not pile cache directories up in the temp dir
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
