"""Choosing and building the model a session talks to.

A model is named by a spec string, `provider:model`, as users type it in `DEVAGENT_MODEL` or
`--model`. `create_model(spec)` turns it into a pydantic-ai `Model`; the agent loop then streams
from it with `model.request_stream(...)` (see docs/core-api.md and docs/scripted-model.md).

Importing this module is cheap on purpose: pydantic-ai and the provider SDKs (openai, anthropic,
google-genai) take a second or more to import, so they are imported inside `create_model`, and
only the one the spec names.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.models.errors import ModelConfigError
from devagent.patches import openai as openai_patches
from devagent.patches import openai_stream
from devagent.patches import pydantic_ai as pydantic_ai_patches

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.models.openai import OpenAIChatModel

__all__ = [
    "DEMO_SPEC",
    "PROVIDERS",
    "ProviderInfo",
    "canonical_provider",
    "check_model_spec",
    "create_model",
    "default_model_spec",
    "parse_model_spec",
    "shown_name",
]

DEMO_SPEC = "demo"

# Placeholder key for servers that accept any key (the OpenAI SDK refuses an empty one).
_NO_KEY = "none"


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What a provider prefix means: its environment variables and defaults."""

    name: str
    description: str
    key_env: tuple[str, ...] = ()  # checked in order; the first one set wins
    key_required: bool = True
    base_url_env: tuple[str, ...] = ()
    default_base_url: str | None = None
    local: bool = False  # an OpenAI-compatible server run by the user: no strict tool schemas


def _local_server(name: str, description: str, key_env: str, base_url_env: str, port: int) -> ProviderInfo:
    """An OpenAI-compatible server the user runs on this machine: its own key and URL variables
    first, then devagent's; no key needed; on its usual port of 127.0.0.1 by default."""
    return ProviderInfo(
        name,
        description,
        key_env=(key_env, "DEVAGENT_API_KEY"),
        key_required=False,
        base_url_env=(base_url_env, "DEVAGENT_BASE_URL"),
        default_base_url=f"http://127.0.0.1:{port}/v1",
        local=True,
    )


PROVIDERS: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(
        "openai", "OpenAI (Chat Completions)", key_env=("OPENAI_API_KEY",), base_url_env=("OPENAI_BASE_URL",)
    ),
    "anthropic": ProviderInfo("anthropic", "Anthropic", key_env=("ANTHROPIC_API_KEY",)),
    "google": ProviderInfo("google", "Google Gemini", key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "openai-compatible": ProviderInfo(
        "openai-compatible",
        "any OpenAI-compatible server",
        key_env=("DEVAGENT_API_KEY",),
        key_required=False,
        base_url_env=("DEVAGENT_BASE_URL",),
        local=True,
    ),
    "ollama": _local_server("ollama", "Ollama", "OLLAMA_API_KEY", "OLLAMA_BASE_URL", 11434),
    "vllm": _local_server("vllm", "vLLM", "VLLM_API_KEY", "VLLM_BASE_URL", 8000),
    "llamacpp": _local_server("llamacpp", "llama.cpp server", "LLAMACPP_API_KEY", "LLAMACPP_BASE_URL", 8080),
    "deepseek": ProviderInfo("deepseek", "DeepSeek", key_env=("DEEPSEEK_API_KEY",)),
    "moonshot": ProviderInfo(
        "moonshot",
        "Moonshot AI (Kimi)",
        key_env=("MOONSHOTAI_API_KEY", "MOONSHOT_API_KEY"),
        base_url_env=("MOONSHOTAI_BASE_URL",),
    ),
    "openrouter": ProviderInfo("openrouter", "OpenRouter", key_env=("OPENROUTER_API_KEY",)),
    "scripted": ProviderInfo(
        "scripted", "a scripted model played from a JSON file (offline)", key_required=False
    ),
}

_ALIASES = {"gemini": "google", "kimi": "moonshot", "llama.cpp": "llamacpp", "llama-cpp": "llamacpp"}

_SPEC_HELP = (
    "Use provider:model, e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5, google:gemini-2.5-flash, "
    "ollama:qwen3, openai-compatible:NAME (with --base-url or DEVAGENT_BASE_URL), scripted:FILE.json, "
    "or demo."
)


def canonical_provider(prefix: str) -> str | None:
    """A provider prefix as devagent names it (`gemini` -> `google`), None when it is unknown."""
    prefix = prefix.strip().lower()
    provider = _ALIASES.get(prefix, prefix)
    return provider if provider in PROVIDERS else None


def parse_model_spec(spec: str) -> tuple[str, str]:
    """Split `provider:name` into the canonical provider and the model name (or file for
    `scripted`). `demo` gives `("demo", "")`. Raises `ModelConfigError` for anything else."""
    spec = spec.strip()
    if spec == DEMO_SPEC:
        return DEMO_SPEC, ""
    prefix, sep, name = spec.partition(":")
    prefix = prefix.strip().lower()
    name = name.strip()
    if not sep:
        raise ModelConfigError(f"Model {spec!r} has no provider. {_SPEC_HELP}")
    provider = canonical_provider(prefix)
    if provider is None:
        known = ", ".join(sorted([*PROVIDERS, *_ALIASES, DEMO_SPEC]))
        raise ModelConfigError(f"Unknown model provider {prefix!r} in {spec!r}. Known providers: {known}.")
    if not name:
        what = "a script file" if provider == "scripted" else "a model name"
        raise ModelConfigError(f"Model {spec!r} is incomplete: give {what} after '{prefix}:'. {_SPEC_HELP}")
    return provider, name


# Context windows (tokens) of the providers' model families, by name prefix, longest first
# (the providers' published sizes); a model not listed, and any model of a local or
# OpenAI-compatible server, gets UNKNOWN_CONTEXT unless the operator sets `context_tokens`.
_CONTEXT_WINDOWS: dict[str, tuple[tuple[str, int], ...]] = {
    "openai": (
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("o4", 200_000),
        ("o3", 200_000),
        ("o1", 200_000),
    ),
    "anthropic": (("claude-", 200_000),),
    "google": (("gemini-1.5-pro", 2_097_152), ("gemini-", 1_048_576)),
    "deepseek": (("deepseek-", 128_000),),
    "moonshot": (("kimi-k2", 256_000), ("moonshot-v1-128k", 128_000)),
}
UNKNOWN_CONTEXT = 128_000


def context_window(spec: str) -> int:
    """The context window of a model spec, as far as devagent knows it (see `_CONTEXT_WINDOWS`)."""
    try:
        provider, name = parse_model_spec(spec)
    except ModelConfigError:
        return UNKNOWN_CONTEXT
    name = name.lower()
    for prefix, size in _CONTEXT_WINDOWS.get(provider, ()):
        if name.startswith(prefix):
            return size
    return UNKNOWN_CONTEXT


def shown_name(spec: str) -> str:
    """A model spec as clients see it: a scripted model by its file's name only, so the server's
    paths do not leak."""
    if spec.startswith("scripted:"):
        return "scripted:" + os.path.basename(spec[len("scripted:") :])
    return spec


def default_model_spec(environ: Mapping[str, str]) -> tuple[str, str]:
    """The model to use when none is given: `(spec, explanation)` for the user.

    `DEVAGENT_MODEL` wins; else the first provider whose API key is set; else the offline demo."""
    if model := environ.get("DEVAGENT_MODEL", "").strip():
        return model, f"Using {model} from DEVAGENT_MODEL."
    for env, spec in (
        ("OPENAI_API_KEY", "openai:gpt-4.1"),
        ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
        ("GEMINI_API_KEY", "google:gemini-2.5-flash"),
        ("GOOGLE_API_KEY", "google:gemini-2.5-flash"),
    ):
        if environ.get(env, "").strip():
            return spec, f"Using {spec} because {env} is set (set DEVAGENT_MODEL or pass --model to choose)."
    return DEMO_SPEC, (
        "No model configured: using the built-in offline demo model, which only shows how devagent works. "
        "To use a real model, set DEVAGENT_MODEL=provider:model (for example openai:gpt-4.1, "
        "anthropic:claude-sonnet-4-5 or ollama:qwen3) and that provider's API key (OPENAI_API_KEY, "
        "ANTHROPIC_API_KEY, GEMINI_API_KEY, ...), or pass --model."
    )


def check_model_spec(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str, str | None, str | None]:
    """What can be known about a spec without importing any provider: the provider is known,
    its API key and base URL are given, a script file exists. Returns (provider, name, key, url);
    raises `ModelConfigError` saying what to set. Cheap: servers call it before they listen."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    provider, name = parse_model_spec(spec)
    if provider == DEMO_SPEC:
        return provider, name, None, None
    if provider == "scripted":
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelConfigError(
                f"scripted model: cannot read {name}: no such file (give the path of a JSON script)."
            )
        return provider, name, None, None
    info = PROVIDERS[provider]
    key = api_key if api_key is not None else _first_env(env, info.key_env)
    url = base_url or _first_env(env, info.base_url_env) or info.default_base_url
    if info.key_required and not key:
        raise ModelConfigError(
            f"Model {spec!r} needs an API key for {info.description}: set {_either(info.key_env)} "
            "or pass --api-key."
        )
    if provider == "openai-compatible" and not url:
        raise ModelConfigError(
            f"Model {spec!r} needs the server's base URL: set DEVAGENT_BASE_URL "
            "(e.g. http://127.0.0.1:8000/v1) or pass --base-url."
        )
    return provider, name, key, url


def create_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    prompt_cache: bool = True,
) -> Model:
    """Build the pydantic-ai model a spec names.

    `base_url` and `api_key` (the `--base-url` / `--api-key` flags) override the environment.
    `environ` defaults to `os.environ` (tests pass their own). `prompt_cache` marks cache
    breakpoints on Anthropic requests (`_anthropic`). Raises `ModelConfigError` with what to set
    when the provider is unknown or its key or base URL is missing."""
    provider, name, key, url = check_model_spec(spec, base_url=base_url, api_key=api_key, environ=environ)
    if provider == DEMO_SPEC:
        from devagent.agent.models.scripted import DemoModel  # late: pydantic-ai, not needed to check a spec

        return DemoModel()
    if provider == "scripted":
        from devagent.agent.models.scripted import ScriptedModel  # late: pydantic-ai, as above

        return ScriptedModel.from_file(name)
    info = PROVIDERS[provider]
    try:
        pydantic_ai_patches.cache_tool_schemas()
        pydantic_ai_patches.uncontended_stream_pulls()
        if provider not in ("anthropic", "google"):  # every other builder makes an OpenAI-SDK model
            openai_patches.skip_message_transform()
            openai_patches.validate_stream_chunks()
            openai_patches.remember_encoded_prefix()
            openai_stream.stream_chat_directly()
            pydantic_ai_patches.memoize_history_mapping()
        if provider == "anthropic":
            return _anthropic(name, key, url, info, prompt_cache=prompt_cache)
        return _BUILDERS[provider](name, key, url, info)
    except ImportError as e:
        raise ModelConfigError(
            f"Model {spec!r} needs a package that is not installed ({e}). "
            'Install devagent with its model extras: pip install "pydantic-ai-slim[openai,anthropic,google]".'
        ) from e
    except Exception as e:
        from pydantic_ai.exceptions import UserError

        if isinstance(e, UserError | ValueError):  # pydantic-ai's and the SDKs' own checks
            raise ModelConfigError(f"Model {spec!r} cannot be configured: {e}") from e
        raise


def _first_env(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        if value := env.get(n, "").strip():
            return value
    return None


def _either(names: tuple[str, ...]) -> str:
    return " or ".join(names)


# --- builders: each imports only its own provider ------------------------------------------------


def _openai(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(name, provider=OpenAIProvider(api_key=key, base_url=url))


def _openai_compatible(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.profiles.openai import OpenAIModelProfile
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    assert url is not None
    provider = OpenAICompatibleProvider(info.name, base_url=url, api_key=key or _NO_KEY)
    # Local servers (llama.cpp, older vLLM, many gateways) reject or mishandle `strict` tools.
    return _local_model_class()(
        name, provider=provider, profile=OpenAIModelProfile(openai_supports_strict_tool_definition=False)
    )


_LOCAL_CLASS: type[OpenAIChatModel] | None = None


def _local_model_class() -> type[OpenAIChatModel]:
    """OpenAIChatModel for a server the user runs (Ollama, vLLM, llama.cpp, any OpenAI-compatible
    one): a connection error names the URL and what to check, where the SDK says only
    "Connection error."."""
    global _LOCAL_CLASS
    if _LOCAL_CLASS is not None:
        return _LOCAL_CLASS
    from contextlib import asynccontextmanager

    from pydantic_ai.exceptions import ModelConnectionError
    from pydantic_ai.models.openai import OpenAIChatModel as Base

    class LocalChatModel(Base):
        def _explain(self, e: ModelConnectionError) -> ModelConnectionError:
            cause = e.__cause__.__cause__ if e.__cause__ is not None else None
            why = f" ({cause})" if cause is not None and str(cause) else ""
            return ModelConnectionError(
                e.model_name,
                f"cannot connect to the model server at {self.base_url}{why}: is it running? "
                "Check --base-url or the provider's *_BASE_URL variable.",
                phase=e.phase,
            )

        async def request(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().request(*args, **kwargs)
            except ModelConnectionError as e:
                raise self._explain(e) from e

        @asynccontextmanager
        async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            try:
                async with super().request_stream(*args, **kwargs) as stream:
                    yield stream
            except ModelConnectionError as e:
                raise self._explain(e) from e

    _LOCAL_CLASS = LocalChatModel
    return LocalChatModel


def _ollama(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.profiles.openai import OpenAIModelProfile
    from pydantic_ai.providers.ollama import OllamaProvider

    return _local_model_class()(
        name,
        provider=OllamaProvider(base_url=url, api_key=key or _NO_KEY),
        profile=OpenAIModelProfile(openai_supports_strict_tool_definition=False),
    )


def _vllm(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.profiles.openai import OpenAIModelProfile
    from pydantic_ai.providers.vllm import VLLMProvider

    return _local_model_class()(
        name,
        provider=VLLMProvider(base_url=url, api_key=key or _NO_KEY),
        profile=OpenAIModelProfile(openai_supports_strict_tool_definition=False),
    )


def _deepseek(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider

    if url:  # DeepSeekProvider has no base URL of its own: a proxy goes through a generic client
        return _compatible_named("deepseek", name, key, url)
    return OpenAIChatModel(name, provider=DeepSeekProvider(api_key=key))


def _moonshot(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.moonshotai import MoonshotAIProvider

    assert key is not None
    return OpenAIChatModel(name, provider=MoonshotAIProvider(api_key=key, base_url=url))


def _openrouter(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.models.openrouter import OpenRouterModel
    from pydantic_ai.providers.openrouter import OpenRouterProvider

    if url:
        return _compatible_named("openrouter", name, key, url)
    return OpenRouterModel(name, provider=OpenRouterProvider(api_key=key))


def _anthropic(
    name: str, key: str | None, url: str | None, info: ProviderInfo, *, prompt_cache: bool = True
) -> Model:
    """Anthropic bills a prompt at full price unless the request marks what to cache.
    With `prompt_cache`, three of the four breakpoints a request may carry, through
    pydantic-ai's own settings: after the last tool definition, after the system prompt (both the
    same all session long: `Session.request_parameters`), and on the last block of the last
    message, so the next request of the conversation reads everything up to there from the cache
    and pays for the new messages only. The last one is an explicit breakpoint
    (`anthropic_cache_messages`), not the API's top-level automatic one (`anthropic_cache`), so
    gateways that speak the Messages API without that parameter (`--base-url`) cache too."""
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    settings = (
        AnthropicModelSettings(
            anthropic_cache_tool_definitions=True,
            anthropic_cache_instructions=True,
            anthropic_cache_messages=True,
        )
        if prompt_cache
        else None
    )
    return AnthropicModel(name, provider=AnthropicProvider(api_key=key, base_url=url), settings=settings)


def _google(name: str, key: str | None, url: str | None, info: ProviderInfo) -> Model:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    return GoogleModel(name, provider=GoogleProvider(api_key=key, base_url=url))


def _compatible_named(provider_name: str, name: str, key: str | None, url: str) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    return OpenAIChatModel(name, provider=OpenAICompatibleProvider(provider_name, base_url=url, api_key=key))


_Builder = Callable[[str, str | None, str | None, ProviderInfo], "Model"]

_BUILDERS: dict[str, _Builder] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "google": _google,
    "openai-compatible": _openai_compatible,
    "llamacpp": _openai_compatible,
    "ollama": _ollama,
    "vllm": _vllm,
    "deepseek": _deepseek,
    "moonshot": _moonshot,
    "openrouter": _openrouter,
}
