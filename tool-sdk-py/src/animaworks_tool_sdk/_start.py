"""The script the runner starts for every ``.py`` tool: ``PYTHON .../animaworks_tool_sdk/_start.py TOOL.py ...``.

Why a separate script: Python compiles the script it starts on every run and caches only what it imports. This
file is a few lines; the shim (``_shim.py``, same arguments, see there) is imported, so its byte code is cached
in ``__pycache__`` after the first call (about 1.5 ms a call saved).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# sys.path[0] is this package's own folder, which would make its private modules importable as top-level names.
# Put the package's parent first instead, so `animaworks_tool_sdk` is this embedded copy.
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    sys.path[0] = os.path.dirname(_HERE)
else:
    sys.path.insert(0, os.path.dirname(_HERE))

from animaworks_tool_sdk._shim import main  # noqa: E402

# Why: the interpreter's last garbage collections at exit walk every object it holds, most of them made by `site`
# and the standard library before the tool was even loaded: a measurable part of every call (bench/README.md).
# Frozen here, those are left out of every collection; what the tool's module makes, from its import on,
# is collected and finalized as before, unless a cycle holds it through one of the frozen objects.
import gc  # noqa: E402

gc.freeze()

sys.exit(main(sys.argv[1:]))
