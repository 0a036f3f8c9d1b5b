"""The offline travel world of ``memlineage demo`` and the notebooks, as public names.

Use it to reproduce the demo step by step (``notebooks/02_langchain_travel_agent.ipynb`` does) or to try the
adapters without an API key:

* :class:`TravelWorld`: a simulated clock and local fare / hotel tables (fares rise 7 EUR per simulated hour).
* :func:`make_tools`: the two real LangChain tools ``get_flight_price(city, date)`` and ``search_hotels(city)``.
* :class:`ScriptedTravelModel`: an offline stand-in for a tool-calling chat model.
* :data:`PROMPT`: the agent prompt (system, ``chat_history``, ``input``, ``agent_scratchpad``).
* :func:`run_agent_demo`: the whole story, printed to a rich console.

Swap ``ScriptedTravelModel`` for any LangChain chat model and nothing else changes.
"""

from memlineage_langchain._demo import PROMPT, ScriptedTravelModel, TravelWorld, make_tools, run_agent_demo

__all__ = ["PROMPT", "ScriptedTravelModel", "TravelWorld", "make_tools", "run_agent_demo"]
