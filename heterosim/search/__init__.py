"""Plan search (``heterosim plan``): enumerate parallel layouts, prune them by validity and
memory, pre-rank them analytically, simulate the most promising in flow fidelity and rank them.

:mod:`.candidates`, :mod:`.prune` and :mod:`.rank` are the parts; :mod:`.plan_search`
(:func:`~heterosim.search.plan_search.search_plans`) drives them and runs the simulations through the
sweep executors. It sits above :mod:`heterosim.simulate` and :mod:`heterosim.sweep`, neither of
which imports it."""
