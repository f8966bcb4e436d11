"""Verification through llama.cpp itself (``xllamacpp``, in-process) and the tools a user really runs.

- :mod:`~gguftpl.engines.llamacpp_choice` which template llama.cpp renders a request with (the one place that decides)
- :mod:`~gguftpl.engines.llamacpp_session` one in-process llama.cpp server for one GGUF (a stand-in by default:
  :mod:`~gguftpl.engines.llamacpp_standin`)
- :mod:`~gguftpl.verify.stages` the five verify stages, :mod:`~gguftpl.verify.result` what they found
- :mod:`~gguftpl.verify.calltext` a tool call in the template's own dialect, cut out of llama.cpp's render
- :mod:`~gguftpl.verify.compare` llama.cpp's prompt against transformers'
- :mod:`~gguftpl.verify.preflight` and :mod:`~gguftpl.engines.llamacpp` keep templates that hang or crash
  llama.cpp out of this process
- :mod:`~gguftpl.verify.live` ``verify --live``: the real weights answer (served from a bounded child,
  :mod:`~gguftpl.engines.llamacpp_child`), and :mod:`~gguftpl.verify.callshape` names the shape of a call the model
  wrote that llama.cpp did not parse
- :mod:`~gguftpl.verify.render` what ``gguftpl render`` prints
- :mod:`~gguftpl.verify.findings` GT6xx findings for ``audit --engine llamacpp``
- tools: :mod:`~gguftpl.verify.tools` (tool lists), :mod:`~gguftpl.verify.mcp` (MCP client),
  :mod:`~gguftpl.verify.toolsources` (both, as a host offers them), :mod:`~gguftpl.verify.schema`,
  :mod:`~gguftpl.verify.toolcheck`, :mod:`~gguftpl.verify.roundtrip`

Importing this package loads nothing heavy; each module imports xllamacpp, transformers or mcp only in the
functions that need them.
"""
