"""What model requests cost: a price per model (USD per million tokens of input, input read from
the provider's prompt cache, input written to it, and output) turns a request's `Usage` into
dollars.

Where a price comes from, first found first:
1. the operator's settings file, `[prices."provider:model"]` (or `[prices.provider]` for every
   model of a provider) with `input`, `output` and optionally `cached_input` and `cache_write`
   (each defaults to the `input` price);
2. the offline models (`scripted:...`, `demo`): free;
3. the providers' published prices, as pydantic-ai's genai-prices package carries them, looked up
   by the spec's provider and model name (so `openai:gpt-4.1` at a proxy's `--base-url` is still
   priced as OpenAI's gpt-4.1). Tiered prices (a long prompt billed higher) apply per request.

Anything else (a local server, an OpenAI-compatible gateway, a model the package does not know)
has no price: its requests are counted as unpriced, and their cost is said to be unknown, never
guessed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devagent.agent.events import Usage
from devagent.agent.models.errors import ModelConfigError
from devagent.agent.models.providers import DEMO_SPEC, canonical_provider, parse_model_spec

log = logging.getLogger(__name__)

PRICE_KEYS = ("input", "cached_input", "cache_write", "output")
NANO = 1_000_000_000  # the store counts costs in billionths of a dollar (whole numbers add up exactly)
_REQUIRED = ("input", "output")

# devagent's provider names -> genai-prices' provider ids (providers not here have no built-in price)
_BUILT_IN_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "deepseek": "deepseek",
    "moonshot": "moonshotai",
    "openrouter": "openrouter",
}
_FREE_PROVIDERS = ("scripted", DEMO_SPEC)


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    cached_input: float
    cache_write: float
    output: float

    def cost(self, usage: Usage) -> float:
        """The cost of `usage` in USD: the prompt's uncached part at the input price, its cached
        and cache-written parts at theirs, the output (reasoning included) at the output price."""
        uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        return (
            uncached * self.input
            + usage.cache_read_tokens * self.cached_input
            + usage.cache_write_tokens * self.cache_write
            + usage.output_tokens * self.output
        ) / 1_000_000

    def describe(self) -> str:
        return (
            f"${self.input:g} input, ${self.cached_input:g} cached input, ${self.cache_write:g} cache "
            f"writes, ${self.output:g} output per million tokens"
        )


FREE = Price(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Priced:
    """A model's price as found: the four figures (the base ones where the provider tiers them),
    where they came from, and how a request's usage is costed."""

    price: Price
    source: str  # "the settings file", "built in", "an offline model"
    cost: Callable[[Usage], float]


def parse_prices(raw: Any) -> dict[str, dict[str, float]]:
    """The operator's `prices` ({spec: {input, cached_input, cache_write, output}}) checked:
    a spec (or a provider alone) devagent knows, the known keys only, `input` and `output`
    given, numbers of 0 or more. ValueError says what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError('prices: expected tables [prices."provider:model"] with input and output')
    out: dict[str, dict[str, float]] = {}
    for spec, entry in raw.items():
        key = price_key(str(spec))
        if not isinstance(entry, Mapping):
            raise ValueError(
                f"prices.{spec!r}: expected a table with input and output (USD per million tokens)"
            )
        unknown = sorted(set(entry) - set(PRICE_KEYS))
        if unknown:
            raise ValueError(f"prices.{spec!r}: unknown key {unknown[0]!r}; known: {', '.join(PRICE_KEYS)}")
        missing = [k for k in _REQUIRED if k not in entry]
        if missing:
            raise ValueError(
                f"prices.{spec!r}: {' and '.join(missing)} must be given (USD per million tokens)"
            )
        figures: dict[str, float] = {}
        for k, v in entry.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise ValueError(f"prices.{spec!r}.{k}: expected a number of 0 or more, not {v!r}")
            figures[k] = float(v)
        out[key] = figures
    return out


def price_key(spec: str) -> str:
    """A spec as the price table knows it: `provider:name` with the provider's canonical name, or
    a provider alone (every model of it). ValueError for a provider devagent does not know."""
    text = spec.strip()
    if text == DEMO_SPEC:
        return DEMO_SPEC
    if ":" not in text:  # a whole provider
        provider = canonical_provider(text)
        if provider is None:
            raise ValueError(f"prices.{spec!r}: not a model (provider:model) or a provider devagent knows")
        return provider
    try:
        provider, name = parse_model_spec(text)
    except ModelConfigError as e:
        raise ValueError(f"prices.{spec!r}: {e}") from None
    return f"{provider}:{name}"


class PriceTable:
    """The prices of the models a server uses: the operator's over the built-in ones. Lookups are
    remembered per spec (a spec's price does not change while the process runs)."""

    def __init__(self, overrides: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self._overrides: dict[str, Price] = {}
        for key, figures in (overrides or {}).items():
            given = dict(figures)
            self._overrides[price_key(key)] = Price(
                input=given["input"],
                cached_input=given.get("cached_input", given["input"]),
                cache_write=given.get("cache_write", given["input"]),
                output=given["output"],
            )
        self._found: dict[str, Priced | None] = {}

    def lookup(self, spec: str) -> Priced | None:
        """The price of a model spec, None when it is unknown."""
        if spec in self._found:
            return self._found[spec]
        found = self._find(spec)
        self._found[spec] = found
        return found

    def charge(self, spec: str, usage: Usage) -> None:
        """Set the cost of one request's `usage` of model `spec`: its `cost_usd`, or, for a model
        with no known price, `unpriced_requests` (its cost is unknown)."""
        priced = self.lookup(spec)
        if priced is None:
            usage.unpriced_requests = usage.requests or 1
            return
        try:
            usage.cost_usd = priced.cost(usage)
        except Exception as e:  # a price the package cannot apply: unknown, said once in the log
            log.warning("prices: cannot price a request of %s: %s", spec, e)
            usage.unpriced_requests = usage.requests or 1

    def _find(self, spec: str) -> Priced | None:
        try:
            key = price_key(spec)
        except ValueError:
            return None
        provider, _, name = key.partition(":")
        for k in (key, provider):
            if k in self._overrides:
                price = self._overrides[k]
                return Priced(price, "the settings file", price.cost)
        if provider in _FREE_PROVIDERS:
            return Priced(FREE, "an offline model", FREE.cost)
        genai_id = _BUILT_IN_PROVIDERS.get(provider)
        if genai_id is None or not name:
            return None
        return _built_in(genai_id, name)


def _built_in(provider_id: str, name: str) -> Priced | None:
    """A provider's published price of a model, from genai-prices, by provider id and model name
    (never by URL: a proxy in front of the provider bills as the provider does)."""
    # late: genai-prices' data (loaded by pydantic-ai's models already, when any model was built)
    from datetime import UTC, datetime

    from genai_prices import Usage as GenaiUsage
    from genai_prices.data_snapshot import get_snapshot
    from genai_prices.types import TieredPrices

    try:
        provider, model = get_snapshot().find_provider_model(name, None, provider_id, None)
    except LookupError:
        return None
    prices = model.get_prices(datetime.now(tz=UTC))

    def figure(attr: str) -> float | None:
        value = getattr(prices, attr, None)
        if isinstance(value, TieredPrices):
            value = value.base
        return None if value is None else float(value)

    base_input = figure("input_mtok") or 0.0
    price = Price(
        input=base_input,
        cached_input=_or(figure("cache_read_mtok"), base_input),
        cache_write=_or(figure("cache_write_mtok"), base_input),
        output=figure("output_mtok") or 0.0,
    )

    def cost(usage: Usage) -> float:
        cached = usage.cache_read_tokens + usage.cache_write_tokens
        request = GenaiUsage(
            input_tokens=max(usage.input_tokens, cached),  # a count the package can split
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
        )
        return float(model.calc_price(request, provider).total_price)

    return Priced(price, "built in", cost)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def cost_text(usage: Usage) -> str:
    """A usage's cost for people: `$0.0123`, `unknown (no price for the model)`, or `at least
    $0.0123 (2 requests of a model with no price)`."""
    if usage.unpriced_requests and usage.unpriced_requests >= usage.requests:
        return "unknown (no price for the model)"
    known = usage_dollars(usage.cost_usd)
    if usage.unpriced_requests:
        n = usage.unpriced_requests
        return f"at least {known} ({n} request{'s' if n != 1 else ''} of a model with no price)"
    return known


def usage_dollars(amount: float) -> str:
    """Dollars with four decimals (a request may cost a hundredth of a cent)."""
    return f"${amount:,.4f}"
