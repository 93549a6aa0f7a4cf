"""Test-session setup shared by every package's tests."""

import os
import tempfile

# Tests must never read or write the user's autotune cache (a developer's `make demo` fills it).
os.environ.setdefault("HELION_CACHE_DIR", tempfile.mkdtemp(prefix="helion-test-cache-"))
