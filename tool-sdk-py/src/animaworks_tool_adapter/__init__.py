"""The AnimaWorks adapter: AnimaWorks' own server asks the runner instead of importing tool modules.

AnimaWorks 0.15 imports every common and personal tool module inside its server process: to list their schemas
(every agent cycle), to call them (the dispatcher's fallback, ``use_tool``) and to read their ``EXECUTION_PROFILE``
(every gate check). Installed into AnimaWorks' virtualenv (``animaworks-tool animaworks install --venv DIR``), a
``.pth`` hook patches those functions right after their modules are imported, so that each asks the runner: the
schemas and profiles from its cache (a cold module is probed confined), the calls through a long-lived
``use-tool --serve``. Nothing of AnimaWorks' files is changed; an AnimaWorks the adapter does not know byte for
byte is left as it is, with a warning in its log. Standard library only.
"""

ADAPTER_VERSION = "1"
