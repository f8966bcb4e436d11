"""What each runtime does with a GGUF's chat templates: llama.cpp, runtimes that read only the default
(LM Studio, vLLM, other OpenAI-compatible servers) and Ollama (its own registry, ``ollama_templates/``).

``view``: the runtime view of one file (a fact the rules and reports read); ``ollama``: Ollama's template
choice; ``toolsdefault``: a default template that carries the tools (``patch --tools-in-default``);
``profiles``: per runtime, which template, engine, tools gate, ignored-tools behaviour and parser (data, with
sources); ``toolprompts``: the tool prompts LM Studio, TGI and Goose write themselves.
"""
