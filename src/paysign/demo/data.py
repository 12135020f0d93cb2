"""What the demo sellers answer once paid: plausible, made-up JSON.

Values are derived from the request's inputs (the same inputs give the same numbers), so a
walkthrough can be repeated; nothing here is real market, weather or filing data.

    >>> body = answer("market_quote", {"symbol": "acme"}, {}, None, sandbox=True)
    >>> body["symbol"], body["sandbox"], body["bid"] < body["price"] < body["ask"]
    ('ACME', True, True)
    >>> answer("translate_text", {}, {}, {"text": "good morning", "target": "fr"},
    ...        sandbox=False)["translatedText"]
    'bonjour'
    >>> answer("company_filings", {}, {}, None, sandbox=False)
    Traceback (most recent call last):
    ...
    paysign.demo.data.BadInput: the query parameter 'company' is required
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from typing import Any


class BadInput(ValueError):
    """The request lacks an input the listing requires (answered 400; nothing is settled)."""


def _rng(*parts: object) -> random.Random:
    seed = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _required(values: dict[str, str], key: str, where: str) -> str:
    value = values.get(key, "")
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"the {where} '{key}' is required")
    return value.strip()


def market_quote(path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    symbol = _required(path, "symbol", "path parameter").upper()
    now = _now()
    rng = _rng("quote", symbol, now.strftime("%Y%m%d%H%M"))
    price = round(rng.uniform(5, 500), 2)
    spread = round(max(0.01, price * 0.0004), 2)
    return {
        "symbol": symbol,
        "price": price,
        "bid": round(price - spread, 2),
        "ask": round(price + spread, 2),
        "currency": "USD",
        "volume": rng.randint(10_000, 5_000_000),
        "asOf": _iso(now),
    }


_FORMS = (
    ("10-K", "Annual report"),
    ("10-Q", "Quarterly report"),
    ("8-K", "Current report"),
    ("DEF 14A", "Proxy statement"),
    ("S-8", "Registration of employee stock plan"),
)


def company_filings(path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    company = _required(query, "company", "query parameter")
    try:
        limit = int(query.get("limit") or 5)
    except ValueError:
        raise BadInput("the query parameter 'limit' must be a number from 1 to 20") from None
    if not 1 <= limit <= 20:
        raise BadInput("the query parameter 'limit' must be a number from 1 to 20")
    rng = _rng("filings", company.lower())
    day = _now() - timedelta(days=rng.randint(1, 9))
    filings = []
    for index in range(limit):
        form, title = _FORMS[rng.randrange(len(_FORMS))]
        filings.append(
            {
                "accession": f"0000{rng.randint(100000, 999999)}-{day:%y}-{index + 1:06d}",
                "form": form,
                "title": f"{company}: {title}",
                "filedAt": _iso(day),
            }
        )
        day -= timedelta(days=rng.randint(3, 40))
    return {"company": company, "filings": filings}


_CONDITIONS = ("clear", "partly cloudy", "cloudy", "light rain", "showers", "windy")


def weather_forecast(path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    city = _required(path, "city", "path parameter")
    units = (query.get("units") or "metric").lower()
    if units not in ("metric", "imperial"):
        raise BadInput("the query parameter 'units' must be 'metric' or 'imperial'")
    start = _now().replace(minute=0, second=0)
    rng = _rng("weather", city.lower(), start.strftime("%Y%m%d"))
    base = rng.uniform(-5, 28)
    hours = []
    for hour in range(24):
        celsius = base + 6 * (1 - abs(hour - 14) / 14) + rng.uniform(-1, 1)
        temperature = celsius if units == "metric" else celsius * 9 / 5 + 32
        hours.append(
            {
                "time": _iso(start + timedelta(hours=hour)),
                "temperature": round(temperature, 1),
                "condition": _CONDITIONS[rng.randrange(len(_CONDITIONS))],
                "precipitationChance": rng.randint(0, 100),
            }
        )
    return {
        "city": city,
        "units": units,
        "temperatureUnit": "C" if units == "metric" else "F",
        "hours": hours,
    }


_PHRASES = {
    "fr": {"good morning": "bonjour", "thank you": "merci", "hello": "bonjour"},
    "de": {"good morning": "guten Morgen", "thank you": "danke", "hello": "hallo"},
    "es": {"good morning": "buenos días", "thank you": "gracias", "hello": "hola"},
}


def translate_text(path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object with 'text' and 'target'")
    text = _required(body, "text", "body field")
    target = _required(body, "target", "body field").lower()
    if len(text) > 2000:
        raise BadInput("the body field 'text' is limited to 2000 characters")
    known = _PHRASES.get(target, {}).get(text.lower())
    return {
        "translatedText": known or f"[{target}] {text}",
        "sourceLanguage": "en",
        "targetLanguage": target,
    }


_FACTS = (
    "Honey found in ancient Egyptian tombs was still edible.",
    "Octopuses have three hearts.",
    "A day on Venus is longer than its year.",
    "Bananas are berries; strawberries are not.",
    "The Eiffel Tower grows about 15 cm taller in summer.",
    "Wombat droppings are cube-shaped.",
    "There are more possible chess games than atoms in the observable universe.",
)


def random_fact(path: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    index = random.randrange(len(_FACTS))
    return {"fact": _FACTS[index], "id": index + 1}


_ANSWERS = {
    "market_quote": market_quote,
    "company_filings": company_filings,
    "weather_forecast": weather_forecast,
    "translate_text": translate_text,
    "random_fact": random_fact,
}


def answer(
    name: str, path: dict[str, str], query: dict[str, str], body: Any, *, sandbox: bool
) -> dict[str, Any]:
    """The paid response of listing ``name``; ``BadInput`` when a required input is missing."""
    make = _ANSWERS.get(name)
    data: dict[str, Any] = make(path, query, body) if make else {"listing": name}
    data["sandbox"] = sandbox
    return data
