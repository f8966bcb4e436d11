"""The engines runtimes render chat templates with, one adapter each, all with one interface (:mod:`.base`).

Below ``templates/`` and ``verify/``: an adapter imports only :mod:`gguftpl.worker`, :mod:`gguftpl.errors`,
:mod:`gguftpl.limits` and its own engine. Which runtime uses which engine, configured how, is
:mod:`gguftpl.runtimes.profiles`.

| id | engine | used by |
|---|---|---|
| ``transformers`` | jinja2 as transformers' ``apply_chat_template`` sets it up | vLLM, SGLang |
| ``llamacpp`` | llama.cpp's C++ Jinja (xllamacpp), caps probe, autoparser | llama-server, Goose, Jan, Ollama |
| ``hfjs`` | ``@huggingface/jinja`` under Node.js | LM Studio |
| ``minijinja/<runtime>`` | minijinja configured as that runtime configures it | TGI, mistral.rs, Dynamo |
| ``ollama`` | Go ``text/template`` with Ollama's functions and data | Ollama's TEMPLATE |
"""
