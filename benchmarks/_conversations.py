"""A seeded generator of multi-turn agent conversations with an oracle of their lineage.

:func:`generate` ``(seed, turns)`` writes one user's conversation with a travel agent: plain statements, tool-using
requests (``get_weather(city)``, ``search_flights(city)``, ``convert(amount, frm, to)``), a tool that fails
(``book_hotel``), a tool whose result is huge (``get_city_guide``, about 12k tokens), two parallel tool calls in
one model step, word-for-word repeats of earlier requests, corrections of an earlier fact ("Actually, I'm going to
Naples, not Rome.") and questions about the past. The same seed gives the same script.

Two facts ("slots") carry the conversation: the destination city and the home currency. Every tool argument value
comes verbatim from the current turn, from the statement that holds a slot's current value, or from an earlier
tool result, and each :class:`Call` names that source (``premises``); each answer names what it rests on (the
turn's tool results, or the fact a question about the past asks for, which the scripted model cites with its
``[m:<id>]`` marker when the marker is in its prompt). A correction names the slot, the old and new value: the
memories that must turn suspect are exactly the dependents (transitively) of the statements that held the old
value; every other live memory must stay as it was.

The oracle is over **memory contents**: the measurement (``_conversation_surfaces.py``) renders each node the way
a surface stores it (a capture stores a tool result as ``name(arg='v') -> output``, a chat history as the output)
and maps it to the memories holding those words (repeated words are one memory, as the store merges them).
:class:`Oracle` builds that graph turn by turn from the script and what the scripted model actually did: it takes a
value only from the statement or tool result holding it when that is in its prompt (:meth:`Oracle.evidence`), else
it asks or says it does not know, and then the answer rests on nothing. :meth:`Oracle.expectation` says what a
correction must mark suspect.

Everything here is plain Python (no framework import), so tests and benchmarks can share it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACK",
    "Call",
    "Cite",
    "Correction",
    "Need",
    "Oracle",
    "Render",
    "Script",
    "ScriptTurn",
    "TurnLog",
    "World",
    "capture_render",
    "generate",
    "normalize",
    "summary",
    "transcript_render",
]

# ---------------------------------------------------------------------------------------------- vocabulary
#: Destinations (one capitalised word each, none an English word: a value is matched as a whole word).
CITIES = (
    "Rome Naples Oslo Lisbon Porto Madrid Seville Valencia Vienna Prague Budapest Krakow Warsaw Berlin Hamburg "
    "Munich Zurich Geneva Lyon Marseille Bordeaux Dublin Edinburgh Glasgow Amsterdam Rotterdam Brussels Antwerp "
    "Copenhagen Stockholm Helsinki Tallinn Riga Vilnius Athens Thessaloniki Dubrovnik Ljubljana Zagreb Bologna "
    "Florence Venice Milan Turin Genoa Palermo Valletta Reykjavik Bergen Gothenburg Malmo Salzburg Innsbruck "
    "Bruges Ghent Granada Bilbao Toulouse"
).split()
#: Home currencies (ISO codes that are not English words; EUR is the currency tools quote in).
CURRENCIES = (
    "USD GBP JPY CHF CAD AUD SEK NOK DKK PLN CZK HUF NZD SGD HKD INR BRL MXN ZAR KRW ILS THB CNY BGN ISK IDR "
    "MYR CLP AED SAR QAR KWD EGP NGN KES TWD VND UAH RSD KZT UYU JOD PHP"
).split()
#: Amounts the user asks to convert (none ends in 9: flight prices do, so no number is held by two kinds of fact).
AMOUNTS = (40, 60, 80, 150, 250, 300, 450, 600, 750, 1200)
#: Flight prices in EUR (3 digits ending in 9).
PRICES = tuple(range(109, 1000, 10))
CONDITIONS = ("sunny", "cloudy", "light rain", "windy", "foggy", "clear skies", "showers")
AIRLINES = ("AZ", "LX", "TP", "IB", "OS", "SK", "KL", "LH", "AF", "FR")
#: Plain statements: no slot value, no number a tool uses, never a premise.
STATEMENTS = (
    "I'm vegetarian, by the way.",
    "I have a dog named Biscuit.",
    "I usually wake up around six.",
    "I love old bookshops.",
    "My favourite colour is green.",
    "I work as a nurse.",
    "I'm allergic to peanuts.",
    "My sister is called Mara.",
    "I prefer aisle seats.",
    "I play the cello on weekends.",
    "I don't eat shellfish.",
    "My partner is called Sam.",
)
#: The agent's reply to a statement or a correction: an acknowledgement (no premises, never a premise).
ACK = "Noted. I'll remember that."

SLOTS = ("destination", "currency")
#: What a memory-tools agent searches for to find a slot's value (and what a correction looks up).
SLOT_QUERY = {"destination": "where am I going next month", "currency": "my home currency"}
FACT = {"destination": "I'm going to {v} next month.", "currency": "My home currency is {v}."}
#: Correction phrasings per slot (``{new}``, ``{old}``); the id is kept on the turn so results can be split by it.
CORRECTIONS = {
    "destination": (
        ("dest-not", "Actually, I'm going to {new}, not {old}."),
        ("dest-instead", "Change of plans: I'm going to {new} instead of {old}."),
        ("dest-meant", "Sorry, I meant {new}, not {old}."),
    ),
    "currency": (
        ("cur-actually", "Actually, my home currency is {new}."),
        ("cur-now", "Correction: my home currency is {new} now."),
        ("cur-not", "Actually, my home currency is {new}, not {old}."),
    ),
}
WEATHER_ASKS = ("What's the weather like where I'm going next month?", "How's the weather where I'm going next month?")
FLIGHT_ASKS = (
    "Find me the cheapest flight to where I'm going next month.",
    "Search flights to where I'm going next month.",
)
CONVERT_ASKS = ("Convert {a} EUR to my home currency.", "How much is {a} EUR in my home currency?")
PRICE_ASKS = ("How much is that flight in my home currency?", "Convert the flight price to my home currency.")
HOTEL_ASK = "Book me a hotel where I'm going next month."
GUIDE_ASK = "Give me the full city guide for where I'm going next month."
PARALLEL_ASKS = (
    "What's the weather where I'm going next month, and how much is {a} EUR in my home currency?",
    "Check the weather and the cheapest flight for where I'm going next month.",
)
PAST_ASKS = {
    "destination": "Where am I going next month?",
    "currency": "What is my home currency?",
    "flight": "What was the cheapest flight you found?",
}
CLARIFY = {
    "destination": "Which city are you going to? I can't find it in my notes.",
    "currency": "Which currency do you use at home? I can't find it in my notes.",
    "flight": "I haven't searched for a flight for this trip yet.",
}
UNKNOWN = "I can't find that in my notes."
HOTEL_DOWN = "Sorry, the hotel booking service is down right now. Please try again later."
HOTEL_ERROR = "Booking service unavailable (HTTP 503)"

#: The deck of turn kinds dealt (shuffled) after the two opening facts; every kind comes up once per deck.
DECK = (
    ("statement",) * 3
    + ("weather", "flight", "convert", "convert", "price", "flight")
    + ("fail", "huge", "parallel", "parallel")
    + ("repeat",) * 3
    + ("past",) * 3
    + ("correction",) * 2
)
REQUEST_KINDS = frozenset({"weather", "flight", "convert", "price", "fail", "huge", "parallel", "past"})
GUIDE_TOKENS = 12_000


def normalize(text: str) -> str:
    """Whitespace-collapsed, stripped text: how contents are compared."""
    return " ".join(text.split())


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "little")


# ---------------------------------------------------------------------------------------------- the script
@dataclass(frozen=True)
class Call:
    """One tool call the script makes.

    Attributes:
        id: The model's call id (unique in the conversation).
        name: Tool name.
        args: Arguments (strings).
        output: The tool's output, or its error message.
        error: The tool raises ``output``.
        premises: Where each argument value came from, verbatim: ``("turn", i)`` the user turn ``i``,
            ``("slot", name)`` the statements holding the slot's value, ``("result", i, j)`` call ``j`` of turn
            ``i``.
    """

    id: str
    name: str
    args: dict[str, str]
    output: str
    error: bool = False
    premises: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True)
class Need:
    """A value the model must see in its prompt to make the turn's calls (else it asks, see ``clarify``)."""

    slot: str  # "destination", "currency" or "flight"
    value: str


@dataclass(frozen=True)
class Cite:
    """What the answer to a question about the past cites.

    Attributes:
        slot: ``"destination"``, ``"currency"`` or ``"flight"``.
        value: The needle: the value the answer repeats (a line holding it is cited).
        source: The source of the memory the answer should cite (``user`` or ``tool:search_flights``).
        target: The premise it rests on (``("slot", name)`` or ``("result", i, j)``).
    """

    slot: str
    value: str
    source: str
    target: tuple[Any, ...]


@dataclass(frozen=True)
class Correction:
    """A correction of a slot: the statements that held ``old`` must be replaced, their dependents turn suspect."""

    slot: str
    old: str
    new: str
    template: str
    canonical: str  # the fact restated with the new value (what a memory-tools agent writes with correct_memory)


@dataclass(frozen=True)
class ScriptTurn:
    """One user turn and what the scripted model does with it.

    Attributes:
        index: Position in the conversation.
        kind: ``fact``, ``statement``, ``correction``, ``weather``, ``flight``, ``convert``, ``price``, ``fail``,
            ``huge``, ``parallel`` or ``past`` (a repeat has the kind of the turn it repeats).
        user: The user's words.
        calls: The tool calls of the one model step (two for ``parallel``).
        needs: Values the calls take from memory: the model must see them in its prompt.
        answer: The final answer; for ``past``, ``{ref}`` stands where the citation goes (" [m:<id>]" or "").
        answer_deps: What the answer rests on (premise refs as in :attr:`Call.premises`); for a tool turn, its
            results.
        clarify: The answer when a needed value is not in the prompt (no calls; rests on nothing).
        cite: For ``past``: what the answer cites.
        correction: For ``correction``.
        repeat_of: The turn whose words this one repeats.
        search: What a memory-tools agent searches for before acting (None: it needs nothing from memory).
        slot: For ``fact``: the slot it states.
    """

    index: int
    kind: str
    user: str
    calls: tuple[Call, ...] = ()
    needs: tuple[Need, ...] = ()
    answer: str = ACK
    answer_deps: tuple[tuple[Any, ...], ...] = ()
    clarify: str = ""
    cite: Cite | None = None
    correction: Correction | None = None
    repeat_of: int | None = None
    search: str | None = None
    slot: str | None = None

    @property
    def is_statement(self) -> bool:
        """A fact or a plain statement (a memory-tools agent stores it with ``remember``)."""
        return self.kind in ("fact", "statement")


@dataclass(frozen=True)
class Script:
    """A generated conversation: its seed, its turns and the tools it uses."""

    seed: int
    turns: tuple[ScriptTurn, ...]

    def kinds(self) -> dict[str, int]:
        """How many turns of each kind (repeats counted apart as ``repeat``)."""
        out: dict[str, int] = {}
        for t in self.turns:
            k = "repeat" if t.repeat_of is not None else t.kind
            out[k] = out.get(k, 0) + 1
        return out

    def tool_names(self) -> list[str]:
        """Every domain tool the script calls."""
        return sorted({c.name for t in self.turns for c in t.calls})


# ---------------------------------------------------------------------------------------------- tools
class World:
    """Deterministic tool outputs: the same arguments always give the same output (per seed)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        rng = random.Random(_h("prices", seed))
        prices = list(PRICES)
        rng.shuffle(prices)
        self.price = {c: prices[i % len(prices)] for i, c in enumerate(CITIES)}
        self._used = {str(p) for p in PRICES} | {str(a) for a in AMOUNTS}
        self._guides: dict[str, tuple[str, str, int]] = {}

    def weather(self, city: str) -> tuple[str, str]:
        temp = 6 + _h("t", self.seed, city) % 28
        cond = CONDITIONS[_h("c", self.seed, city) % len(CONDITIONS)]
        return f"{temp}C and {cond} in {city}", f"{temp}C and {cond}"

    def flight(self, city: str) -> tuple[str, str, int]:
        code = f"{AIRLINES[_h('a', self.seed, city) % len(AIRLINES)]}{100 + _h('n', self.seed, city) % 900}"
        price = self.price[city]
        hour = 6 + _h("d", self.seed, city) % 14
        return f"Cheapest flight to {city}: {code}, {price} EUR, departs {hour:02d}:15", code, price

    def convert(self, amount: int, to: str) -> str:
        rate = 0.5 + (_h("r", self.seed, to) % 2000) / 100
        value = round(amount * rate, 2)
        while str(int(value)) in self._used:  # never a number another fact holds
            value += 1
        return f"{value:.2f}"

    def guide(self, city: str) -> tuple[str, str, int]:
        """About :data:`GUIDE_TOKENS` tokens of city guide; its top pick and its number of places."""
        if city not in self._guides:
            rng = random.Random(_h("g", self.seed, city))
            kinds = ("museum", "gallery", "market", "garden", "bakery", "chapel", "bridge", "viewpoint", "tavern")
            words = ("old", "little", "royal", "hidden", "green", "silver", "north", "river", "stone", "golden")
            lines = [f"The complete {city} city guide, every place worth a visit, best first."]
            n = 0
            while sum(len(x) for x in lines) < GUIDE_TOKENS * 2.85:  # ~2.85 characters a token (cl100k_base)
                n += 1
                name = f"{rng.choice(words).title()} {rng.choice(words).title()} {rng.choice(kinds).title()} No{n}"
                lines.append(
                    f"{n}. {name}: open {8 + rng.randrange(4)}:00 to {17 + rng.randrange(5)}:00, entry "
                    f"{5 + rng.randrange(40)} EUR, rated {rng.randrange(30, 50) / 10}/5, {rng.choice(kinds)} "
                    f"quarter, {rng.choice(words)} street."
                )
            top = lines[1].split(": ", 1)[0].split(". ", 1)[1]
            self._guides[city] = ("\n".join(lines), top, n)
        return self._guides[city]


# ---------------------------------------------------------------------------------------------- generator
class _Gen:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.world = World(seed)
        cities, currencies = list(CITIES), list(CURRENCIES)
        self.rng.shuffle(cities)
        self.rng.shuffle(currencies)
        self.pool = {"destination": cities, "currency": currencies}
        self.value = {slot: self.pool[slot].pop() for slot in SLOTS}
        self.flight: tuple[int, int] | None = None  # (turn, call) of the search_flights result for the current city
        self.turns: list[ScriptTurn] = []
        self.requests: list[tuple[str, str, dict[str, Any]]] = []  # (kind, user text, parameters) to repeat
        self.deck: list[str] = []

    @property
    def i(self) -> int:
        return len(self.turns)

    def call_id(self, j: int) -> str:
        return f"call-{self.seed}-{self.i}-{j}"

    # -- calls
    def weather_call(self, j: int) -> Call:
        city = self.value["destination"]
        out, _ = self.world.weather(city)
        return Call(self.call_id(j), "get_weather", {"city": city}, out, premises=(("slot", "destination"),))

    def flight_call(self, j: int) -> Call:
        city = self.value["destination"]
        out, _, _ = self.world.flight(city)
        return Call(self.call_id(j), "search_flights", {"city": city}, out, premises=(("slot", "destination"),))

    def convert_call(self, j: int, amount: int, source: tuple[Any, ...]) -> Call:
        to = self.value["currency"]
        out = f"{amount} EUR = {self.world.convert(amount, to)} {to}"
        args = {"amount": str(amount), "frm": "EUR", "to": to}
        return Call(self.call_id(j), "convert", args, out, premises=(source, ("slot", "currency")))

    # -- turns
    def add(self, turn: ScriptTurn) -> None:
        self.turns.append(turn)

    def fact(self, slot: str) -> None:
        self.add(ScriptTurn(self.i, "fact", FACT[slot].format(v=self.value[slot]), slot=slot))

    def statement(self) -> None:
        self.add(ScriptTurn(self.i, "statement", self.rng.choice(STATEMENTS)))

    def correction(self) -> None:
        slots = [s for s in SLOTS if self.pool[s]]
        if not slots:  # every value used once already: ask about the past instead
            self.past({"about": self.rng.choice(SLOTS)})
            return
        slot = self.rng.choice(slots)
        old, new = self.value[slot], self.pool[slot].pop()
        template, words = self.rng.choice(CORRECTIONS[slot])
        text = words.format(new=new, old=old)
        fix = Correction(slot, old, new, template, FACT[slot].format(v=new))
        self.value[slot] = new
        if slot == "destination":
            self.flight = None
        self.add(ScriptTurn(self.i, "correction", text, correction=fix, search=SLOT_QUERY[slot]))

    def request(self, kind: str, params: dict[str, Any] | None = None, repeat_of: int | None = None) -> None:
        """A request turn of ``kind``; ``params`` fix its words (a repeat passes the original's)."""
        first = params is None
        params = dict(params or {})
        make = getattr(self, f"_{kind}")
        turn = make(params)
        if repeat_of is not None:
            turn = dataclasses.replace(turn, repeat_of=repeat_of)
        self.add(turn)
        if first:
            self.requests.append((kind, turn.user, params))

    def _weather(self, p: dict[str, Any]) -> ScriptTurn:
        p.setdefault("ask", self.rng.randrange(len(WEATHER_ASKS)))
        call = self.weather_call(0)
        _, said = self.world.weather(call.args["city"])
        return ScriptTurn(
            self.i, "weather", WEATHER_ASKS[p["ask"]], (call,), (Need("destination", call.args["city"]),),
            f"It's {said} in {call.args['city']}.", (("result", self.i, 0),), CLARIFY["destination"],
            search=SLOT_QUERY["destination"],
        )  # fmt: skip

    def _flight(self, p: dict[str, Any]) -> ScriptTurn:
        p.setdefault("ask", self.rng.randrange(len(FLIGHT_ASKS)))
        call = self.flight_call(0)
        city = call.args["city"]
        _, code, price = self.world.flight(city)
        self.flight = (self.i, 0)
        return ScriptTurn(
            self.i, "flight", FLIGHT_ASKS[p["ask"]], (call,), (Need("destination", city),),
            f"The cheapest flight to {city} is {code} at {price} EUR.", (("result", self.i, 0),),
            CLARIFY["destination"], search=SLOT_QUERY["destination"],
        )  # fmt: skip

    def _convert(self, p: dict[str, Any]) -> ScriptTurn:
        p.setdefault("ask", self.rng.randrange(len(CONVERT_ASKS)))
        p.setdefault("amount", self.rng.choice(AMOUNTS))
        call = self.convert_call(0, p["amount"], ("turn", self.i))
        value = call.output.split(" = ", 1)[1]
        return ScriptTurn(
            self.i, "convert", CONVERT_ASKS[p["ask"]].format(a=p["amount"]), (call,),
            (Need("currency", call.args["to"]),), f"{p['amount']} EUR is {value}.", (("result", self.i, 0),),
            CLARIFY["currency"], search=SLOT_QUERY["currency"],
        )  # fmt: skip

    def _price(self, p: dict[str, Any]) -> ScriptTurn:
        p.setdefault("ask", self.rng.randrange(len(PRICE_ASKS)))
        user = PRICE_ASKS[p["ask"]]
        if self.flight is None:  # no flight found for this trip: nothing to convert
            return ScriptTurn(self.i, "price", user, answer=CLARIFY["flight"], search="cheapest flight")
        price = self.world.price[self.value["destination"]]
        call = self.convert_call(0, price, ("result", *self.flight))
        value = call.output.split(" = ", 1)[1]
        needs = (Need("flight", str(price)), Need("currency", call.args["to"]))
        return ScriptTurn(
            self.i, "price", user, (call,), needs, f"The flight's {price} EUR is {value}.", (("result", self.i, 0),),
            CLARIFY["flight"], search="cheapest flight and my home currency",
        )  # fmt: skip

    def _fail(self, p: dict[str, Any]) -> ScriptTurn:
        city = self.value["destination"]
        call = Call(self.call_id(0), "book_hotel", {"city": city}, HOTEL_ERROR, True, (("slot", "destination"),))
        return ScriptTurn(
            self.i, "fail", HOTEL_ASK, (call,), (Need("destination", city),), HOTEL_DOWN, (), CLARIFY["destination"],
            search=SLOT_QUERY["destination"],
        )  # fmt: skip

    def _huge(self, p: dict[str, Any]) -> ScriptTurn:
        city = self.value["destination"]
        text, top, n = self.world.guide(city)
        call = Call(self.call_id(0), "get_city_guide", {"city": city}, text, premises=(("slot", "destination"),))
        return ScriptTurn(
            self.i, "huge", GUIDE_ASK, (call,), (Need("destination", city),),
            f"The {city} guide lists {n} places; its top pick is the {top}.", (("result", self.i, 0),),
            CLARIFY["destination"], search=SLOT_QUERY["destination"],
        )  # fmt: skip

    def _parallel(self, p: dict[str, Any]) -> ScriptTurn:
        p.setdefault("ask", self.rng.randrange(len(PARALLEL_ASKS)))
        city = self.value["destination"]
        weather = self.weather_call(0)
        _, said = self.world.weather(city)
        if p["ask"] == 0:
            p.setdefault("amount", self.rng.choice(AMOUNTS))
            other = self.convert_call(1, p["amount"], ("turn", self.i))
            value = other.output.split(" = ", 1)[1]
            answer = f"It's {said} in {city}, and {p['amount']} EUR is {value}."
            needs = (Need("destination", city), Need("currency", other.args["to"]))
            search = "where am I going next month and my home currency"
        else:
            other = self.flight_call(1)
            _, code, price = self.world.flight(city)
            self.flight = (self.i, 1)
            answer = f"It's {said} in {city}; the cheapest flight is {code} at {price} EUR."
            needs = (Need("destination", city),)
            search = SLOT_QUERY["destination"]
        user = PARALLEL_ASKS[p["ask"]].format(a=p.get("amount"))
        deps = (("result", self.i, 0), ("result", self.i, 1))
        clarify = CLARIFY["destination"]
        return ScriptTurn(self.i, "parallel", user, (weather, other), needs, answer, deps, clarify, search=search)

    def past(self, p: dict[str, Any]) -> None:
        self.request("past", p)

    def _past(self, p: dict[str, Any]) -> ScriptTurn:
        about = p.setdefault("about", self.rng.choice(("destination", "currency", "flight")))
        user = PAST_ASKS[about]
        if about == "flight":
            if self.flight is None:
                return ScriptTurn(self.i, "past", user, answer=CLARIFY["flight"], search="cheapest flight")
            city = self.value["destination"]
            _, code, price = self.world.flight(city)
            cite = Cite("flight", str(price), "tool:search_flights", ("result", *self.flight))
            answer = f"The cheapest flight I found to {city} was {code} at {price} EUR{{ref}}."
            return ScriptTurn(
                self.i, "past", user, answer=answer, answer_deps=(cite.target,), clarify=UNKNOWN, cite=cite,
                search="cheapest flight",
            )  # fmt: skip
        value = self.value[about]
        cite = Cite(about, value, "user", ("slot", about))
        answer = (
            f"You're going to {value} next month{{ref}}."
            if about == "destination"
            else f"Your home currency is {value}{{ref}}."
        )
        return ScriptTurn(
            self.i, "past", user, answer=answer, answer_deps=(cite.target,), clarify=UNKNOWN, cite=cite,
            search=SLOT_QUERY[about],
        )  # fmt: skip

    def repeat(self) -> None:
        if not self.requests:
            self.request("weather")
            return
        kind, user, params = self.rng.choice(self.requests)
        before = len(self.turns)
        self.request(kind, params, repeat_of=next(t.index for t in self.turns if t.user == user))
        assert self.turns[before].user == user, "a repeat must use the same words"

    def deal(self) -> str:
        if not self.deck:
            self.deck = list(DECK)
            self.rng.shuffle(self.deck)
        return self.deck.pop()

    def run(self, n: int) -> Script:
        for slot in SLOTS[:n]:
            self.fact(slot)
        while self.i < n:
            kind = self.deal()
            if kind == "statement":
                self.statement()
            elif kind == "correction":
                self.correction()
            elif kind == "repeat":
                self.repeat()
            elif kind == "past":
                self.past({})
            else:
                self.request(kind)
        return Script(self.seed, tuple(self.turns))


def generate(seed: int, turns: int) -> Script:
    """A conversation of ``turns`` user turns for one user, the same for the same seed.

    The first two turns state the facts (destination, home currency); then a shuffled deck deals every kind of
    turn (:data:`DECK`): statements, tool requests, a failing and a huge tool, parallel calls, repeats, questions
    about the past and corrections (each corrected value is new: no value comes back, so equal words always mean
    the same memory).

    Raises:
        ValueError: ``turns`` < 1.
    """
    if turns < 1:
        msg = f"turns must be >= 1, got {turns}"
        raise ValueError(msg)
    return _Gen(seed).run(turns)


# ---------------------------------------------------------------------------------------------- the oracle
@dataclass(frozen=True)
class Render:
    """How a surface stores what the script says (``None``: it stores no memory for that)."""

    tool: Callable[[Call], str]
    request: Callable[[Sequence[Call]], str | None] = lambda calls: None


def capture_render() -> Render:
    """Captures (callback, middleware, memory component, LlamaIndex capture/block): ``name(arg='v') -> output``."""

    def tool(call: Call) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(call.args.items()))
        return f"{call.name}({args}) -> {call.output.strip()}"

    return Render(tool=tool)


def transcript_render() -> Render:
    """Chat histories: a tool message is its output; a message that only calls tools is ``called name({...})``."""

    def request(calls: Sequence[Call]) -> str:
        return "called " + ", ".join(f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in calls)

    return Render(tool=lambda call: call.output.strip(), request=request)


@dataclass
class TurnLog:
    """What the scripted model did in one turn, and what reached the caller.

    Attributes:
        branch: ``scripted`` (made the calls / answered as scripted), ``clarify`` (a needed value was not in its
            prompt: no calls), ``cited`` / ``plain`` / ``unknown`` (a question about the past answered with a
            marker, without one, or not at all), ``ack``.
        answer: The final answer it gave.
        calls: Tool calls it made, by name (memory tools included).
        extra_holders: Contents written by ``correct_memory`` that now hold a slot (memory-tools agents).
        exception: What reached the caller of the agent, if anything (``Type: message``), and its traceback.
        cited: The marker it cited.
    """

    branch: str = ""
    answer: str = ""
    calls: list[str] = field(default_factory=list)
    extra_holders: list[str] = field(default_factory=list)
    exception: str | None = None
    traceback: str = ""
    cited: str | None = None


class Oracle:
    """The dependency graph over memory contents, built turn by turn from the script and the model's log.

    Args:
        render: How the surface stores tool results and tool-call messages.
    """

    def __init__(self, render: Render) -> None:
        self.render = render
        self.deps: dict[str, set[str]] = {}
        self.holders: dict[str, list[str]] = {slot: [] for slot in SLOTS}
        #: Statements that held an earlier value of each slot (replaced by a correction).
        self.outdated: dict[str, list[str]] = {slot: [] for slot in SLOTS}
        self._results: dict[tuple[int, int], str] = {}
        self._outputs: dict[tuple[int, int], str] = {}
        self._user: dict[int, str] = {}

    def _node(self, content: str | None, deps: Iterable[str] = ()) -> None:
        if content is None or not content.strip():
            return
        key = normalize(content)
        self.deps.setdefault(key, set()).update(normalize(d) for d in deps if normalize(d) != key)

    def resolve(self, ref: Sequence[Any]) -> list[str]:
        """The contents a premise ref names now."""
        if ref[0] == "turn":
            return [self._user[ref[1]]]
        if ref[0] == "slot":
            return list(self.holders[ref[1]])
        if ref[0] == "result":
            found = self._results.get((ref[1], ref[2]))
            return [found] if found else []
        msg = f"unknown premise ref {ref!r}"
        raise ValueError(msg)

    def evidence(self, turn: ScriptTurn) -> dict[str, list[str]]:
        """Where the model may read each value the turn needs: the statements holding a slot, a result's output.

        The scripted model takes a value only from these (so the oracle knows where it came from); a value it sees
        only elsewhere (an earlier answer repeating it) does not count, and it asks the user instead.
        """
        out: dict[str, list[str]] = {slot: list(self.holders[slot]) for slot in SLOTS}
        refs = [ref for call in turn.calls for ref in call.premises if ref[0] == "result"]
        if turn.cite is not None and turn.cite.target[0] == "result":
            refs.append(turn.cite.target)
        out["flight"] = [self._outputs[(r[1], r[2])] for r in refs if (r[1], r[2]) in self._outputs]
        return out

    def add_turn(self, turn: ScriptTurn, log: TurnLog) -> None:
        """Record a played turn: its user words, the results it produced and its answer, with their premises."""
        self._user[turn.index] = turn.user
        self._node(turn.user)
        if turn.kind == "fact" and turn.slot is not None:
            self.holders[turn.slot] = [turn.user]
        elif turn.correction is not None:
            slot = turn.correction.slot
            self.outdated[slot].extend(self.holders[slot])
            self.holders[slot] = [turn.user, *log.extra_holders]
        for content in log.extra_holders:
            self._node(content)
        answer_deps: list[str] = []
        if log.branch == "scripted" and turn.calls:
            request_deps: list[str] = []
            for j, call in enumerate(turn.calls):
                deps = [c for ref in call.premises for c in self.resolve(ref)]
                request_deps.extend(deps)
                if call.error:
                    continue
                content = self.render.tool(call)
                self._results[(turn.index, j)] = content
                self._outputs[(turn.index, j)] = call.output.strip()
                self._node(content, deps)
            self._node(self.render.request(turn.calls), request_deps)
            answer_deps = [c for ref in turn.answer_deps for c in self.resolve(ref)]
        elif log.branch in ("cited", "plain"):
            answer_deps = [c for ref in turn.answer_deps for c in self.resolve(ref)]
        if log.answer and log.answer != ACK:
            self._node(log.answer, answer_deps)

    def expectation(self, slot: str) -> tuple[set[str], set[str], set[str]]:
        """What a correction of ``slot`` must do, now (call it before the correction turn is added).

        Returns:
            ``(corrected, suspect, late)``: the statements holding the value being replaced (they must be
            superseded), the contents that rest on them (every live one must turn suspect; every other live memory
            must stay active), and what rests on values replaced by earlier corrections (a surface that missed
            those may catch them now: late, neither required nor wrong).
        """
        corrected = {normalize(c) for c in self.holders[slot]}
        stale = {normalize(c) for c in self.outdated[slot]}
        suspect = self.dependents(corrected)
        return corrected, suspect, (self.dependents(stale) | stale) - suspect - corrected

    def dependents(self, contents: Iterable[str]) -> set[str]:
        """Every content that rests on ``contents``, directly or not (``contents`` themselves left out)."""
        start = {normalize(c) for c in contents}
        rdeps: dict[str, set[str]] = {}
        for node, deps in self.deps.items():
            for d in deps:
                rdeps.setdefault(d, set()).add(node)
        out: set[str] = set()
        frontier = list(start)
        while frontier:
            for node in rdeps.get(frontier.pop(), ()):
                if node not in out and node not in start:
                    out.add(node)
                    frontier.append(node)
        return out


def summary(script: Script) -> Mapping[str, Any]:
    """Counts per kind and the corrections (slot, template), for reports."""
    fixes = [t.correction for t in script.turns if t.correction is not None]
    return {
        "seed": script.seed,
        "turns": len(script.turns),
        "kinds": script.kinds(),
        "corrections": {f"{c.slot}/{c.template}": sum(1 for x in fixes if x.template == c.template) for c in fixes},
    }
