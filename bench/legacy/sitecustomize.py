# AnimaWorks 0.15.0 declares Python >= 3.12; on 3.11 its TypedDict uses need typing_extensions.TypedDict.
# setup-legacy-venv copies this file into the venv's site-packages (as good as putting it on PYTHONPATH).
import typing

import typing_extensions

typing.TypedDict = typing_extensions.TypedDict
