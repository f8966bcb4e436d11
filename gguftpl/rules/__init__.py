"""Every rule gguftpl can report, one module per code range, each rule beside its documentation.

Importing this package registers every rule (``findings.all_rules()``); checkers import the Rule objects
from the module of their range.
"""

from __future__ import annotations

from gguftpl.rules.container import (  # noqa: F401
    AUDIT_FAILED,
    METADATA_WRONG_TYPE,
    TRUNCATED_TENSOR_DATA,
    UNREADABLE_GGUF,
)
from gguftpl.rules.llamacpp import (  # noqa: F401
    LLAMACPP_CALL_NOT_PARSED,
    LLAMACPP_CHATML_FALLBACK,
    LLAMACPP_HF_MISMATCH,
    LLAMACPP_LOAD_FAILED,
    LLAMACPP_RENDER_BOMB,
    LLAMACPP_RESULT_NOT_RENDERED,
    LLAMACPP_TEMPLATE_REJECTED,
    LLAMACPP_TOOLS_DROPPED,
)
from gguftpl.rules.repo import (  # noqa: F401
    REPO_MODELS_GROUPED,
    REPO_SPECIAL_TOKENS_DIFFER,
    REPO_SPLIT_INCOMPLETE,
    REPO_TEMPLATE_DIFFERS,
    REPO_TEMPLATE_MISSING,
    REPO_UPSTREAM_DRIFT,
    REPO_UPSTREAM_UNKNOWN,
)
from gguftpl.rules.runtimes import (  # noqa: F401
    OLLAMA_ADVERTISES_UNRENDERED_TOOLS,
    OLLAMA_SUBSTITUTES_TEMPLATE,
)
from gguftpl.rules.safety import (  # noqa: F401
    HIDDEN_TRIGGER,
    HUGE_RANGE,
    INVISIBLE_UNICODE,
    RENDER_RESOURCE_LIMIT,
    SANDBOX_ESCAPE,
)
from gguftpl.rules.template import (  # noqa: F401
    MESSAGE_DROPPED,
    NO_CHAT_TEMPLATE,
    SYSTEM_ROLE_UNSUPPORTED,
    TEMPLATE_PARSE_ERROR,
    TEMPLATE_RENDER_ERROR,
)
from gguftpl.rules.tokens import (  # noqa: F401
    DOUBLE_BOS,
    END_OF_TURN_NOT_EOG,
    MARKER_NOT_CONTROL,
    MARKER_NOT_IN_VOCAB,
)
from gguftpl.rules.tools import (  # noqa: F401
    CALL_ID_IN_PLACE_OF_NAME,
    DEFAULT_IGNORES_TOOLS,
    NO_GENERATION_PROMPT,
    TOOL_CALL_DIALECT,
    TOOL_CALLS_NOT_RENDERED,
    TOOL_DATA_AS_PYTHON_REPR,
    TOOL_RESULTS_NOT_RENDERED,
    TOOLS_NOT_RENDERED,
    TOOLS_PARTIALLY_RENDERED,
)
from gguftpl.rules.upstream import (  # noqa: F401
    UPSTREAM_SPECIAL_TOKENS_DIFFER,
    UPSTREAM_TEMPLATE_CHANGED,
    UPSTREAM_TEMPLATE_LOST,
)
